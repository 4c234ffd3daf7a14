r"""The language's expression nodes: immutable values that a program appends to its state.

``s += expr`` runs ``expr`` against the program state ``s`` (see ``state.py``). The nodes
hold only their spec (no model state), validate it when built (a bad regex or schema
raises here, at the line that wrote it), and compose with ``+``::

    s += "Q: " + question + "\nA:" + gen("answer", stop="\n")
    s += assistant("Category: " + select("c", ["spam", "ham"]))
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence

from structgen.errors import RequestError
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "Expr",
    "ExprSource",
    "Text",
    "Gen",
    "Select",
    "Role",
    "Concat",
    "TemplateFill",
    "gen",
    "select",
    "system",
    "user",
    "assistant",
    "as_expr",
    "capture_names",
]

ROLES = ("system", "user", "assistant")


class Expr:
    """Base of the expression nodes; ``a + b`` builds a :class:`Concat`."""

    def __add__(self, other: Any) -> "Concat":
        return Concat((self, as_expr(other)))

    def __radd__(self, other: Any) -> "Concat":
        return Concat((as_expr(other), self))


class ExprSource(ABC):
    """A value a program can append that is not itself a node: it lowers to one.

    ``Template`` is one (it lowers to a :class:`TemplateFill`). ``a + b`` with either side
    an ``ExprSource`` concatenates its lowering.
    """

    @abstractmethod
    def as_expr(self) -> Expr:
        """The node appended in this value's place (pure: no model state is read).

        Returns:
            The expression node.
        """

    def __add__(self, other: Any) -> "Concat":
        return self.as_expr() + other

    def __radd__(self, other: Any) -> "Concat":
        return other + self.as_expr()


def as_expr(value: Any) -> Expr:
    """A node from a node, a string, or an :class:`ExprSource` (a template appends its holes).

    Raises:
        RequestError: anything else (names the type).
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, ExprSource):
        return value.as_expr()
    raise RequestError(
        f"a program can append a str, gen(...), select(...), a role or a template; "
        f"got {type(value).__name__}"
    )


@dataclass(frozen=True)
class Text(Expr):
    """Fixed text."""

    text: str


@dataclass(frozen=True, eq=False)
class Gen(Expr):
    """Generate text, optionally under a constraint; stored as ``s[name]`` when named.

    Build it with :func:`gen`. ``constraint`` is None, ``Regex``, ``JsonSchema`` or
    ``Choice``; ``schema`` is the user's schema (for parsing the capture back);
    ``tools`` is ``(tools, tool_choice, parallel)`` of a tool-calling gen (its constraint
    is built at run time, in the format of the backend's chat template).
    """

    name: str | None
    params: SamplingParams
    constraint: Any = None
    schema: Any = None
    token_healing: bool = True
    tools: tuple | None = None


@dataclass(frozen=True)
class Select(Expr):
    """Pick one of ``options`` by the model's length-normalised log-probability."""

    name: str | None
    options: tuple[str, ...]


@dataclass(frozen=True)
class Role(Expr):
    """One chat turn: ``role`` with ``body`` (text and/or generation) as its content."""

    role: str
    body: Expr


@dataclass(frozen=True, eq=False)
class TemplateFill(Expr):
    """Fill a :class:`~structgen.lang.template.Template`: its fixed prefix as text, the
    rest as one constrained gen; each hole becomes a capture (or, with ``result_name``,
    one capture holding the TemplateResult).
    """

    template: Any
    max_tokens: int = 1024
    temperature: float = 0.0
    token_healing: bool = True
    result_name: str | None = None


@dataclass(frozen=True)
class Concat(Expr):
    """Several expressions appended in order."""

    parts: tuple[Expr, ...]

    def __post_init__(self) -> None:
        flat: list[Expr] = []
        for p in self.parts:
            flat.extend(p.parts if isinstance(p, Concat) else (p,))
        object.__setattr__(self, "parts", tuple(flat))
        capture_names(self)  # duplicate names raise here, where the expression is written

    def __add__(self, other: Any) -> "Concat":
        return Concat(self.parts + (as_expr(other),))

    def __radd__(self, other: Any) -> "Concat":
        return Concat((as_expr(other),) + self.parts)


