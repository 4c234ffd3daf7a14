"""Tool-call correctness and compile time over BFCL argument schemas (issue #25).

Tools: every function of the BFCL subsets of JSONSchemaBench
(``../shared/corpora/jsonschemabench/plain/BFCL_*``: each schema is an ``anyOf`` of, or
one, ``{"<function name>": <arguments schema>}`` object; the function's arguments schema
becomes its ``parameters``), deduplicated by name. Tool sets: seeded draws of 1 to 128
tools. Models, each behind an in-process server reached with the ``openai`` client:

* ``tiny``: a random 2-layer Llama (the test suite's byte-level tokenizer, 40k positions)
  with the Qwen-style fixture template (native ``<tool_call>`` format). Its byte-level
  tokenizer spells 32 BFCL tools in ~8k prompt tokens (128 in ~34k, whose prefill on 2
  loaded cores is minutes), so its tool sets stop at 32;
* ``smol``: the packaged SmolLM2-135M-Instruct (its template has no tools section: the
  fallback convention). Its 8k context holds at most ~16 BFCL tools, so its tool sets
  stop there; the 128-tool compile is measured on its vocabulary below.

Per tool set: ``required`` and a named ``tool_choice``, each streamed and not (every
request must yield >= 1 call, every call's arguments must parse and validate with
``jsonschema`` against its tool's ``parameters``, streamed calls must equal the
non-streamed ones), ``auto`` (share of requests that call; every emitted call valid; the
content never holds the format's start tag), ``none`` (no ``tool_calls``). Greedy,
``max_tokens`` 96 (the grammar's token budget closes a call in time).

Compile: "request body to first mask ready": the request JSON parsed
(``parse_request``), the tools planned (``plan_tools``: format detection, tool schemas
checked and lowered), the constraint compiled for the vocabulary, a matcher made and its
first token mask filled. Cold: every structgen cache cleared first; warm: the same body
again. Median of ``--repeats`` runs, 128-tool sets, both vocabularies and both formats
(the vocabulary's token trie, built once per process by the first constraint, is built
before the runs).

Peer: XGrammar's ``compile_structural_tag`` of the same hermes constraint (its
``format`` tree, the calls' schemas as ``json_schema`` contents), its cache off, to its
first mask, interleaved with structgen's runs; llguidance's Lark of the same constraint
(``llguidance_lark``: each call's arguments as ``%json``, ``auto``'s free text a lazy
rule up to ``<tool_call>`` then text without it), a fresh ``LLMatcher`` to its first
mask, in the same loop.

Run:  OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_tools.py [--out benchmarks/RESULTS.md]
      [--compile-only] (only the 128-tool compile table)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpora" / "jsonschemabench" / "plain"
QWEN = ROOT / "tests" / "fixtures" / "chat_templates" / "qwen.jinja"
PNG = ROOT / "benchmarks" / "bench_tools.png"
NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _functions(schema: dict) -> list[tuple[str, dict]]:
    """The ``(name, arguments schema)`` pairs of one BFCL schema."""
    out = []
    branches = schema.get("anyOf", [schema]) if isinstance(schema, dict) else []
    for b in branches:
        if isinstance(b, dict) and b.get("type") == "array" and isinstance(b.get("items"), dict):
            out += _functions(b["items"])
            continue
        props = b.get("properties") if isinstance(b, dict) else None
        if isinstance(props, dict) and len(props) == 1:
            ((name, args),) = props.items()
            if isinstance(args, dict) and set(name) <= NAME_OK and len(name) <= 64:
                out.append((name, args))
    return out


def bfcl_tools() -> list[dict]:
    """Every BFCL function as an OpenAI tool dict (first schema per name), sorted by name."""
    seen: dict[str, dict] = {}
    for d in sorted(CORPUS.glob("BFCL_*")):
        for f in sorted(d.glob("*.json")):
            doc = json.loads(f.read_text())
            for name, args in _functions(doc.get("schema", {})):
                seen.setdefault(name, args)
    return [
        {"type": "function", "function": {"name": n, "description": f"BFCL {n}", "parameters": a}}
        for n, a in sorted(seen.items())
    ]


def tool_sets(pool: list[dict], sizes: list[int], seed: int = 0) -> list[list[dict]]:
    rng = random.Random(seed)
    return [rng.sample(pool, k) for k in sizes]


# ------------------------------------------------------------------ servers
class InProcessServer:
    """An AsyncEngine behind ``create_app`` on a uvicorn thread (loopback)."""

    def __init__(self, engine, name: str) -> None:
        import uvicorn

        from benchmarks.support import free_port
        from structgen.server import create_app

        self.engine = engine
        self.server = uvicorn.Server(
            uvicorn.Config(
                create_app(engine, served_model_name=name),
                host="127.0.0.1",
                port=free_port(),
                log_level="warning",
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{self.server.config.port}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.engine.shutdown()


def tiny_model_dir(path: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from benchmarks.support import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=40960,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).eval().save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    (path / "chat_template.jinja").write_text(QWEN.read_text())
    return path


# -------------------------------------------------------------- correctness
def _valid(call, schemas: dict) -> bool:
    import jsonschema

    try:
        args = json.loads(call["arguments"])
        jsonschema.validate(args, schemas[call["name"]])
        return True
    except (KeyError, json.JSONDecodeError, jsonschema.ValidationError):
        return False


def _plain(calls) -> list[dict]:
    return [{"name": c.function.name, "arguments": c.function.arguments} for c in calls or []]


def _streamed(client, kw) -> tuple[str, list[dict]]:
    content, calls = "", {}
    for chunk in client.chat.completions.create(**kw, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"name": None, "arguments": ""})
            if tc.function is not None:
                entry["name"] = entry["name"] or tc.function.name
                entry["arguments"] += tc.function.arguments or ""
    return content, [calls[i] for i in sorted(calls)]


def run_model(client, model: str, sets: list[list[dict]], trigger: str | None) -> dict:
    """Every request of every tool set; returns the counts of the table."""
    stats = {
        k: 0
        for k in (
            "requests",
            "forced",
            "forced_with_call",
            "calls",
            "calls_valid",
            "stream_equal",
            "auto",
            "auto_calling",
            "auto_calls",
            "auto_calls_valid",
            "auto_content_clean",
            "none",
            "none_clean",
            "errors",
        )
    }
    msgs = [
        {"role": "user", "content": "Call the right tool for: the area of a circle of radius 3."}
    ]
    for tools in sets:
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        base = {
            "model": model,
            "messages": msgs,
            "max_tokens": 96,
            "temperature": 0,
            "tools": tools,
        }
        named = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
        for choice in ("required", named):
            kw = {**base, "tool_choice": choice}
            try:
                r = client.chat.completions.create(**kw)
                calls = _plain(r.choices[0].message.tool_calls)
                _, scalls = _streamed(client, kw)
            except Exception as exc:  # noqa: BLE001 - counted, printed
                print(f"  error ({model}, {len(tools)} tools, {choice}): {exc}", flush=True)
                stats["errors"] += 2
                stats["requests"] += 2
                continue
            for got in (calls, scalls):
                stats["requests"] += 1
                stats["forced"] += 1
                stats["forced_with_call"] += bool(got)
                stats["calls"] += len(got)
                stats["calls_valid"] += sum(_valid(c, schemas) for c in got)
                if isinstance(choice, dict):
                    stats["calls_valid"] -= sum(
                        _valid(c, schemas) and c["name"] != choice["function"]["name"] for c in got
                    )
            stats["stream_equal"] += scalls == calls
        r = client.chat.completions.create(**{**base, "tool_choice": "auto"})
        msg = r.choices[0].message
        calls = _plain(msg.tool_calls)
        stats["requests"] += 1
        stats["auto"] += 1
        stats["auto_calling"] += bool(calls)
        stats["auto_calls"] += len(calls)
        stats["auto_calls_valid"] += sum(_valid(c, schemas) for c in calls)
        stats["auto_content_clean"] += trigger is None or trigger not in (msg.content or "")
        r = client.chat.completions.create(**{**base, "tool_choice": "none"})
        stats["requests"] += 1
        stats["none"] += 1
        stats["none_clean"] += not r.choices[0].message.tool_calls
    return stats


# ------------------------------------------------------------------ compile
def compile_once(body: bytes, template: str | None, vocab, mask) -> float:
    """Seconds from the request body (JSON bytes) to the first mask of its tool constraint,
    the server's path (``chat.prepare_chat``): the plan (cached by its digest), the plan's
    compiled grammar for the vocabulary (compiled on a miss), a matcher, its first mask
    filled into ``mask`` (the engine's bitmask is allocated once, not per request).
    """
    from structgen.server.protocol import ChatCompletionRequest, parse_request
    from structgen.server.tools import plan_tools

    t0 = time.perf_counter()
    req = parse_request(ChatCompletionRequest, json.loads(body))
    plan = plan_tools(req.tools, req.tool_choice, req.parallel_tool_calls, template)
    grammar = plan.grammar(vocab, None)
    if grammar is None:
        grammar = plan.constraint.compile(vocab)
        plan.keep_grammar(vocab, None, grammar)
    matcher = grammar.matcher()
    matcher.fill_bitmask(mask, 0)
    return time.perf_counter() - t0


def xgrammar_tag(tools: list[dict], choice: str) -> str:
    """The same hermes constraint as XGrammar's structural tag (its ``format`` tree): a
    ``triggered_tags`` on ``<tool_call>`` whose tags are the calls (``auto``), or a
    ``tags_with_separator`` of them (``required``)."""
    tags = [
        {
            "type": "tag",
            "begin": '<tool_call>\n{"name": '
            + json.dumps(t["function"]["name"])
            + ', "arguments": ',
            "content": {
                "type": "json_schema",
                "json_schema": t["function"].get("parameters") or {"type": "object"},
            },
            "end": "}\n</tool_call>",
        }
        for t in tools
    ]
    if choice == "auto":
        fmt = {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags}
    else:
        fmt = {"type": "tags_with_separator", "tags": tags, "separator": "\n", "at_least_one": True}
    return json.dumps({"type": "structural_tag", "format": fmt})


def xgrammar_once(compiler, info, tag_json: str, bitmask) -> float:
    """Seconds from the structural tag's JSON to XGrammar's first mask (no cache)."""
    import xgrammar as xgr

    t0 = time.perf_counter()
    g = compiler.compile_structural_tag(tag_json)
    xgr.GrammarMatcher(g).fill_next_token_bitmask(bitmask)
    return time.perf_counter() - t0


def llguidance_lark(tools: list[dict], choice: str) -> str:
    """The same hermes constraint as llguidance Lark: one rule per call (its fixed texts,
    its arguments as ``%json``); ``auto``: free text up to each call's tag a lazy lexeme,
    the text after the last call one without ``<tool_call>`` (llguidance's ``&`` and
    ``~``); ``required``: calls separated by a newline."""
    lines = [
        'call: "<tool_call>\\n{\\"name\\": " ('
        + " | ".join(f"f{i}" for i in range(len(tools)))
        + ")"
    ]
    for i, t in enumerate(tools):
        head = json.dumps(json.dumps(t["function"]["name"]) + ', "arguments": ')
        schema = json.dumps(t["function"].get("parameters") or {"type": "object"})
        lines.append(f'f{i}: {head} a{i} "}}\\n</tool_call>"')
        lines.append(f"a{i}: %json {schema}")
    if choice == "auto":  # text up to the first tag (a lazy lexeme), a call, again
        lines[0] = lines[0].replace('call: "<tool_call>', 'call: open "')
        lines.insert(0, "start: call* TEXT")
        lines.append(r"open[lazy]: /(?s:.*)<tool_call>/")
        lines.append(r"TEXT: /(?s:.*)/ & ~/(?s:.*<tool_call>.*)/")
    else:
        lines.insert(0, 'start: call ("\\n" call)*')
    return "\n".join(lines) + "\n"


def llguidance_once(tokenizer, lark: str, bitmask) -> float:
    """Seconds from the Lark text to llguidance's first mask (a fresh matcher: no cache)."""
    import llguidance
    import llguidance.torch

    t0 = time.perf_counter()
    matcher = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(lark))
    llguidance.torch.fill_next_token_bitmask(matcher, bitmask, 0)
    elapsed = time.perf_counter() - t0
    if matcher.is_error():
        raise RuntimeError(f"llguidance: {matcher.get_error()}")
    return elapsed


