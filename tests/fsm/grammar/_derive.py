"""Random sentences of a grammar (from its IR, independent of the automaton) and mutations."""

from __future__ import annotations

from hypothesis import strategies as st

from structgen.fsm.grammar.ir import Alt, GrammarDef, Literal, Pattern, Ref, Repeat, Seq

INF = 1 << 20
MUTATION_CHARS = ' ()[]{}+-*/,;="x1aZ_\\.\n'


def _height(g: GrammarDef, height: dict[str, int], e) -> int:
    """Fewest nested rule expansions from expression ``e`` to a terminal string, given the
    rules' heights so far."""

    def h(e) -> int:
        if isinstance(e, Ref):
            return height[e.name] + 1 if e.name in g.rules else 0
        if isinstance(e, Seq):
            return max((h(x) for x in e.items), default=0)
        if isinstance(e, Alt):
            return min(h(x) for x in e.items)
        if isinstance(e, Repeat):
            return 0 if e.lo == 0 else h(e.item)
        return 0

    return h(e)


def _heights(g: GrammarDef) -> dict[str, int]:
    """Fewest nested rule expansions to a terminal string, per rule."""
    height = dict.fromkeys(g.rules, INF)
    changed = True
    while changed:
        changed = False
        for name, e in g.rules.items():
            v = _height(g, height, e)
            if v < height[name]:
                height[name], changed = v, True
    return height


def derive(g: GrammarDef, data, max_depth: int = 5) -> str:
    """One sentence of ``g``: a random derivation, ignore text at random boundaries."""
    heights = _heights(g)

    def h(e) -> int:
        return _height(g, heights, e)

    def text(e, depth: int, out: list[str]) -> None:  # one terminal's text (no ignore)
        if isinstance(e, Literal):
            out.append(e.text)
        elif isinstance(e, Pattern):
            out.append(data.draw(st.from_regex(e.regex, fullmatch=True)))
        elif isinstance(e, Ref):
            text(g.terminals[e.name], depth, out)
        elif isinstance(e, Seq):
            for x in e.items:
                text(x, depth, out)
        elif isinstance(e, Alt):
            text(data.draw(st.sampled_from(e.items)), depth, out)
        elif isinstance(e, Repeat):
            hi = e.lo + 2 if e.hi is None else min(e.hi, e.lo + 2)
            for _ in range(data.draw(st.integers(e.lo, hi))):
                text(e.item, depth, out)

    lexemes: list[str] = []

    def gen(e, depth: int) -> None:
        if isinstance(e, (Literal, Pattern)) or (isinstance(e, Ref) and e.name in g.terminals):
            out: list[str] = []
            text(e, depth, out)
            lexemes.append("".join(out))
        elif isinstance(e, Ref):
            gen(g.rules[e.name], depth + 1)
        elif isinstance(e, Seq):
            for x in e.items:
                gen(x, depth)
        elif isinstance(e, Alt):
            items = e.items
            if depth >= max_depth:
                best = min(h(x) for x in items)
                items = tuple(x for x in items if h(x) == best)
            gen(data.draw(st.sampled_from(items)), depth)
        elif isinstance(e, Repeat):
            if depth >= max_depth:
                n = e.lo
            else:
                hi = e.lo + 3 if e.hi is None else min(e.hi, e.lo + 3)
                n = data.draw(st.integers(e.lo, hi))
            for _ in range(n):
                gen(e.item, depth)

    gen(g.rules[g.start], 0)
    pieces = []
    for lexeme in [*lexemes, ""]:
        if g.ignore and data.draw(st.booleans()):
            out: list[str] = []
            text(g.terminals[data.draw(st.sampled_from(g.ignore))], 0, out)
            pieces.append("".join(out))
        pieces.append(lexeme)
    return "".join(pieces)


def mutate(s: str, data) -> str:
    """``s`` with one to three random deletions, insertions or replacements."""
    chars = list(s)
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        if op != "insert" and not chars:
            op = "insert"
        if op == "insert":
            i = data.draw(st.integers(0, len(chars)))
            chars.insert(i, data.draw(st.sampled_from(MUTATION_CHARS)))
        else:
            i = data.draw(st.integers(0, len(chars) - 1))
            if op == "delete":
                del chars[i]
            else:
                chars[i] = data.draw(st.sampled_from(MUTATION_CHARS))
    return "".join(chars)