def capture_names(expr: Expr) -> list[str]:
    """Capture names an expression writes, in order.

    Raises:
        RequestError: a name occurs twice.
    """
    names: list[str] = []
    stack = [expr]
    while stack:
        e = stack.pop(0)
        if isinstance(e, (Gen, Select)) and e.name is not None:
            names.append(e.name)
        elif isinstance(e, TemplateFill):
            names.extend([e.result_name] if e.result_name else [h.name for h in e.template.holes])
        elif isinstance(e, Concat):
            stack = list(e.parts) + stack
        elif isinstance(e, Role):
            stack.insert(0, e.body)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise RequestError(f"capture name {dup[0]!r} is used twice in one expression")
    return names


def _check_name(name: Any) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise RequestError(f"a capture name must be a non-empty string, got {name!r}")


def gen(
    name: str | None = None,
    *,
    max_tokens: int = 128,
    stop: str | Sequence[str] | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = -1,
    seed: int | None = None,
    regex: str | None = None,
    json_schema: Any = None,
    choices: Sequence[str] | None = None,
    token_healing: bool = True,
    grammar: Any = None,
    copy_from: str | Sequence[str] | None = None,
    tools: Sequence[dict] | None = None,
    tool_choice: Any = "required",
    parallel_tool_calls: bool | None = None,
) -> Gen:
    """Generate text at this point of the program.

    Args:
        name: capture name (``s[name]`` afterwards); None captures nothing.
        max_tokens: most tokens to generate.
        stop: stop string(s), not included in the text.
        temperature: 0 (the default) is greedy.
        top_p: nucleus sampling mass in (0, 1]; 1 disables it (:class:`SamplingParams`).
        top_k: keep the k most likely tokens; -1 disables it (:class:`SamplingParams`).
        seed: seed of this gen's own generator, None for unseeded (branch ``i`` of a
            broadcast fork uses ``seed + i``).
        regex: the text must fully match this regex.
        json_schema: a JSON Schema dict or pydantic model class; the capture is the
            parsed value (a dict, or a model instance).
        choices: the text must be exactly one of these strings (a ``Choice``
            constraint, sampled; see :func:`select` for choosing by log-probability).
        token_healing: back up the prompt's last token when it could merge with the
            generated text (see ``structgen.lang.healing``).
        grammar: the text must be a sentence of this context-free grammar (Lark, GBNF
            or EBNF text, syntax detected; a ``Grammar`` spec for other options).
        copy_from: a text (or texts) the output is copied from (``structgen.fsm.copy``):
            with ``json_schema``, its string and number values are spans and numerals of
            the text where one fits; with ``regex``, the output is a span that matches
            it; alone, the output is a span (whole words, no whitespace at the ends).
        tools: OpenAI tool dicts (``{"type": "function", "function": {"name",
            "parameters", ...}}``): the text is tool calls in the format of the model's
            chat template (``structgen.tools``), and the capture is the list of parsed
            calls ``[{"name": str, "arguments": dict}]``. The program shows the tools to
            the model itself (e.g. in a system turn).
        tool_choice: with ``tools``: ``"required"`` (the default: the text is calls),
            ``"auto"`` (text, calls where the format's start tag appears) or
            ``{"type": "function", "function": {"name": ...}}``.
        parallel_tool_calls: with ``tools``: False allows one call (None: several).

    Raises:
        RequestError: more than one of regex / json_schema / choices / grammar / tools,
            a bad name, ``copy_from`` with ``choices``, ``grammar`` or ``tools``, or
            without a span; a malformed tool or ``tool_choice`` (or ``"none"``).
        InvalidGrammarError: the grammar does not compile (line:column).
        RegexError: the regex does not compile.
        SchemaError: the schema is invalid or uses keywords that cannot be enforced.
        ConfigError: a sampling setting is out of range.
    """
    from structgen.fsm.spec import Choice, Grammar, JsonSchema, Regex

    _check_name(name)
    if sum(x is not None for x in (regex, json_schema, choices, grammar, tools)) > 1:
        raise RequestError(
            "gen takes at most one of regex=, json_schema=, choices=, grammar=, tools="
        )
    params = SamplingParams(
        max_tokens=max_tokens,
        stop=stop,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
    )
    constraint = None
    if regex is not None:
        from structgen.fsm import compile_regex

        compile_regex(regex)  # raises RegexError now, not at run time
        constraint = Regex(regex)
    elif json_schema is not None:
        from structgen.fsm import compile_json_schema

        compile_json_schema(json_schema)  # metaschema + supported keywords, checked now
        constraint = JsonSchema(json_schema)
    elif choices is not None:
        constraint = Choice(choices)
    elif grammar is not None:
        spec = grammar if isinstance(grammar, Grammar) else Grammar(grammar)
        spec.compile(None)  # syntax and names checked now, not at run time
        constraint = spec
    tool_spec = None
    if tools is not None:
        from structgen.tools import FORMATS, tool_call_constraint

        if tool_choice == "none" or copy_from is not None:
            raise RequestError("gen(tools=...) takes tool_choice 'auto', 'required' or a name")
        tool_spec = (tuple(tools), tool_choice, parallel_tool_calls)
        tool_call_constraint(FORMATS["structgen_json"], list(tools), tool_choice)  # checked now
    if copy_from is not None:
        from structgen.fsm.copy import as_sources, with_copy

        constraint = with_copy(constraint, as_sources(copy_from))
    return Gen(name, params, constraint, json_schema, token_healing, tool_spec)


