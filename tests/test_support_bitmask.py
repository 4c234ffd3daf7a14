"""``benchmarks.support.mask_bits`` / ``allowed_ids``: a bitmask row's allowed tokens against brute
force (bit ``t % 32`` of word ``t // 32``, read one token at a time)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.support import allowed_ids, mask_bits


def _brute(words: list[int], n: int) -> list[bool]:
    return [t < 32 * len(words) and bool((words[t // 32] >> (t % 32)) & 1) for t in range(n)]


def test_mask_bits_and_allowed_ids_against_brute_force() -> None:
    rng = np.random.default_rng(5)
    for num_words in [1, 2, 7]:
        for _ in range(20):
            row = rng.integers(-(2**31), 2**31, num_words, dtype=np.int64).astype(np.int32)
            row[0] = -1 if rng.random() < 0.3 else row[0]  # bit 31 set in every word form
            words = [int(w) & 0xFFFFFFFF for w in row]
            for n in [None, 1, 31, 32 * num_words - 5, 32 * num_words + 9]:
                want = _brute(words, 32 * num_words if n is None else n)
                read_only = row.copy()
                read_only.flags.writeable = False  # as token_index.bitmask returns them
                forms = (row, row.view(np.uint32), read_only, torch.from_numpy(row.copy()))
                for form in forms:
                    assert mask_bits(form, n).tolist() == want, (words, n)
                    assert allowed_ids(form, n) == [t for t, b in enumerate(want) if b]


def test_a_row_must_be_one_dimensional_words() -> None:
    with pytest.raises(ValueError, match="1-D 4-byte words"):
        mask_bits(torch.zeros((1, 2), dtype=torch.int32))
    with pytest.raises(ValueError, match="1-D 4-byte words"):
        mask_bits(np.zeros(2, np.int64))
