r"""Templates: fixed text with typed holes, compiled into ONE regex and run as one request.

::

    t = structgen.template("Name: {name}\nAge: {age:int}\nCity: {city:regex=[A-Z][a-z]+}")
    text = "Maria Lopez, 34, lives in Lyon."
    values = t.run(prompt=text + "\n", copy_from=text)   # {"name": ..., "age": 34, ...}

This module is the template's IR and its pure lowering (holes to one regex, output text
back to typed values); it imports no runner, state or backend. ``run`` belongs to
:class:`~structgen.lang.program.TemplateProgram`, what ``structgen.template`` returns.

The fixed text between holes is forced by the automaton, so the engine appends it by
jump-forward (no decode step); only the holes are sampled. Fixed text before the first
hole is moved into the prompt (it would otherwise be decoded token by token, since
jump-forward starts after the first sampled token).

Holes: ``{name}`` / ``{name:str}`` (up to ``max_chars`` characters, never containing the
template's next literal character; a hole at the very end stops at a newline),
``{name:int}``, ``{name:float}``, ``{name:bool}`` (``true`` / ``false``),
``{name:choice=a|b|c}``, ``{name:regex=PATTERN}`` (braces in PATTERN must balance),
``{name:json}`` / ``{name:json=Key}`` (the schema or pydantic model passed to
``structgen.template`` as keyword ``name`` / ``Key``). ``{{`` and ``}}`` are literal braces.

Copying (``t.copy_from(text)``, ``t.run(..., copy_from=text)``): each ``str``, ``int``,
``float`` and ``regex`` hole becomes the intersection of its own regex with the spans of
the source text (``structgen.fsm.copy``'s substring automaton, an ``INTERSECT``
definition per hole, the automaton's definitions shared by all of them), so its value is
a run of whole words of the text; the fixed text is not constrained and is still
jump-forwarded; ``bool``, ``choice`` and ``json`` holes are unchanged.
"""

from __future__ import annotations

import copy as _copy
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from structgen.errors import LengthLimit, RequestError
from structgen.fsm.regex.anchors import strip_end_anchors
from structgen.fsm.regex.escape import escape_class_char, escape_literal
from structgen.fsm.spec import Regex
from structgen.lang.expr import ExprSource, TemplateFill
from structgen.runtime.outputs import RequestOutput

__all__ = ["Template", "TemplateResult"]

_INT = r"-?(?:0|[1-9][0-9]{0,17})"
_FLOAT = r"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,8})?"
_BOOL = r"(?:true|false)"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COPIED_KINDS = ("str", "int", "float", "regex")  # Template.copy_from: holes that copy


@dataclass(frozen=True)
class Hole:
    """One typed hole: ``kind`` is str, int, float, bool, choice, regex or json."""

    name: str
    kind: str
    arg: Any = None

    def pattern(self, next_char: str | None, max_chars: int) -> str:
        """This hole's regex (``next_char``: the first literal character after it)."""
        if self.kind == "str":
            stop = "\n" if next_char is None else next_char
            return f"[^{escape_class_char(ord(stop))}]{{0,{max_chars}}}"
        if self.kind == "int":
            return _INT
        if self.kind == "float":
            return _FLOAT
        if self.kind == "bool":
            return _BOOL
        if self.kind == "choice":
            return "(?:" + "|".join(escape_literal(c) for c in self.arg) + ")"
        if self.kind == "regex":  # the hole matches it whole: its end anchors are no-ops
            return f"(?:{strip_end_anchors(self.arg)[0]})"
        from structgen.fsm import json_schema_to_regex

        return f"(?:{json_schema_to_regex(self.arg)})"

    def convert(self, text: str) -> Any:
        """The typed value of this hole's text."""
        if self.kind == "int":
            return int(text)
        if self.kind == "float":
            return float(text)
        if self.kind == "bool":
            return text == "true"
        if self.kind == "json":
            value = json.loads(text)
            if isinstance(self.arg, type) and hasattr(self.arg, "model_validate"):
                return self.arg.model_validate(value)
            return value
        return text


