"""GGUFFile: releasing a tensor's pages from the resident set keeps its bytes readable."""

from __future__ import annotations

import numpy as np

from structgen.runtime.loader.gguf_file import GGUFFile


def test_release_keeps_data_readable(tmp_path):
    import gguf

    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 1024)).astype(np.float32)  # 256 KiB: whole pages inside
    b = rng.standard_normal((3, 5)).astype(np.float32)  # smaller than a page
    path = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("a", a)
    w.add_tensor("b", b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    g = GGUFFile(str(path))
    view = g.raw("a")  # a live view across the release
    for name in ("a", "b"):
        g.release(name)
    assert np.array_equal(view.view(np.float32).reshape(a.shape), a)
    assert np.array_equal(g.raw("b").view(np.float32).reshape(b.shape), b)
    del view
    g.close()
