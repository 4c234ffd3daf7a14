"""A fast, minimal GGUF reader: metadata, tensor index, memory-mapped tensor bytes.

``gguf.GGUFReader`` builds a numpy view per array element (slow on a large vocabulary);
this reader walks the same header with ``struct``. The format follows ggml's ``docs/gguf.md``
(versions 2 and 3).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

import numpy as np

from structgen.errors import ModelLoadError

__all__ = ["GGUFFile", "GGUFTensorInfo", "GGML_TYPES"]

# value type id -> struct format (scalars)
_SCALAR = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_NP = {
    0: np.uint8,
    1: np.int8,
    2: np.uint16,
    3: np.int16,
    4: np.uint32,
    5: np.int32,
    6: np.float32,
    7: np.bool_,
    10: np.uint64,
    11: np.int64,
    12: np.float64,
}
_STRING, _ARRAY = 8, 9

# ggml tensor type id -> (name, elements per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    30: ("BF16", 1, 2),
}


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor of the file.

    Attributes:
        name: GGUF tensor name (``blk.0.attn_q.weight``).
        shape: numpy (row-major) shape, i.e. GGUF dims reversed: ``[out, in]`` for a linear.
        type_id: ggml type id; ``type_name`` its name (``Q4_1``).
        offset: absolute byte offset of the data in the file.
        nbytes: size of the data in bytes.
    """

    name: str
    shape: tuple[int, ...]
    type_id: int
    type_name: str
    offset: int
    nbytes: int


class GGUFFile:
    """Parsed GGUF header plus a read-only memory map of the file.

    Args:
        path: the ``.gguf`` file.
        skip_arrays_over: arrays longer than this are skipped (stored as None) unless
            their key is in ``keep_arrays``; saves time when the vocabulary is not needed.
        keep_arrays: keys of long arrays to read anyway.

    Raises:
        ModelLoadError: not a GGUF file, unsupported version or value type.
    """

    def __init__(
        self, path: str, skip_arrays_over: int | None = None, keep_arrays: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        with open(path, "rb") as f:
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self._mm
        if buf[:4] != b"GGUF":
            raise ModelLoadError(f"{path} is not a GGUF file (bad magic {bytes(buf[:4])!r})")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
        if version not in (2, 3):
            raise ModelLoadError(f"{path}: unsupported GGUF version {version}")
        self.version = version
        pos = 24
        self.metadata: dict[str, object] = {}
        for _ in range(n_kv):
            key, pos = self._str(buf, pos)
            (vtype,) = struct.unpack_from("<I", buf, pos)
            pos += 4
            skip = skip_arrays_over if key not in keep_arrays else None
            value, pos = self._value(buf, pos, vtype, skip)
            self.metadata[key] = value
        infos = []
        for _ in range(n_tensors):
            name, pos = self._str(buf, pos)
            (ndim,) = struct.unpack_from("<I", buf, pos)
            dims = struct.unpack_from(f"<{ndim}Q", buf, pos + 4)
            pos += 4 + 8 * ndim
            ttype, off = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            infos.append((name, tuple(int(d) for d in reversed(dims)), ttype, off))
        align = int(self.metadata.get("general.alignment", 32))
        data_start = (pos + align - 1) // align * align
        self.tensors: dict[str, GGUFTensorInfo] = {}
        for name, shape, ttype, off in infos:
            if ttype not in GGML_TYPES:
                raise ModelLoadError(f"{path}: tensor {name} has unsupported ggml type {ttype}")
            tname, block, bbytes = GGML_TYPES[ttype]
            n = int(np.prod(shape)) if shape else 1
            self.tensors[name] = GGUFTensorInfo(
                name, shape, ttype, tname, data_start + off, n // block * bbytes
            )

    @staticmethod
    def _str(buf, pos: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8
        return buf[pos : pos + n].decode("utf-8", errors="replace"), pos + n

    def _value(self, buf, pos: int, vtype: int, skip: int | None):
        if vtype in _SCALAR:
            fmt = "<" + _SCALAR[vtype]
            return struct.unpack_from(fmt, buf, pos)[0], pos + struct.calcsize(fmt)
        if vtype == _STRING:
            return self._str(buf, pos)
        if vtype == _ARRAY:
            etype, count = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            if etype in _NP:
                size = np.dtype(_NP[etype]).itemsize * count
                if skip is not None and count > skip:
                    return None, pos + size
                arr = np.frombuffer(buf, dtype=_NP[etype], count=count, offset=pos).copy()
                return arr.tolist(), pos + size
            if etype == _STRING:
                if skip is not None and count > skip:
                    for _ in range(count):
                        (n,) = struct.unpack_from("<Q", buf, pos)
                        pos += 8 + n
                    return None, pos
                out = []
                unpack = struct.unpack_from
                for _ in range(count):
                    (n,) = unpack("<Q", buf, pos)
                    pos += 8
                    out.append(buf[pos : pos + n].decode("utf-8", errors="replace"))
                    pos += n
                return out, pos
            items = []
            for _ in range(count):
                v, pos = self._value(buf, pos, etype, skip)
                items.append(v)
            return items, pos
        raise ModelLoadError(f"{self.path}: unsupported GGUF value type {vtype}")

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a uint8 array (a zero-copy view of the memory map)."""
        info = self.tensors[name]
        return np.frombuffer(self._mm, dtype=np.uint8, count=info.nbytes, offset=info.offset)

    def release(self, name: str) -> None:
        """Drop the tensor's pages from this process's resident set (``madvise(MADV_DONTNEED)``
        over the whole pages inside its data), once they have been read into their final tensor.

        The map is read-only and file-backed, so this never loses data: a later read of the same
        bytes (a live :meth:`raw` view) faults them in again from the file (or the page cache).
        Raises: never (a no-op where ``madvise`` is unavailable).
        """
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if advice is None or not hasattr(self._mm, "madvise"):
            return
        info = self.tensors[name]
        page = mmap.PAGESIZE
        start = -(-info.offset // page) * page  # whole pages only: neighbours stay resident
        end = (info.offset + info.nbytes) // page * page
        if end > start:
            try:
                self._mm.madvise(advice, start, end - start)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Release the memory map (arrays from :meth:`raw` must not be used afterwards)."""
        try:
            self._mm.close()
        except BufferError:  # views still alive; the map closes when they are collected
            pass