class TemplateResult(dict):
    """The typed values by hole name; ``.text`` is the filled template, ``.output`` the run,
    ``.copied`` the names of the holes copied from the source text (``Template.copy_from``),
    ``.cut_by`` the limit that cut the fill and ``.truncated`` whether one did, as
    ``ProgramState.cut_by`` / ``ProgramState.truncated`` tell for a capture.

    Attributes:
        cut_by: a :class:`~structgen.errors.LengthLimit` (``"max_tokens"`` with the fill's
            ``max_tokens``, or ``"context"`` with the most tokens, prompt included, one
            request can hold) when the output stopped at that limit (it matched the
            template there: a fill cut before it matched raises instead); None when the
            fill was not cut (set by ``TemplateProgram.run``).
    """

    text: str = ""
    output: RequestOutput | None = None
    copied: tuple[str, ...] = ()
    cut_by: LengthLimit | None = None

    @property
    def truncated(self) -> bool:
        """Whether the fill stopped at ``max_tokens`` or the end of the model's context
        (``output.finish_reason == "length"``; :attr:`cut_by` tells which). Raises: never.
        """
        return self.output is not None and self.output.finish_reason == "length"


def _parse(source: str, schemas: dict[str, Any]) -> list[str | Hole]:
    """Split a template into literal strings and holes.

    Raises:
        RequestError: unbalanced braces, a bad hole spec, a duplicate name.
    """
    items: list[str | Hole] = []
    lit: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch in "{}" and source[i : i + 2] in ("{{", "}}"):
            lit.append(ch)
            i += 2
        elif ch == "}":
            raise RequestError(f"template: unmatched '}}' at offset {i} (write '}}}}')")
        elif ch == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                depth += {"{": 1, "}": -1}.get(source[j], 0)
                j += 1
            if depth:
                raise RequestError(f"template: unclosed '{{' at offset {i}")
            if lit:
                items.append("".join(lit))
                lit = []
            items.append(_hole(source[i + 1 : j - 1], schemas))
            i = j
        else:
            lit.append(ch)
            i += 1
    if lit:
        items.append("".join(lit))
    names = [h.name for h in items if isinstance(h, Hole)]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise RequestError(f"template: hole name {dup[0]!r} is used twice")
    if not names:
        raise RequestError("template has no holes")
    return items


def _hole(spec: str, schemas: dict[str, Any]) -> Hole:
    name, _, kind = spec.partition(":")
    name, kind = name.strip(), kind.strip() or "str"
    if not _NAME.match(name):
        raise RequestError(f"template: bad hole name {name!r} in {{{spec}}}")
    key, _, arg = kind.partition("=")
    if key in ("str", "int", "float", "bool") and not arg:
        return Hole(name, key)
    if key == "choice" and arg:
        opts = tuple(arg.split("|"))
        if not all(opts):
            raise RequestError(f"template: empty option in {{{spec}}}")
        return Hole(name, "choice", opts)
    if key == "regex" and arg:
        from structgen.fsm import compile_regex

        compile_regex(arg)  # RegexError now, naming the pattern
        return Hole(name, "regex", arg)
    if key == "json":
        ref = arg or name
        if ref not in schemas:
            raise RequestError(
                f"template: {{{spec}}} needs the schema or pydantic model as keyword {ref!r}"
            )
        from structgen.fsm.compiler import compile_json_schema

        compile_json_schema(schemas[ref])  # SchemaError now
        return Hole(name, "json", schemas[ref])
    raise RequestError(
        f"template: unknown hole type {kind!r} in {{{spec}}} (str, int, float, bool, "
        "choice=a|b, regex=PATTERN, json=Key)"
    )


