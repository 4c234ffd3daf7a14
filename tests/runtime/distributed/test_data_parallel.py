"""Data parallelism: the cache-aware router (unit) and two replicas behind it (processes)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import DistributedError
from structgen.runtime.distributed import ApproxRadixTree, CacheAwareRouter
from structgen.runtime.distributed.router import routing_key

SETTINGS = {"dtype": "float32", "max_kv_tokens": 2048, "page_size": 4, "dist_timeout_s": 20}
GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
PREFIX_A = (
    "You are a careful assistant. Extract the name, the age and the city of the person "
    "described below, and answer in JSON. Text: "
)
PREFIX_B = (
    "def f(x): return x * 2  # The quick brown fox jumps over the lazy dog. Translate the "
    "next sentence into French, word by word: "
)


# ----------------------------------------------------------------------------- unit
def test_tree_prefix_match_split_and_lru_eviction():
    t = ApproxRadixTree()
    t.insert("hello world", 0)
    t.insert("hello there", 1)
    t.insert("help", 0)
    assert t.prefix_match("hello wor") == {0: 9, 1: 6}
    assert t.prefix_match("hello thereabouts") == {0: 6, 1: 11}
    assert t.prefix_match("xyz") == {}
    assert t.size == {0: 12, 1: 11}
    t.evict(0, 5)  # "world" (oldest leaf), then "p", then "lo " go; "hel" stays
    assert t.size[0] <= 5
    assert t.prefix_match("hello world") == {0: 3, 1: 6}
    assert t.prefix_match("hello there") == {0: 3, 1: 11}  # replica 1 untouched


def test_router_affinity_then_load():
    r = CacheAwareRouter(2)
    keys = [PREFIX_A + "1", PREFIX_A + "2", PREFIX_B + "1", PREFIX_B + "2", PREFIX_A + "3"]
    got = [r.route(routing_key(k)) for k in keys]
    assert got[:2] == [got[0]] * 2 and got[2:4] == [1 - got[0]] * 2 and got[4] == got[0]
    assert r.num_cache_routed == [2, 1] if got[0] == 0 else [1, 2]
    r2 = CacheAwareRouter(3)
    spread = [r2.route(routing_key(f"{c} unrelated prompt")) for c in "abcdef"]
    assert sorted(spread.count(i) for i in range(3)) == [2, 2, 2]
    r3 = CacheAwareRouter(2, balance_abs_threshold=2, balance_rel_threshold=1.0)
    for _ in range(4):
        assert r3.route(routing_key(PREFIX_A)) == 0 or r3.outstanding[0] > 2
    assert r3.outstanding[1] >= 1  # imbalance overrides the cache affinity
    r3.finished(0)
    assert r3.outstanding[0] == 2


def test_chat_and_token_keys():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]
    assert routing_key(msgs).startswith(routing_key(msgs[:1]))
    assert routing_key([1, 2, 3]) == (1, 2, 3)


# ----------------------------------------------------------------------- processes
@pytest.fixture(scope="module")
def dp_engine(tiny_model_dirs):
    engine = Engine(tiny_model_dirs["llama_gqa"], data_parallel_size=2, **SETTINGS)
    yield engine
    engine.close()


@pytest.mark.timeout(60)
def test_shared_prefixes_stick_to_one_replica_with_cache_hits(dp_engine, tiny_model_dirs):
    assert type(dp_engine).__name__ == "DataParallelEngine"
    waves = [
        [PREFIX_A + "Maria Lopez, 34, nurse.", PREFIX_B + "Bonjour."],
        [PREFIX_A + "Ada, 36.", PREFIX_B + "le chat", PREFIX_A + "Bob, 5.", PREFIX_B + "x"],
    ]
    where: dict[str, list[int]] = {"A": [], "B": []}
    outs = []
    for wave in waves:  # the first wave fills each replica's cache, the second hits it
        rids = [dp_engine.submit(p, GREEDY) for p in wave]
        for p, rid in zip(wave, rids):
            where["A" if p.startswith(PREFIX_A) else "B"].append(dp_engine.replica_of(rid))
        outs += [dp_engine.result(rid) for rid in rids]
    assert len(set(where["A"])) == 1 and len(set(where["B"])) == 1
    assert where["A"][0] != where["B"][0]  # the two prefixes went to different replicas
    stats = dp_engine.stats()
    single = Engine(tiny_model_dirs["llama_gqa"], **SETTINGS)
    prefix_tokens = min(len(single.encode_prompt(p)) for p in (PREFIX_A, PREFIX_B))
    for rep in stats["replicas"]:  # two second-wave requests per replica reuse the prefix
        assert rep["prefix_hit_tokens"] >= 2 * (prefix_tokens - 2 * SETTINGS["page_size"])
    assert stats["cache_routed"] == [2, 2]  # the second wave, routed by its cached prefix
    ref = single.generate([p for w in waves for p in w], GREEDY)
    assert [o.token_ids for o in outs] == [o.token_ids for o in ref]  # replicas are exact


@pytest.mark.timeout(60)
def test_load_spreads_without_shared_prefixes(dp_engine):
    before = list(dp_engine.router.num_routed)
    prompts = [f"{c} is a letter number {i}" for i, c in enumerate("qwzxvk")]
    outs = dp_engine.generate(prompts, GREEDY)
    assert all(len(o.token_ids) == 8 for o in outs)
    routed = [a - b for a, b in zip(dp_engine.router.num_routed, before)]
    assert routed == [3, 3]
    assert dp_engine.stats()["outstanding"] == [0, 0]


@pytest.fixture(scope="module")
def single_engine(tiny_model_dirs):
    return Engine(tiny_model_dirs["llama_gqa"], **SETTINGS)


@pytest.mark.timeout(60)
def test_extract_and_memory_report_on_replicas(dp_engine, single_engine):
    """The data-parallel engine has the Engine interface: extraction (a grammar compiled
    in the front, shipped as its spec) matches one engine's; memory adds up over replicas."""
    from structgen.errors import ExtractionError

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["n"],
    }
    texts = ["Maria is 34.", "Bob is 5."]
    params = SamplingParams(max_tokens=24, temperature=0.0)
    got = dp_engine.extract(schema, texts, params=params, errors="return")
    ref = single_engine.extract(schema, texts, params=params, errors="return")
    assert [g.raw_text if isinstance(g, ExtractionError) else g for g in got] == [
        r.raw_text if isinstance(r, ExtractionError) else r for r in ref
    ]
    mem, one = dp_engine.memory_report(), single_engine.memory_report()
    assert mem["weight_bytes"] == 2 * one["weight_bytes"] and mem["kv_bytes"] == 2 * one["kv_bytes"]
    assert dp_engine.max_request_tokens() == single_engine.max_request_tokens()


