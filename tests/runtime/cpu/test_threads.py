"""``kernel_thread_limit``: the C kernels' thread count is overridden for the calling thread only,
and a kernel call made under it passes that count to C."""

from __future__ import annotations

import threading

import pytest
import torch

from structgen.errors import ConfigError
from structgen.runtime.cpu import dense, quant
from structgen.runtime.cpu.threads import kernel_thread_limit, kernel_threads


def test_the_limit_holds_on_its_own_thread_only():
    default = torch.get_num_threads()
    inside, outside = threading.Event(), threading.Event()
    seen = {}

    def limited() -> None:
        with kernel_thread_limit(1):
            seen["limited"] = kernel_threads()
            inside.set()
            outside.wait(10)  # the other thread reads while this limit is active
            with kernel_thread_limit(3):
                seen["nested"] = kernel_threads()
            seen["restored"] = kernel_threads()
        seen["after"] = kernel_threads()

    t = threading.Thread(target=limited)
    t.start()
    assert inside.wait(10)
    seen["other"] = kernel_threads()  # this thread, while the other holds its limit
    outside.set()
    t.join(10)
    assert seen == {
        "limited": 1,
        "other": default,
        "nested": 3,
        "restored": 1,
        "after": default,
    }


def test_the_limit_wins_over_the_quantized_kernels_own_setting(monkeypatch):
    monkeypatch.setattr(quant, "_THREADS", 5)
    assert quant._threads() == 5
    with kernel_thread_limit(1):
        assert quant._threads() == 1
    assert quant._threads() == 5


def test_a_kernel_call_passes_this_threads_limit_to_c(monkeypatch):
    if not dense.kernel_available():
        pytest.skip("the dense kernel is not built")
    calls = []
    real = dense._ext

    class Spy:
        def dense_mm(self, *args):
            calls.append(args[-1])  # the thread count is the last argument
            return real.dense_mm(*args)

    monkeypatch.setattr(dense, "_ext", Spy())
    x, w = torch.randn(2, 16), torch.randn(8, 16)
    ref = torch.nn.functional.linear(x, w)
    with kernel_thread_limit(1):
        one = dense.linear(x, w)
    free = dense.linear(x, w)
    assert calls == [1, torch.get_num_threads()]
    torch.testing.assert_close(one, ref)
    assert torch.equal(one, free)  # each output element is computed by one thread


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_limit_is_refused(bad):
    with pytest.raises(ConfigError):
        with kernel_thread_limit(bad):
            pass
