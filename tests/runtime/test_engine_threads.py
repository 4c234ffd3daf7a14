"""Several threads sharing one Engine: ``generate`` and ``run_requests`` callers batch
together safely, and each request's greedy output equals the same request run alone.
"""

from __future__ import annotations

import threading

from structgen import JsonSchema, Regex, SamplingParams

GREEDY = SamplingParams(max_tokens=24, temperature=0.0)

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}}},
    {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
]
JOBS = [
    (prompt, JsonSchema(schema) if i % 4 else Regex(r"[a-z]{2,8}( [a-z]{2,8}){0,3}"))
    for i, (prompt, schema) in enumerate(
        (p, SCHEMAS[j % len(SCHEMAS)])
        for j, p in enumerate(["Maria", "The quick", "x", "go on", "1 2 3", "hello world"])
    )
]


def _run_threads(engine, call, rounds: int = 3, jobs: list = JOBS) -> list:
    """``call(engine, job)`` for every job of ``jobs``, each in its own thread, ``rounds``
    times over; returns per round the results (exceptions captured) in job order.
    """
    results = []
    for _ in range(rounds):
        out: list = [None] * len(jobs)
        start = threading.Barrier(len(jobs))

        def worker(i: int, out: list = out, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                out[i] = call(engine, jobs[i])
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                out[i] = exc

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread hung"
        results.append(out)
    return results


def _generate(engine, job):
    prompt, constraint = job
    return engine.generate([prompt, prompt + "!"], GREEDY, constraint)


def _run_requests(engine, job):
    prompt, constraint = job
    reqs = [engine.make_request(prompt, GREEDY, constraint)]
    return engine.run_requests(reqs)


def _tokens(outs) -> list:
    return [(o.token_ids, o.finish_reason, o.error) for o in outs]


def test_threads_generate_and_run_requests_match_alone(tiny_engine):
    alone_gen = [_tokens(_generate(tiny_engine, job)) for job in JOBS]
    alone_run = [_tokens(_run_requests(tiny_engine, job)) for job in JOBS]

    def mixed(engine, job):  # half the threads use generate, half run_requests
        i = JOBS.index(job)
        return ("gen", _generate(engine, job)) if i % 2 else ("run", _run_requests(engine, job))

    for round_out in _run_threads(tiny_engine, mixed):
        for i, res in enumerate(round_out):
            assert not isinstance(res, BaseException), f"job {i} raised {res!r}"
            kind, outs = res
            want = alone_gen[i] if kind == "gen" else alone_run[i]
            assert _tokens(outs) == want, f"job {i} ({kind}) differs from alone"
    assert not tiny_engine.scheduler.has_unfinished


def test_threads_extract_match_alone(tiny_engine):
    """``extract`` (generation, then scoring passes through ``generate``) per thread."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "kind": {"enum": ["cat", "dog", "fish"]}},
        "required": ["name", "kind"],
    }
    texts = ["Maria has a cat.", "The dog is Rex.", "A fish named Bo.", "Tom owns a dog."]
    params = SamplingParams(max_tokens=24, temperature=0.0)

    def one(text: str) -> str:
        (res,) = tiny_engine.extract(schema, [text], params=params, errors="return")
        return repr(res)

    alone = [one(t) for t in texts]
    for out in _run_threads(tiny_engine, lambda _engine, text: one(text), rounds=2, jobs=texts):
        assert out == alone
