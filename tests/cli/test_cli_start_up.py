"""The one-shot commands' start-up without the cyclic garbage collector: paused until the
engine is loaded, what the start-up built frozen then, and the caller's collector state back
when ``main`` returns (or raises)."""

from __future__ import annotations

import argparse
import gc
import threading

import pytest

import structgen.cli as cli
from structgen.cli import main


@pytest.fixture
def collector():
    """The collector on and nothing frozen (the state the pause starts from), restored after;
    no engine's background vocabulary preparation running (its objects would leave the
    frozen generation as they are freed)."""
    for thread in threading.enumerate():
        if thread.name == "structgen-vocab-prepare":
            thread.join()
    was = gc.isenabled()
    gc.enable()
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()
    if not was:
        gc.disable()


def test_paused_until_the_load_then_frozen_then_restored(collector):
    args = argparse.Namespace()
    with cli._start_up_gc(args):
        assert not gc.isenabled()
        args.after_load()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        args.after_load()  # once only
        assert gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_restored_when_the_command_fails_before_the_load(collector):
    with pytest.raises(ValueError), cli._start_up_gc(argparse.Namespace()):
        assert not gc.isenabled()
        raise ValueError("bad input")
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_the_callers_policy_is_kept(collector, monkeypatch):
    gc.disable()
    args = argparse.Namespace()
    with cli._start_up_gc(args):
        assert not gc.isenabled() and not hasattr(args, "after_load")
    assert not gc.isenabled()
    gc.enable()
    gc.freeze()  # objects frozen by the caller: left as they are
    # Calls recorded, not the frozen count: another thread freeing a frozen object (a server
    # test's threads winding down) lowers the count without anyone unfreezing.
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    with cli._start_up_gc(args):
        assert gc.isenabled() and not hasattr(args, "after_load")
    assert calls == [] and gc.isenabled()


def test_generate_loads_with_the_collector_paused(tiny_llama_dir, collector, monkeypatch, capsys):
    """``main`` in-process: the engine is built with the collector off, the start-up is
    frozen once it is loaded, and the collector is back on with nothing frozen after."""
    import structgen.runtime.engine as engine_module

    seen = []

    class Recording(engine_module.Engine):
        def __init__(self, *a, **k):
            seen.append(("init", gc.isenabled()))
            super().__init__(*a, **k)

    real = cli._engine

    def engine(args):
        e = real(args)
        seen.append(("loaded", gc.isenabled(), gc.get_freeze_count() > 0))
        return e

    monkeypatch.setattr(engine_module, "Engine", Recording)
    monkeypatch.setattr(cli, "_engine", engine)
    argv = ["generate", "--model", str(tiny_llama_dir), "--prompt", "x", "--raw"]
    assert main([*argv, "--max-tokens", "2"]) == 0
    assert capsys.readouterr().out.strip()
    assert seen == [("init", False), ("loaded", True, True)]
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_constrained_generate_freezes_the_prepared_vocabulary(
    tiny_llama_dir, collector, monkeypatch, capsys
):
    """A constrained command waits for the vocabulary's background preparation before the
    start-up is frozen, so the prepared tables are frozen with the model."""
    real = cli._engine
    seen = []

    def engine(args):
        e = real(args)
        seen.append((args.constrained, gc.get_freeze_count() > 0, e._vocab_preparation.done()))
        return e

    monkeypatch.setattr(cli, "_engine", engine)
    argv = ["generate", "--model", str(tiny_llama_dir), "--prompt", "x", "--raw"]
    assert main([*argv, "--max-tokens", "2", "--regex", "[a-z]+"]) == 0
    assert capsys.readouterr().out.strip()
    assert seen == [(True, True, True)]
