"""Kernel tests run Triton in its interpreter on CPU (TRITON_INTERPRET=1, set before import).

The variable must be set before ``triton`` is first imported (Triton decorates its own
library functions at import); ``structgen.kernels._triton`` also sets it on machines
without CUDA. Every test forces ``backend="triton"`` on small CPU tensors and compares
with the torch reference.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

try:
    import triton  # noqa: F401, E402

    from structgen.kernels._triton import is_interpreting  # noqa: E402

    _SKIP = None if is_interpreting() else "triton was imported before TRITON_INTERPRET=1 was set"
except ImportError:
    _SKIP = "triton is not importable"


def pytest_collection_modifyitems(config, items):
    if _SKIP is None:
        return
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=_SKIP))
