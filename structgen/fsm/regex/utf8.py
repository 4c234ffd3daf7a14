"""Code-point ranges -> UTF-8 byte-range sequences (the approach of Rust's ``utf8-ranges``).

A range of code points ``[lo, hi]`` is split until every piece is a product of byte
ranges, e.g. U+0080..U+07FF -> ``[C2-DF][80-BF]``. Surrogates (U+D800..U+DFFF) are
dropped; overlong forms and code points above U+10FFFF are never produced, so an
automaton built from these sequences accepts only valid UTF-8.
"""

from __future__ import annotations

__all__ = ["MAX_CODE_POINT", "utf8_sequences", "valid_ranges"]

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_LENGTH_ENDS = (0x7F, 0x7FF, 0xFFFF)  # last code point of each UTF-8 length


def valid_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged ``ranges`` clipped to ``0..MAX_CODE_POINT`` with surrogates removed."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        lo, hi = max(lo, 0), min(hi, MAX_CODE_POINT)
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    clipped: list[tuple[int, int]] = []
    for lo, hi in out:
        if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
            clipped.append((lo, hi))
            continue
        if lo < _SURROGATES[0]:
            clipped.append((lo, _SURROGATES[0] - 1))
        if hi > _SURROGATES[1]:
            clipped.append((_SURROGATES[1] + 1, hi))
    return clipped


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose union encodes exactly the code points ``lo..hi``.

    Args:
        lo: inclusive lower code-point bound.
        hi: inclusive upper code-point bound; ``lo..hi`` is already free of surrogates
            (see ``valid_ranges``).

    Returns:
        A list of sequences; each is a list of inclusive ``(first_byte, last_byte)``
        ranges, one per byte of the encoding.
    """
    out: list[list[tuple[int, int]]] = []
    stack = [(lo, hi)]
    while stack:
        s, e = stack.pop()
        split = next((m for m in _LENGTH_ENDS if s <= m < e), None)
        if split is not None:  # different encoded lengths
            stack += [(split + 1, e), (s, split)]
            continue
        if e <= 0x7F:
            out.append([(s, e)])
            continue
        n = len(chr(s).encode("utf-8", "surrogatepass"))
        for i in range(1, n):
            m = (1 << (6 * i)) - 1
            if s & ~m != e & ~m:
                if s & m:
                    stack += [((s | m) + 1, e), (s, s | m)]
                    break
                if e & m != m:
                    stack += [(e & ~m, e), (s, (e & ~m) - 1)]
                    break
        else:
            a = chr(s).encode("utf-8")
            b = chr(e).encode("utf-8")
            out.append(list(zip(a, b)))
    return out
