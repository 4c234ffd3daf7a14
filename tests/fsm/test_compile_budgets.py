"""The automaton and conversion budgets are ``compile_*`` keywords, part of the cache key;
the time budgets are CPU seconds of the compiling thread, so waiting does not spend them."""

from __future__ import annotations

import importlib
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import (
    clear_cache,
    compile_choice,
    compile_grammar,
    compile_json_schema,
    compile_regex,
)
from structgen.fsm.deadline import Deadline, cpu_clock
from structgen.fsm.nesting import fresh_stack
from structgen.fsm.regex.dfa import DEFAULT_MAX_SECONDS, DEFAULT_MAX_STATES

BLOWUP = r"(?:a|b)*a(?:a|b){20}"  # 2^21 states if explored; its eager rows alone exceed 50


def test_regex_budgets_reach_the_automaton() -> None:
    grammar = compile_regex(BLOWUP)
    assert (grammar.dfa.max_states, grammar.dfa.max_seconds) == (
        DEFAULT_MAX_STATES,
        DEFAULT_MAX_SECONDS,
    )
    small = compile_regex(BLOWUP, max_states=5000, max_seconds=3.0)
    assert small is not grammar and (small.dfa.max_states, small.dfa.max_seconds) == (5000, 3.0)
    with pytest.raises(GrammarTooComplexError):
        compile_regex(BLOWUP, max_states=50)  # not the cached grammar of a larger budget
    assert compile_regex(BLOWUP) is grammar


def test_choice_budget() -> None:
    choices = [f"{i:03d}" for i in range(300)]
    assert compile_choice(choices).matches("123")
    with pytest.raises(GrammarTooComplexError):
        compile_choice(choices, max_states=3)


def test_json_schema_budgets() -> None:
    small = {"type": "object", "properties": {"a": {"type": "integer"}}}
    grammar = compile_json_schema(small, max_states=1234, max_seconds=5.0)
    assert (grammar.dfa.max_states, grammar.dfa.max_seconds) == (1234, 5.0)
    assert compile_json_schema(small).dfa.max_states == DEFAULT_MAX_STATES
    wide = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(600)}}
    with pytest.raises(GrammarTooComplexError, match="time budget"):
        compile_json_schema(wide, max_convert_seconds=0.0)


# --- the time budgets are CPU seconds of the compiling thread (structgen.fsm.deadline) ---

WAIT = 0.6  # wall seconds a hook sleeps: past BUDGET on a wall clock, no CPU at all
BUDGET = 0.4  # CPU seconds: each compile below needs a few ms of CPU (wide: ~0.1 s)
RECURSIVE = {
    "type": "object",
    "properties": {"budget": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
}
WIDE = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(600)}}
SMALL = {"type": "object", "properties": {"budget": {"type": "integer"}}}

# (compile under budget b, the function whose call the wait is injected before, keyword named)
CASES = {
    "regex": (
        lambda b: compile_json_schema(SMALL, max_seconds=b),
        "structgen.fsm.regex.dfa.lower",
        "max_seconds",
    ),
    "conversion": (
        lambda b: compile_json_schema(WIDE, max_convert_seconds=b),
        "structgen.fsm.json_schema.convert.JsonSchemaConverter.convert_root",
        "max_convert_seconds",
    ),
    "grammar rules": (
        lambda b: compile_json_schema(RECURSIVE, max_seconds=b),
        "structgen.fsm.grammar.compile.lower_grammar",
        "max_seconds",
    ),
    "lark": (
        lambda b: compile_grammar('start: "(" start ")" | "budget"\n', max_seconds=b),
        "structgen.fsm.grammar.compile.lower_grammar",
        "max_seconds",
    ),
}


@pytest.fixture
def fresh_caches():
    clear_cache()  # a cached grammar would skip the compile (and the injected wait)
    yield
    clear_cache()


def _inject_wait(monkeypatch, target: str) -> list[int]:
    """Make ``target`` sleep ``WAIT`` wall seconds (no CPU) before it runs; returns the
    list its calls are counted in."""
    module_name, _, attr = target.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except ModuleNotFoundError:  # a method: module.Class.method
        module_name, _, cls = module_name.rpartition(".")
        owner = getattr(importlib.import_module(module_name), cls)
    original = getattr(owner, attr)
    calls: list[int] = []

    def waiting(*args, **kwargs):
        calls.append(1)
        time.sleep(WAIT)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, attr, waiting)
    return calls