class Template(ExprSource):
    """A compiled template: immutable IR that lowers to one constrained gen.

    ``structgen.template(...)`` builds one (a :class:`~structgen.lang.program.TemplateProgram`,
    which adds ``run``); ``s += t`` appends it to a program (see :meth:`as_expr`).

    Args:
        source: the template text (syntax in the module docstring).
        max_chars: most characters of a ``str`` hole.
        **schemas: JSON schemas / pydantic models for ``json`` holes, by name.

    Attributes:
        holes: the holes, in order.
        prefix: fixed text before the first hole (sent as part of the prompt).
        pattern: the regex of the rest, the holes' own regexes (no copying).
        constraint: the ``Regex`` spec the rest is generated under: ``pattern``, or with
            :meth:`copy_from` the copied holes' intersections (in ``definitions``).
        copied: names of the holes copied from :attr:`sources` (empty without copying).
        sources: the texts given to :meth:`copy_from` (empty without copying).

    Raises:
        RequestError: malformed template (unbalanced braces, bad or duplicate hole).
        RegexError, SchemaError: a hole's regex or schema does not compile.
    """

    def __init__(self, source: str, max_chars: int = 200, **schemas: Any) -> None:
        if not isinstance(source, str):
            raise RequestError("template needs a string")
        self.source = source
        items = _parse(source, schemas)
        self.holes = [h for h in items if isinstance(h, Hole)]
        self.prefix = items[0] if isinstance(items[0], str) else ""
        rest = items[1:] if self.prefix else items
        pieces: list[str | tuple[Hole, str]] = []  # escaped fixed text, (hole, its regex)
        parser = []
        for k, item in enumerate(rest):
            if isinstance(item, str):
                pieces.append(escape_literal(item))
                parser.append(re.escape(item))
                continue
            nxt = rest[k + 1] if k + 1 < len(rest) else None
            if isinstance(nxt, Hole) and item.kind == "str":
                raise RequestError(
                    f"template: str hole {item.name!r} must be followed by fixed text"
                )
            pat = item.pattern(nxt[0] if isinstance(nxt, str) else None, max_chars)
            pieces.append((item, pat))
            parser.append(f"(?P<{item.name}>{pat})")
        self._pieces = tuple(pieces)
        self.pattern = "".join(p if isinstance(p, str) else p[1] for p in pieces)
        self.constraint = Regex(self.pattern)
        self.copied: tuple[str, ...] = ()
        self.sources: tuple[str, ...] = ()
        self._parser = re.compile("".join(parser), re.DOTALL)

    def __repr__(self) -> str:
        return f"Template({self.source!r})"

    def copy_from(self, text: str | Sequence[str]) -> Template:
        """This template with its ``str``, ``int``, ``float`` and ``regex`` holes copied
        from ``text``: each such hole's value is a span of the text (``structgen.fsm.copy``:
        whole words, no whitespace at its ends, never empty) that also matches the hole's
        own pattern (their intersection). Fixed text, ``bool``, ``choice`` and ``json``
        holes are unchanged (a span must not force ``"no"`` out of ``"not"``). A hole whose
        intersection is empty for this text (an ``int`` hole and a text without a
        number) keeps its own pattern; :attr:`copied` names the holes that are copied.

        ``s += form.copy_from(text)`` appends it to a program;
        ``form.run(..., copy_from=text)`` runs it. It runs on a local engine: the
        intersections have no regex text, so ``OpenAIBackend`` raises ``RequestError``
        (copy_from needs a local engine) before sending it.

        Args:
            text: the source text, or a list of texts (a span of any of them).

        Returns:
            A new template of the same class (this one is unchanged).

        Raises:
            RequestError: ``text`` is not a string or a non-empty list of strings, or has
                no span (empty or whitespace only).
        """
        from structgen.fsm.copy import as_sources, intersect, matches_nothing, span_definitions

        sources = as_sources(text)
        defs: list[str] = []
        spans = span_definitions(sources, defs)
        parts, copied = [], []
        for piece in self._pieces:
            if isinstance(piece, str) or piece[0].kind not in _COPIED_KINDS:
                parts.append(piece if isinstance(piece, str) else piece[1])
                continue
            hole, pat = piece
            num_defs = len(defs)
            both = intersect(defs, [pat, spans])
            if matches_nothing(both, defs):
                del defs[num_defs:]  # nothing to copy here: the hole keeps its pattern
                parts.append(pat)
            else:
                parts.append(both)
                copied.append(hole.name)
        new = _copy.copy(self)
        new.constraint = Regex("".join(parts), None, tuple(defs))
        new.copied, new.sources = tuple(copied), sources
        return new

    def as_expr(self) -> TemplateFill:
        """The template as a program expression (``s += t``): captures every hole.

        Returns:
            A :class:`~structgen.lang.expr.TemplateFill` of this template with the default
            budget (``max_tokens=1024``, greedy, token healing on).
        """
        return TemplateFill(self)

    def parse(self, generated: str) -> TemplateResult:
        """The typed values of ``generated`` (the text after :attr:`prefix`).

        Raises:
            RequestError: the text does not match the template (e.g. cut by max_tokens).
        """
        m = self._parser.fullmatch(generated)
        if m is None:
            raise RequestError(f"output does not match the template: {generated!r}")
        res = TemplateResult({h.name: h.convert(m.group(h.name)) for h in self.holes})
        res.text = self.prefix + generated
        res.copied = self.copied
        return res