def clear_caches() -> None:
    from structgen.fsm.compiler import clear_cache
    from structgen.tools import constraint

    clear_cache()
    constraint._build.cache_clear()
    constraint._build_tag.cache_clear()
    constraint._build_lead_tag.cache_clear()
    constraint._lower_arguments.cache_clear()
    from structgen.server import tools as server_tools

    server_tools._PLANS.clear()
    server_tools._check_one.cache_clear()


def compile_times(
    tools: list[dict],
    template: str | None,
    vocab,
    repeats: int,
    hf_tok=None,
    warm_runs: int = 30,
    tags: bool = True,
) -> dict:
    """``{choice: (cold s, warm s, xgrammar s or None, llguidance s or None)}``: medians,
    the peers interleaved in one loop (cold structgen, warm structgen x ``warm_runs``,
    XGrammar cold, llguidance cold); and
    ``"tag"``: ``tag_times`` of the same tools (when ``tags``: once per vocabulary)."""
    import torch

    mask = torch.zeros((1, (len(vocab.token_bytes) + 31) // 32), dtype=torch.int32)
    xg = None
    if hf_tok is not None:
        try:
            import xgrammar as xgr

            info = xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=len(vocab.token_bytes))
            xg = (
                xgr.GrammarCompiler(info, cache_enabled=False),
                info,
                xgr.allocate_token_bitmask(1, info.vocab_size),
            )
        except ImportError:
            xg = None
    llg = None
    if hf_tok is not None:
        try:
            import llguidance.hf
            import llguidance.torch

            lt = llguidance.hf.from_tokenizer(hf_tok)
            llg = (lt, llguidance.torch.allocate_token_bitmask(1, lt.vocab_size))
        except ImportError:
            llg = None
    out = {}
    if tags:
        out["tag"] = tag_times(tools, vocab, mask, warm_runs)
    for choice in ("auto", "required"):
        body = json.dumps(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": tools,
                "tool_choice": choice,
            }
        ).encode()
        tag_json = xgrammar_tag(tools, choice)
        lark = llguidance_lark(tools, choice)
        cold, warm, peer, peer_llg = [], [], [], []
        compile_once(body, template, vocab, mask)  # the vocabulary's token trie: once a process
        for _ in range(repeats):
            clear_caches()
            cold.append(compile_once(body, template, vocab, mask))
            warm += [compile_once(body, template, vocab, mask) for _ in range(warm_runs)]
            if xg is not None:
                peer.append(xgrammar_once(xg[0], xg[1], tag_json, xg[2]))
            if llg is not None:
                peer_llg.append(llguidance_once(llg[0], lark, llg[1]))
        out[choice] = (
            statistics.median(cold),
            statistics.median(warm),
            statistics.median(peer) if peer else None,
            statistics.median(peer_llg) if peer_llg else None,
        )
    return out


