"""The model's CPU fast paths: every Python wrapper over the model's C kernels.

One module per extension (built by ``setup.py`` from ``csrc/``; each is optional and its
wrapper falls back to the torch reference of ``structgen.kernels`` when it is missing):

- :mod:`~structgen.runtime.cpu.dense` (``csrc/densekernel.c``): fp32/bf16 small-batch ``linear``.
- :mod:`~structgen.runtime.cpu.ops` (``csrc/cpuops.c``): fused add + RMSNorm, rotary + K/V
  store, paged attention over the cache in place, SiLU gating.
- :mod:`~structgen.runtime.cpu.attention`: the CPU split of a step's paged attention between
  the fused kernel (short extensions) and the SDPA path (prefill chunks).
- :mod:`~structgen.runtime.cpu.decode_step` (``csrc/decodestep.c``): every decoder layer of a
  small step in one call, over a plan checked once per plan.
- :mod:`~structgen.runtime.cpu.layer_table` (torch-free): the fused step's table columns and
  its ``decode_layers`` call, for :mod:`~structgen.runtime.cpu.decode_step` and the model below.
- :mod:`~structgen.runtime.cpu.decoder`: the default engine's whole forward (embedding, the fused
  decode step's table, final norm, tied int8 head) over host arrays, every step of any length.
- :mod:`~structgen.runtime.cpu.model` (torch-free): ``CpuModel``, the default engine's kind of
  GGUF model built from the file in numpy (the table from ``ndarray`` addresses), run by the
  decoder; its torch model built over the same arrays on first need.
- :mod:`~structgen.runtime.cpu.quant` (``csrc/qkernel.c``): int4 / int8 weight-only matmuls.

A wrapper checks its arguments in O(1) before the C call (shape, dtype, contiguity, device):
arguments the kernel does not take but the reference does fall back to the reference;
inconsistent ones raise :class:`~structgen.errors.KernelArgumentError`, never reach C.
The grammar's C loops (``tokentrie.c``, ``regexlower.c``) live with their stage in
``structgen.fsm``.
"""
