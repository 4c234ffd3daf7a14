"""Where the loader caches built tokenizers and dequantized weights."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from structgen.env import read as read_setting

__all__ = ["cache_root", "file_cache_key"]


def cache_root() -> Path:
    """The cache directory: ``structgen.env``'s ``cache_dir``, read at each call. Raises: never."""
    return read_setting("cache_dir")


def file_cache_key(path: str | os.PathLike) -> str:
    """Key that changes when the file does:
    ``<stem>-<size>-<mtime_ns>-<hash of the absolute path>``.
    """
    p = Path(path).resolve()
    st = p.stat()
    digest = hashlib.sha1(str(p).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in p.stem)[:60]
    return f"{stem}-{st.st_size}-{st.st_mtime_ns}-{digest}"