def tag_times(tools: list[dict], vocab, mask, warm_runs: int = 30) -> dict:
    """``{(choice, path): warm s}``: medians of a 128-tool ``StructuralTag`` compiled
    without a tool plan (what a plan's kept grammar skips), to its first mask. Paths:
    ``same tag object`` (the hermes ``tool_call_constraint`` tag compiled again) and
    ``equal new tag`` (``StructuralTag.from_dict`` of the request's structural tag JSON,
    XGrammar's ``format`` form, each time: the server's ``response_format`` path). Each
    is compiled once first, so every timed run is a cache hit.
    """
    from structgen.fsm.spec import StructuralTag
    from structgen.tools import FORMATS, tool_call_constraint

    out = {}
    for choice in ("auto", "required"):
        tag = tool_call_constraint(FORMATS["hermes"], tools, choice)
        tag_json = xgrammar_tag(tools, choice)
        for path, make in (
            ("same tag object", lambda tag=tag: tag),
            ("equal new tag", lambda tag_json=tag_json: StructuralTag.from_dict(tag_json)),
        ):
            make().compile(vocab)  # the entry: every timed run hits it
            runs = []
            for _ in range(warm_runs):
                t0 = time.perf_counter()
                make().compile(vocab).matcher().fill_bitmask(mask, 0)
                runs.append(time.perf_counter() - t0)
            out[choice, path] = statistics.median(runs)
    return out


