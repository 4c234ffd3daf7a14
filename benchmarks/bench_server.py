"""OpenAI-compatible server benchmark: ``structgen serve`` (default SmolLM2, CPU) on loopback.

Workloads, each at concurrency 1, 8 and 32 (the openai ``AsyncOpenAI`` client, streamed
chat completions with ``stream_options.include_usage``; greedy, ``max_tokens`` fixed):

* ``chat``: short distinct user questions, free text;
* ``json_schema``: the same questions answered under a ``response_format`` json_schema
  (strict); baseline: ``chat`` at the same concurrency;
* ``shared_prefix``: a ~300-token system prompt shared by every request, distinct user
  questions; baseline: ``distinct_prefix``, system prompts of the same length that differ
  from their first word (no prefix-cache reuse across requests).

Per cell: requests/s, output tokens/s (usage.completion_tokens over wall time), TTFT
(request sent -> first streamed token) and TPOT ((last token - first token) /
(completion_tokens - 1)) p50 / p99, and the ratios to concurrency 1 and to the
workload's baseline. Every cell starts cold: its system prompts begin with the cell's own
tag, so no cell reuses another's cached prefix (the chat template's own default system
prompt is common to all, as in any deployment).

Run:  OMP_NUM_THREADS=1 python benchmarks/bench_server.py [--requests 4 16 32]
      [--max-tokens 32] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PNG = ROOT / "benchmarks" / "bench_server.png"
MODEL = "smol"

QUESTIONS = [
    "Maria Lopez, 34, is a nurse in Lyon.",
    "Kenji Sato, 51, teaches music in Osaka.",
    "Amara Obi, 28, writes software in Lagos.",
    "Lars Berg, 45, fishes near Bergen.",
    "Chen Wei, 39, designs bridges in Wuhan.",
    "Ana Silva, 23, studies law in Porto.",
    "Omar Haddad, 60, bakes bread in Beirut.",
    "Eva Novak, 31, paints murals in Brno.",
]
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"type": "string", "maxLength": 40},
    },
    "required": ["name", "age", "city"],
}
SYSTEM = (
    "You are a careful assistant for a city registry. Answer briefly and precisely. "
    "Each message describes one person: their name, age, job and city. Summarise the "
    "person in one sentence, keep the facts exactly as given, and never invent "
    "details that are not in the message. "
) * 4
FIRST_WORDS = [
    "Alpha",
    "Bravo",
    "Charlie",
    "Delta",
    "Echo",
    "Foxtrot",
    "Golf",
    "Hotel",
    "India",
    "Juliet",
    "Kilo",
    "Lima",
    "Mike",
    "November",
    "Oscar",
    "Papa",
]


def start_server(log: Path, timeout_s: float = 600.0) -> tuple[subprocess.Popen, str]:
    """``structgen serve`` (default model) on a free loopback port; (process, base url)."""
    import httpx

    from benchmarks.support import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "structgen",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        MODEL,
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,  # noqa: SIM115
        cwd=ROOT,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError("server did not start")


def request_body(workload: str, i: int, max_tokens: int, cell: str = "") -> dict:
    """The chat request ``i`` of ``workload`` (``cell`` tags the prompts of one cell)."""
    q = QUESTIONS[i % len(QUESTIONS)] + f" (record {i})"
    body: dict = {
        "model": MODEL,
        "max_tokens": max_tokens,
        "temperature": 0,
        "messages": [{"role": "user", "content": q}],
    }
    if workload == "json_schema":
        body["messages"][0]["content"] = "Extract the person as JSON: " + q
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        }
    elif workload == "shared_prefix":
        body["messages"].insert(0, {"role": "system", "content": f"Session {cell}. {SYSTEM}"})
    elif workload == "distinct_prefix":
        word = f"{FIRST_WORDS[i % len(FIRST_WORDS)]}{cell}-{i}"
        body["messages"].insert(0, {"role": "system", "content": f"{word}. {SYSTEM}"})
    return body


async def one_request(client, body: dict) -> dict:
    """Stream one chat completion; returns its timings and token count."""
    t0 = time.perf_counter()
    first = last = None
    tokens = 0
    stream = await client.chat.completions.create(
        **body, stream=True, stream_options={"include_usage": True}
    )
    async for chunk in stream:
        if chunk.choices and (chunk.choices[0].delta.content or ""):
            last = time.perf_counter()
            first = first or last
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    end = time.perf_counter()
    first = first or end
    last = last or end
    tpot = (last - first) / (tokens - 1) if tokens > 1 else float("nan")
    return {"ttft": first - t0, "tpot": tpot, "tokens": tokens, "end": end}


async def run_cell(
    base: str, workload: str, concurrency: int, n: int, max_tokens: int, bar
) -> dict:
    """``n`` requests with at most ``concurrency`` in flight."""
    import openai

    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=1800)
    sem = asyncio.Semaphore(concurrency)

    async def guarded(i: int) -> dict:
        async with sem:
            body = request_body(workload, i, max_tokens, f"{workload[:2]}{concurrency}")
            r = await one_request(client, body)
            bar.update(1)
            return r

    t0 = time.perf_counter()
    try:
        results = await asyncio.gather(*(guarded(i) for i in range(n)))
    finally:
        await client.close()
    wall = time.perf_counter() - t0
    ttft = np.array([r["ttft"] for r in results])
    tpot = np.array([r["tpot"] for r in results if r["tpot"] == r["tpot"]])
    out = sum(r["tokens"] for r in results)
    return {
        "workload": workload,
        "concurrency": concurrency,
        "requests": n,
        "wall_s": wall,
        "req_per_s": n / wall,
        "out_tok_per_s": out / wall,
        "output_tokens": out,
        "ttft_p50": float(np.percentile(ttft, 50)),
        "ttft_p99": float(np.percentile(ttft, 99)),
        "tpot_p50": float(np.percentile(tpot, 50)) if tpot.size else float("nan"),
        "tpot_p99": float(np.percentile(tpot, 99)) if tpot.size else float("nan"),
    }


BASELINE = {"json_schema": "chat", "shared_prefix": "distinct_prefix"}


def table(rows: list[dict]) -> str:
    """Markdown table with ratios to concurrency 1 and to the workload's baseline."""
    by = {(r["workload"], r["concurrency"]): r for r in rows}
    lines = [
        (
            "| workload | conc. | requests | req/s | out tok/s | tok/s vs conc. 1 | "
            "vs baseline (tok/s; TTFT p50) | TTFT p50 s | TTFT p99 s | TPOT p50 s | "
            "TPOT p99 s |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        one = by.get((r["workload"], 1))
        scale = f"{r['out_tok_per_s'] / one['out_tok_per_s']:.2f}x" if one else "-"
        base = by.get((BASELINE.get(r["workload"], ""), r["concurrency"]))
        vs = (
            (
                f"{BASELINE[r['workload']]}: {r['out_tok_per_s'] / base['out_tok_per_s']:.2f}x; "
                f"{r['ttft_p50'] / base['ttft_p50']:.2f}x"
            )
            if base
            else "-"
        )
        lines.append(
            f"| {r['workload']} | {r['concurrency']} | {r['requests']} | {r['req_per_s']:.2f} | "
            f"{r['out_tok_per_s']:.1f} | {scale} | {vs} | {r['ttft_p50']:.3f} | "
            f"{r['ttft_p99']:.3f} | {r['tpot_p50']:.3f} | {r['tpot_p99']:.3f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for wl in dict.fromkeys(r["workload"] for r in rows):
        rs = [r for r in rows if r["workload"] == wl]
        c = [r["concurrency"] for r in rs]
        axes[0].plot(c, [r["out_tok_per_s"] for r in rs], marker="o", label=wl)
        axes[1].plot(c, [r["ttft_p50"] for r in rs], marker="o", label=wl)
        axes[2].plot(c, [r["tpot_p50"] for r in rs], marker="o", label=wl)
    for ax, title in zip(axes, ("output tokens/s", "TTFT p50 (s)", "TPOT p50 (s)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 8, 32], ["1", "8", "32"])
        ax.set_xlabel("concurrent requests")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("structgen serve, SmolLM2-135M on CPU, loopback, openai client (streamed)")
    fig.tight_layout()
    fig.savefig(PNG, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument(
        "--requests",
        type=int,
        nargs="+",
        default=[4, 16, 32],
        help="requests per cell, one per concurrency level",
    )
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument(
        "--workloads",
        nargs="+",
        default=["chat", "json_schema", "distinct_prefix", "shared_prefix"],
    )
    ap.add_argument("--out", type=Path, default=None, help="append a section to this file")
    args = ap.parse_args()
    from tqdm import tqdm

    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_server(Path(tmp) / "server.log")
        try:
            rows = []
            total = len(args.workloads) * sum(args.requests) + 2
            with tqdm(total=total, desc="requests") as bar:
                asyncio.run(run_cell(base, "chat", 1, 1, 4, bar))  # warm-up
                t0 = time.perf_counter()  # first json_schema request: includes the compile
                asyncio.run(run_cell(base, "json_schema", 1, 1, 4, bar))
                compile_s = time.perf_counter() - t0
                for wl in args.workloads:
                    for conc, n in zip(args.concurrency, args.requests):
                        rows.append(asyncio.run(run_cell(base, wl, conc, n, args.max_tokens, bar)))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    md = table(rows)
    print(md)
    print(f"first json_schema request (schema compile + 4 tokens): {compile_s:.2f} s")
    plot(rows)
    if args.out:
        cmd = "OMP_NUM_THREADS=1 python benchmarks/bench_server.py " + " ".join(sys.argv[1:])
        section = (
            f"\n## bench_server ({time.strftime('%Y-%m-%d')}, SmolLM2-135M Q4_1 GGUF, CPU, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})\n\n"
            f"Command: `{cmd}`; load average at start {load[0]:.1f} / {load[1]:.1f} / "
            f"{load[2]:.1f} (1/5/15 min) on 2 shared cores, so absolute figures are low; "
            f"the ratios within the run are what count. Streamed chat completions, "
            f"greedy, max_tokens={args.max_tokens}, each cell with its own prompts (no "
            f"prefix reuse across cells); a warm-up request per workload kind runs first (the "
            f"first json_schema request, which compiles the schema, took {compile_s:.2f} s "
            f"for 4 tokens; later requests hit the compile cache). Baselines: json_schema "
            f"vs chat, shared_prefix vs distinct_prefix, at the same concurrency; TTFT "
            f"ratios below 1 are faster.\n\n{md}\n\n![server](bench_server.png)\n"
        )
        with open(args.out, "a") as f:
            f.write(section)


if __name__ == "__main__":
    main()
