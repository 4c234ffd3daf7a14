"""ForwardBatch.build against torch's own index arithmetic (the reference: the plan before
it moved to numpy), on seeded random ragged batches."""

from __future__ import annotations

import random

import torch

from structgen.runtime.forward_batch import ForwardBatch


def _reference(chunks, prefix_lens, page_tables, page_size, logits_rows, logits_token_indices):
    ext_t = torch.tensor([len(c) for c in chunks], dtype=torch.int64)
    pre_t = torch.tensor(prefix_lens, dtype=torch.int64)
    seq_ids = torch.repeat_interleave(torch.arange(len(chunks)), ext_t)
    starts = torch.cumsum(ext_t, 0) - ext_t
    positions = pre_t[seq_ids] + torch.arange(int(ext_t.sum())) - starts[seq_ids]
    pt = torch.zeros((len(chunks), max(1, max(len(p) for p in page_tables))), dtype=torch.int64)
    for b, pages in enumerate(page_tables):
        if pages:
            pt[b, : len(pages)] = torch.tensor(pages, dtype=torch.int64)
    out_slots = pt[seq_ids, positions // page_size] * page_size + positions % page_size
    rows = list(range(len(chunks))) if logits_rows is None else logits_rows
    last = starts + ext_t - 1
    if logits_token_indices is not None:
        idx = torch.tensor(logits_token_indices, dtype=torch.int64)
    elif rows:
        idx = last[torch.tensor(rows, dtype=torch.int64)]
    else:
        idx = torch.zeros(0, dtype=torch.int64)
    return positions, out_slots, seq_ids, pre_t, ext_t, pt, idx


def test_build_equals_torch_reference_on_random_batches():
    rng = random.Random(0)
    for case in range(300):
        batch, page_size = rng.randint(1, 12), rng.choice([1, 4, 16])
        chunks = [[rng.randrange(1000) for _ in range(rng.randint(1, 40))] for _ in range(batch)]
        prefix_lens = [rng.randint(0, 70) for _ in range(batch)]
        tables = []
        for c, p in zip(chunks, prefix_lens):
            need = -(-(p + len(c)) // page_size)
            tables.append(rng.sample(range(1, 500), need + rng.randint(0, 2)))
        mode = case % 3
        rows = None if mode == 0 else sorted(rng.sample(range(batch), rng.randint(0, batch)))
        flat = sum(len(c) for c in chunks)
        token_idx = sorted(rng.sample(range(flat), rng.randint(0, flat))) if mode == 2 else None
        got = ForwardBatch.build(chunks, prefix_lens, tables, page_size, rows, "cpu", token_idx)
        want = _reference(chunks, prefix_lens, tables, page_size, rows, token_idx)
        fields = (got.positions, got.out_slots, got.seq_ids, got.prefix_lens)
        fields += (got.extend_lens, got.page_table, got.logits_indices)
        for g, w in zip(fields, want):
            assert g.dtype == torch.int64 and g.is_contiguous() and torch.equal(g, w), case
        assert torch.equal(got.input_ids, torch.tensor([t for c in chunks for t in c]))
        assert got.batch_size == batch and got.num_tokens == flat and got.page_size == page_size


def test_build_host_holds_the_same_arrays_in_numpy():
    # the host plan CpuDecoder reads (numpy, no torch) equals the tensors a torch model gets
    import numpy as np

    rng = random.Random(1)
    for case in range(60):
        batch, page_size = rng.randint(1, 6), rng.choice([1, 4, 16])
        chunks = [[rng.randrange(1000) for _ in range(rng.randint(1, 20))] for _ in range(batch)]
        prefix_lens = [rng.randint(0, 40) for _ in range(batch)]
        tables = [
            rng.sample(range(1, 500), -(-(p + len(c)) // page_size))
            for c, p in zip(chunks, prefix_lens)
        ]
        rows = None if case % 2 else sorted(rng.sample(range(batch), rng.randint(0, batch)))
        host = ForwardBatch.build_host(chunks, prefix_lens, tables, page_size, rows)
        dev = ForwardBatch.build(chunks, prefix_lens, tables, page_size, rows, "cpu")
        names = ("input_ids", "positions", "out_slots", "seq_ids", "prefix_lens")
        names += ("extend_lens", "page_table", "logits_indices")
        converted = host.to_torch("cpu")
        for name in names:
            h, d = getattr(host, name), getattr(dev, name)
            assert isinstance(h, np.ndarray) and h.dtype == np.int64, (case, name)
            assert np.array_equal(h, d.numpy()), (case, name)
            assert torch.equal(getattr(converted, name), d), (case, name)
        assert host.batch_size == dev.batch_size and host.num_tokens == dev.num_tokens
        assert converted.page_size == page_size and dev.to_torch() is dev