# --------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None, help="append the tables to this file")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-smol", action="store_true")
    ap.add_argument(
        "--compile-only", action="store_true", help="only the 128-tool compile (no requests)"
    )
    args = ap.parse_args()

    import tempfile

    import openai

    from structgen import AsyncEngine
    from structgen.fsm.index.vocabulary import Vocabulary
    from structgen.tools import FORMATS, detect_format

    pool = bfcl_tools()
    print(f"{len(pool)} BFCL functions", flush=True)
    tiny_sets = tool_sets(pool, [1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32], seed=1)
    smol_sets = tool_sets(pool, [1, 2, 3, 4, 5, 6, 8, 10, 12, 16], seed=2)
    results, compiles = {}, {}
    qwen = QWEN.read_text()
    from benchmarks.support import build_tiny_tokenizer

    tiny_tok = build_tiny_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        path = tiny_model_dir(Path(tmp))
        engine = AsyncEngine(str(path), dtype="float32", max_kv_tokens=65536, page_size=16)
        tiny_vocab = engine.engine.vocab
        if not args.compile_only:
            srv = InProcessServer(engine, "tiny")
            client = openai.OpenAI(base_url=srv.base, api_key="x", max_retries=0, timeout=600)
            t0 = time.perf_counter()
            results["tiny (Qwen-style template, <tool_call>)"] = run_model(
                client, "tiny", tiny_sets, FORMATS["hermes"].trigger
            )
            print(f"tiny done in {time.perf_counter() - t0:.0f} s", flush=True)
            srv.close()
        else:
            engine.shutdown()
    big = tool_sets(pool, [128], seed=3)[0]
    compiles[("tiny vocab (400)", "hermes")] = compile_times(
        big, qwen, tiny_vocab, args.repeats, tiny_tok
    )
    if not args.skip_smol:
        from bench_grammar import smollm2_tokenizer

        engine = AsyncEngine()
        smol_vocab = engine.engine.vocab
        smol_template = engine.engine.tokenizer.chat_template
        assert not detect_format(smol_template).native
        if not args.compile_only:
            srv = InProcessServer(engine, "smol")
            client = openai.OpenAI(base_url=srv.base, api_key="x", max_retries=0, timeout=600)
            t0 = time.perf_counter()
            results["SmolLM2-135M (its template: fallback convention)"] = run_model(
                client, "smol", smol_sets, None
            )
            print(f"smol done in {time.perf_counter() - t0:.0f} s", flush=True)
            srv.close()
        else:
            engine.shutdown()
        compiles[("SmolLM2 vocab (49k)", "hermes")] = compile_times(
            big, qwen, smol_vocab, args.repeats, smollm2_tokenizer()
        )
        compiles[("SmolLM2 vocab (49k)", "structgen_json")] = compile_times(
            big,
            smol_template,
            smol_vocab,
            args.repeats,
            tags=False,  # hermes' tag: done
        )
    text = report(results, compiles, tiny_sets, smol_sets, Vocabulary)
    print(text)
    plot(compiles)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write("\n" + text)


