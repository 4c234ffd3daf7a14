"""Template.copy_from / run(copy_from=...): the compiled form accepts a str, int, float or
regex hole's value exactly when it is a span of the text (a brute-force list of the spans
built from ``text_units``) that also matches the hole's own regex; fixed text, bool and
choice holes are unchanged; a hole with no fitting span keeps its pattern; bad sources
raise ``RequestError`` where they are given.
"""

from __future__ import annotations

import re

import pytest

import structgen
from structgen import template
from structgen.errors import RequestError
from structgen.fsm.compiler import compile_spec
from structgen.fsm.copy import text_units

TEXT = 'Zoë O\'Neil, 34, paid 12.50 in "Lyon" -7\nCity Code AB1'
FORM = (
    "Name: {name}\nAge: {age:int}\nPaid: {paid:float}\nCode: {code:regex=[A-Z]{2}[0-9]}\n"
    "Ok: {ok:bool}\nKind: {kind:choice=cat|dog}\nNote: {note}."
)
VALID = {
    "name": "Zoë O'Neil",
    "age": "34",
    "paid": "12.50",
    "code": "AB1",
    "ok": "true",
    "kind": "dog",
    "note": "Lyon",
}
OWN = {  # the holes' own regexes, written out (Python re, fullmatch)
    "name": r"[^\n]{0,200}",
    "age": r"-?(?:0|[1-9][0-9]{0,17})",
    "paid": r"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,8})?",
    "code": r"[A-Z]{2}[0-9]",
    "note": r"[^.]{0,200}",
}


def _spans(text: str) -> set[str]:
    """Every run of whole units that neither starts nor ends with a whitespace unit."""
    units = text_units(text)
    return {
        "".join(units[i:j])
        for i in range(len(units))
        for j in range(i + 1, len(units) + 1)
        if not units[i].isspace() and not units[j - 1].isspace()
    }


def _filled(**values: str) -> str:
    """The text generated after the prefix ``Name: `` with these hole values."""
    v = {**VALID, **values}
    return (
        f"{v['name']}\nAge: {v['age']}\nPaid: {v['paid']}\nCode: {v['code']}\n"
        f"Ok: {v['ok']}\nKind: {v['kind']}\nNote: {v['note']}."
    )


@pytest.fixture(scope="module")
def copied():
    t = template(FORM).copy_from(TEXT)
    return t, compile_spec(t.constraint)


def test_copy_holes_accept_exactly_the_fitting_spans(copied) -> None:
    t, grammar = copied
    assert t.copied == ("name", "age", "paid", "code", "note")
    spans = _spans(TEXT)
    every = {TEXT[i:j] for i in range(len(TEXT)) for j in range(i + 1, len(TEXT) + 1)}
    candidates = every | {"", "25", "Lyon!", "lyon", "CD2", "3.5"}
    for hole, own in OWN.items():
        for value in candidates:
            want = value in spans and re.fullmatch(own, value) is not None
            assert grammar.matches(_filled(**{hole: value})) == want, (hole, value)


def test_a_number_not_in_the_text_is_rejected(copied) -> None:
    _, grammar = copied
    assert grammar.matches(_filled(age="34")) and not grammar.matches(_filled(age="25"))
    assert grammar.matches(_filled(age="-7")) and not grammar.matches(_filled(age="7 "))
    assert grammar.matches(_filled(paid="12.50")) and not grammar.matches(_filled(paid="12.5"))
    free = compile_spec(template(FORM).constraint)
    assert free.matches(_filled(age="25"))  # without copy_from the age is free


def test_fixed_text_bool_and_choice_are_not_copied(copied) -> None:
    _, grammar = copied
    assert "Name:" not in TEXT and "Kind:" not in TEXT  # fixed text needs no span
    for ok in ("true", "false"):
        for kind in ("cat", "dog"):
            assert grammar.matches(_filled(ok=ok, kind=kind))
    assert not grammar.matches(_filled(kind="Lyon"))


def test_a_hole_without_a_fitting_span_keeps_its_pattern() -> None:
    t = template("Name: {name}\nAge: {age:int}\n").copy_from("Ann Lee lives here")
    assert t.copied == ("name",)
    grammar = compile_spec(t.constraint)
    assert grammar.matches("Ann Lee\nAge: 25\n") and not grammar.matches("Bo\nAge: 25\n")


@pytest.mark.parametrize("bad", ["", "  \n ", 34, [], None, {"t": "x"}, ["ok", 3]])
def test_bad_copy_from_raises_request_error(bad) -> None:
    form = template("Name: {name}\n")
    with pytest.raises(RequestError, match="copy_from"):
        form.copy_from(bad)
    if bad is not None:  # run(copy_from=None) is a run without copying
        with pytest.raises(RequestError, match="copy_from"):
            form.run(prompt="x", copy_from=bad)  # raised before any backend is made


def test_copy_from_runs_in_a_program_and_alone(tiny_engine) -> None:
    form = template("Name: {name}\nAge: {age:int}\nOk: {ok:bool}\n", max_chars=30)
    spans = _spans(TEXT)
    res = form.run(prompt="Text: " + TEXT + "\n", backend=tiny_engine, copy_from=TEXT)
    assert res["name"] in spans and str(res["age"]) in spans and res.copied == ("name", "age")

    @structgen.function
    def prog(s):
        s += "Text: " + TEXT + "\n" + form.copy_from([TEXT, "Bo Park, 61"])

    s = prog.run(backend=tiny_engine)
    assert s["name"] in spans | _spans("Bo Park, 61")
    assert str(s["age"]) in spans | _spans("Bo Park, 61")