@pytest.mark.timeout(60)
def test_dsl_program_and_streaming_on_replicas(dp_engine, single_engine):
    """A DSL program runs on the data-parallel engine as on one engine (EngineBackend over
    BaseEngine.run_requests); streamed deltas add up to each final text."""
    import structgen
    from structgen import Regex, gen

    @structgen.function
    def prog(s, name):
        s += "Name: " + name + "\nAge:" + gen("age", max_tokens=4, regex=r" [0-9]{1,2}")
        s += "\nJob:" + gen("job", max_tokens=6)

    assert (
        prog.run("Maria", backend=dp_engine).text()
        == prog.run("Maria", backend=single_engine).text()
    )
    reqs = [
        dp_engine.make_request(p, GREEDY, c)
        for p, c in [("Hello there", None), ("Age:", Regex(r" [0-9]{2}"))]
    ]
    deltas = ["", ""]

    def listener(i, out):
        deltas[i] += out.delta_text

    outs = dp_engine.run_requests(reqs, listener)
    assert deltas == [o.text for o in outs]
    ref = single_engine.generate(["Hello there", "Age:"], GREEDY, [None, Regex(r" [0-9]{2}")])
    assert [o.token_ids for o in outs] == [o.token_ids for o in ref]


@pytest.mark.timeout(60)
def test_replica_config_error_reaches_the_caller(tiny_model_dirs):
    from structgen.errors import ConfigError

    with pytest.raises(ConfigError, match="data_parallel_size must be an int >= 1"):
        Engine(tiny_model_dirs["llama_gqa"], data_parallel_size=0)
    with pytest.raises(ConfigError, match="does not divide the model's 4 attention heads"):
        Engine(
            tiny_model_dirs["llama_gqa"], data_parallel_size=2, tensor_parallel_size=3, **SETTINGS
        )


@pytest.mark.timeout(60)
def test_constraint_without_regex_text_reaches_the_replica_as_its_spec(dp_engine):
    """A grammar with no regex text (``DigitRun``: the grammar bases implemented over token
    ids) crosses to the replica as its spec (its compiled grammar refuses to be pickled),
    is compiled there for the replica's vocabulary and enforced: every output is exactly
    five single-digit tokens, sampled at temperature 1."""
    import pickle

    from tests.fsm._digit_run import DigitRun

    grammar = DigitRun(5).compile(None)
    with pytest.raises(TypeError, match="its spec does"):
        pickle.dumps(grammar)
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=3)
    prompts = [f"{c} wants a number:" for c in "mnop"]
    rids = [
        dp_engine.submit(p, params, grammar if i % 2 else DigitRun(5))
        for i, p in enumerate(prompts)
    ]
    assert all(dp_engine.replica_of(r) in (0, 1) for r in rids)
    for rid in rids:
        out = dp_engine.result(rid)
        assert out.finish_reason == "stop", out.error
        assert len(out.token_ids) == 5 and len(out.text) == 5 and out.text.isdigit()


@pytest.mark.timeout(60)
def test_dead_replica_is_reported(dp_engine):
    os.kill(dp_engine._procs[1].pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match="replica 1"):
        dp_engine.generate([f"{c} prompt" for c in "abcd"], GREEDY)
    assert time.monotonic() - t0 < 10


def test_portable_constraint_keeps_trigger_and_shared_recursion():
    """A compiled grammar sent to a replica (pickled as its spec) compiles there to the
    same automaton: trigger (tool calls, reasoning) and shared recursive definitions kept."""
    import pickle

    from structgen.fsm import compile_json_schema
    from structgen.fsm.spec import spec_of
    from tests.fsm.test_spec import TREE

    grammar = compile_json_schema(TREE, None, trigger="</think>", max_recursion_depth=10)
    assert grammar.definitions  # recursion is shared, not written out
    term = pickle.loads(pickle.dumps(spec_of(grammar)))
    again = term.compile(None)
    # the automata are built lazily (a schema compile builds fewer rows up front than a
    # regex compile): compare them complete
    assert grammar.dfa.explore() and again.dfa.explore()
    assert again.trigger == "</think>" and again.dfa.num_states == grammar.dfa.num_states
    deep = '{"v":1,"kids":[' * 9 + '{"v":2,"kids":[]}' + "]}" * 9
    for text in (
        "thinking...</think>" + deep,
        '</think>{"v":1,"kids":[]}',
        deep,
        'x</think>{"v":1}',
        "no trigger at all",
    ):
        assert again.matches(text) == grammar.matches(text), text
    assert again.matches("thinking...</think>" + deep)