def select(name: str | None, choices: Sequence[Any]) -> Select | Gen:
    """Choose one of ``choices``.

    Strings only: by the model's log-probabilities (one batched forward). The score of
    an option is the mean log-probability of its tokens given the text so far (SGLang's
    default normalisation); the highest score wins, ties to the first. An option's tokens
    are those of ``text + option`` past the common prefix with the text alone. All
    options go in one batch of prompt-log-prob requests; the shared text is computed once
    and served to the others by the radix cache (``SamplingParams.prompt_logprobs_start``).
    Scores: ``state.select_scores(name)``.

    Sub-expressions: when an option is a ``gen(regex=...)`` / ``gen(grammar=...)`` term
    or a ``Regex`` / ``Grammar`` spec (strings beside them are literals), the options
    compile into one automaton (their alternation, ``fsm.grammar.union``) and the choice
    is generated under it, greedily, within the largest ``max_tokens`` of the gen options
    (128 without one); the capture is the text generated (no scores).

    Raises:
        RequestError: no options, one string instead of a list, an empty string, a
            string listed twice, a bad name, or an option that is not a string, a regex or
            grammar gen, or a spec (a program: a concatenation, a role, another select, a
            JSON Schema gen...).
        InvalidGrammarError, RegexError: an option does not compile (checked now).
    """
    from structgen.fsm.spec import Grammar, Regex

    _check_name(name)
    if isinstance(choices, str):
        raise RequestError(f"select takes a list of options, not one string: [{choices!r}]?")
    opts = tuple(choices)
    if not opts or any(isinstance(c, str) and not c for c in opts):
        raise RequestError("select needs a non-empty list of options (no empty string)")
    first: dict[str, int] = {}
    for i, c in enumerate(opts):
        if isinstance(c, str) and first.setdefault(c, i) != i:
            raise RequestError(
                f"select option {c!r} is listed twice (options {first[c]} and {i}); "
                "select_scores keys its scores by option, so each must be distinct"
            )
    if all(isinstance(c, str) for c in opts):
        return Select(name, opts)
    options: list[Any] = []
    max_tokens = 0
    for i, c in enumerate(opts):
        if isinstance(c, Text):
            c = c.text
        if isinstance(c, Gen) and c.schema is None and type(c.constraint) in (Regex, Grammar):
            max_tokens = max(max_tokens, c.params.max_tokens)
            c = c.constraint
        if isinstance(c, str) or type(c) in (Regex, Grammar):
            options.append(c)
            continue
        raise RequestError(
            f"select option {i} is a {type(c).__name__}: options are strings, "
            "gen(regex=...) / gen(grammar=...) terms or Regex / Grammar specs, not programs"
        )
    from structgen.fsm.grammar.union import GrammarAlternatives

    spec = GrammarAlternatives("", options=tuple(options))
    spec.compile(None)  # every option checked now, not at run time
    params = SamplingParams(max_tokens=max_tokens or 128, temperature=0.0)
    return Gen(name, params, spec, None, True)


def _role(role: str, body: Any) -> Role:
    body = as_expr(body)
    if isinstance(body, Role) or (
        isinstance(body, Concat) and any(isinstance(p, Role) for p in body.parts)
    ):
        raise RequestError(f"{role}(...) cannot contain another role")
    capture_names(body)
    return Role(role, body)


def system(content: Any = "") -> Role:
    """A system turn (rendered with the model's chat template)."""
    return _role("system", content)


def user(content: Any = "") -> Role:
    """A user turn (rendered with the model's chat template)."""
    return _role("user", content)


def assistant(content: Any = "") -> Role:
    """An assistant turn; ``content`` may generate (``assistant(gen("a"))``)."""
    return _role("assistant", content)