def report(results, compiles, tiny_sets, smol_sets, _vocab_cls) -> str:
    lines = [
        "## bench_tools: native tool calls over BFCL argument schemas (#25 slice G3; "
        + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        + ", 2 CPU cores shared by 8 engineers)",
        "",
        "Command: `OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/bench_tools.py "
        "--out benchmarks/RESULTS.md`. Tool sets (sizes): tiny "
        + ", ".join(str(len(s)) for s in tiny_sets)
        + "; SmolLM2 "
        + ", ".join(str(len(s)) for s in smol_sets)
        + " (its 8k context). Greedy, max_tokens 96.",
        "",
        "| model | requests | required+named (streamed and not): with >= 1 call | calls valid "
        "| streamed == non-streamed | auto: share calling | auto calls valid | auto content "
        "without the start tag | none: no tool_calls | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, s in results.items():
        lines.append(
            f"| {model} | {s['requests']} | {s['forced_with_call']}/{s['forced']} "
            f"| {s['calls_valid']}/{s['calls']} | {s['stream_equal']}/{s['forced'] // 2} "
            f"| {s['auto_calling']}/{s['auto']} | {s['auto_calls_valid']}/{s['auto_calls']} "
            f"| {s['auto_content_clean']}/{s['auto']} | {s['none_clean']}/{s['none']} "
            f"| {s['errors']} |"
        )
    lines += [
        "",
        "Compile of a 128-tool request, body to first mask ready (median; cold = every "
        "structgen cache cleared; targets: cold <= 1 s, warm <= 10 ms):",
        "",
        "| vocabulary | format | tool_choice | cold s | warm ms | cold target met "
        "| warm target met | XGrammar structural tag, s (no cache) | XGrammar / structgen cold "
        "| llguidance Lark + %json, s (fresh matcher) | llguidance / structgen cold |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (vocab, fmt), by_choice in compiles.items():
        for choice in ("auto", "required"):
            cold, warm, peer, peer_llg = by_choice[choice]
            shown = f"{peer:.3f} | {peer / cold:.2f}x" if peer is not None else "- | -"
            shown += (
                f" | {peer_llg:.3f} | {peer_llg / cold:.2f}x"
                if peer_llg is not None
                else " | - | -"
            )
            lines.append(
                f"| {vocab} | {fmt} | {choice} | {cold:.3f} | {warm * 1000:.2f} "
                f"| {'yes' if cold <= 1 else 'no'} | {'yes' if warm <= 0.01 else 'no'} "
                f"| {shown} |"
            )
    lines += [
        "",
        "A 128-tool StructuralTag compiled without a tool plan, warm, to first mask "
        "(median; `tag_times`):",
        "",
        "| vocabulary | format | tool_choice | same tag object ms | equal new tag (from_dict) ms |",
        "|---|---|---|---|---|",
    ]
    for (vocab, fmt), by_choice in compiles.items():
        tags = by_choice.get("tag")
        for choice in ("auto", "required") if tags else ():
            lines.append(
                f"| {vocab} | {fmt} | {choice} | {tags[choice, 'same tag object'] * 1000:.3f} "
                f"| {tags[choice, 'equal new tag'] * 1000:.2f} |"
            )
    lines.append("")
    lines.append("Plot: benchmarks/bench_tools.png (cold and warm compile per cell).")
    return "\n".join(lines) + "\n"


def plot(compiles) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    labels, cold, warm = [], [], []
    for (vocab, fmt), by_choice in compiles.items():
        for choice in ("auto", "required"):
            c, w = by_choice[choice][:2]
            labels.append(f"{vocab}\n{fmt}/{choice}")
            cold.append(c)
            warm.append(w * 1000)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    axes[0].barh(labels, cold)
    axes[0].axvline(1.0, color="r", ls="--", label="target 1 s")
    axes[0].set_xlabel("cold compile, s")
    axes[0].legend()
    axes[1].barh(labels, warm)
    axes[1].axvline(10.0, color="r", ls="--", label="target 10 ms")
    axes[1].set_xlabel("warm compile, ms")
    axes[1].legend()
    fig.suptitle("128-tool request: body to first mask (bench_tools)")
    fig.tight_layout()
    fig.savefig(PNG, dpi=90)


if __name__ == "__main__":
    main()