@pytest.mark.parametrize("case", list(CASES))
def test_a_spent_cpu_budget_refuses_naming_it(case, fresh_caches) -> None:
    compile_under, _, keyword = CASES[case]
    with pytest.raises(GrammarTooComplexError, match=f"CPU-time budget \\({keyword}=0 CPU s\\)"):
        compile_under(0.0)


@pytest.mark.parametrize("case", list(CASES))
def test_waiting_spends_no_budget(case, fresh_caches, monkeypatch) -> None:
    # the compile sleeps longer than its budget (as it waits for a core or the GIL on a
    # loaded machine); a wall-clock budget refused it, a CPU-time budget does not
    compile_under, target, _ = CASES[case]
    calls = _inject_wait(monkeypatch, target)
    assert compile_under(BUDGET).matches(_instance(case))
    assert calls  # the wait did happen


def _instance(case: str) -> str:
    return {
        "regex": '{"budget":1}',
        "conversion": '{"k0":1,"k599":2}',
        "grammar rules": '{"budget":"x","kids":[{"budget":"y","kids":[]}]}',
        "lark": "((budget))",
    }[case]


def test_budget_counts_the_pool_thread_doing_the_work(fresh_caches, monkeypatch) -> None:
    # the server compiles off its event loop in a thread pool: the worker's CPU counts,
    # not the wall time it waits, nor the CPU another thread burns meanwhile
    calls = _inject_wait(monkeypatch, "structgen.fsm.regex.dfa.lower")
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(compile_json_schema, SMALL, max_seconds=BUDGET)
        end = time.thread_time() + WAIT  # this thread busy while the worker compiles
        while time.thread_time() < end and not future.done():
            pass
        assert future.result().matches('{"budget":7}')
        assert calls
        clear_cache()
        refused = pool.submit(compile_json_schema, SMALL, max_seconds=0.0)
        with pytest.raises(GrammarTooComplexError, match="max_seconds=0 CPU s"):
            refused.result()


def test_fresh_stack_carries_the_cpu_clock() -> None:
    # a deep walk continues on fresh threads: their CPU counts against the caller's budget
    deadline = Deadline(0.05)
    seen = []

    def burn() -> float:
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
        seen.append(deadline.expired())
        return cpu_clock()

    before = cpu_clock()
    inside = fresh_stack(burn)
    assert seen == [True]  # the fresh thread's clock started where the caller's stood
    assert inside - before >= 0.1
    assert cpu_clock() - before >= 0.1 and deadline.expired()  # credited back to the caller
    with pytest.raises(GrammarTooComplexError, match="the walk exceeded its CPU-time budget"):
        deadline.check("the walk")


def test_cpu_clock_offset_per_thread() -> None:
    """``cpu_clock`` is ``thread_time`` plus the thread's own offset: 0 until ``credit`` or
    ``fresh_stack_clock`` sets it, credits add up, and another thread's offset is its own."""
    import threading

    from structgen.fsm import deadline

    seen = {}

    def child() -> None:
        seen["fresh"] = deadline.cpu_clock() - time.thread_time()  # no offset yet
        deadline.credit(2.0)
        deadline.credit(0.5)
        seen["credited"] = deadline.cpu_clock() - time.thread_time()
        deadline.fresh_stack_clock(100.0)
        seen["restarted"] = deadline.cpu_clock()

    before = deadline.cpu_clock() - time.thread_time()
    worker = threading.Thread(target=child)
    worker.start()
    worker.join()
    assert abs(seen["fresh"]) < 1e-3 and abs(seen["credited"] - 2.5) < 1e-3
    assert 100.0 <= seen["restarted"] < 100.1
    assert abs((deadline.cpu_clock() - time.thread_time()) - before) < 1e-3  # untouched here
    spent = deadline.Deadline(0.0)
    assert spent.expired() and spent.remaining() == 0.0
    with pytest.raises(GrammarTooComplexError, match="max_seconds=0"):
        spent.check("the walk")
    assert not deadline.Deadline(60.0).expired()
