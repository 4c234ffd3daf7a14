"""Earley charts as hash-consed nodes: the parser half of the grammar automaton.

A chart node is the closed set of Earley items at one lexeme boundary (its incomplete
items, and whether the whole parse may end there). An item is
``(production, dot, origin)`` where ``origin`` is the id of the node the production was
predicted in, or ``SELF`` (-1) when it was predicted in this very node. Nodes are
interned by their item set, so two parses that reach the same items (e.g. after the
second and the fifth element of a left-recursive list) share one node, and a node's id
says everything about its future: that is what makes the automaton over
``(node, lexer state)`` configurations (``automaton.py``) deterministic and cacheable.

Closure follows Earley with Aycock and Horspool's treatment of nullable symbols: an item
before a nullable symbol (a nullable nonterminal, or a terminal whose regex accepts the
empty string) is also advanced over it at prediction, so completions of productions
predicted in the same node never need to be replayed. Left recursion is only more items
in one node, never a loop. An item's origin is the first node whose completion of its
nonterminal equals the origin's (``_canonical``), so the elements of a list after the first
one reuse its nodes.

With the C extension built (``csrc/earley.c``, ``native=True``: the default when it is),
``scan`` and the tables it fills run in C, step for step this module's algorithm (the same
nodes, in the same order: ``tests/fsm/grammar/test_native_earley.py``); the Python path is
the reference and the fallback.

Follows: Earley (1970), Aycock & Horspool, "Practical Earley Parsing" (2002).
"""

from __future__ import annotations

from ...errors import ConfigError, GrammarTooComplexError, InvalidGrammarError
from .lower import CfgGrammar

try:
    from . import _earley as _EXT
except ImportError:  # the C extension is optional: the Python path below is the reference
    _EXT = None

HAVE_C_EARLEY = _EXT is not None

_C_DERIVERS = [True]  # _derivers' worklist in C where built (use_c_derivers)


def use_c_derivers(on: bool) -> bool:
    """Run ``_derivers``' worklist (productive and nullable nonterminals) in C
    (``csrc/earley.c`` ``derivers``: the same answers) or in Python, for the process (tests,
    A/B). Returns the previous setting. Raises: never.
    """
    was = _C_DERIVERS[0]
    _C_DERIVERS[0] = bool(on)
    return was


__all__ = ["EarleyCharts", "SELF", "DEFAULT_MAX_ITEMS", "HAVE_C_EARLEY", "use_c_derivers"]

SELF = -1
DEFAULT_MAX_ITEMS = 2_000_000  # Earley items over all nodes of one grammar's parser


class EarleyCharts:
    """The interned chart nodes of one grammar and the scan step between them.

    Args:
        cfg: the productions (``lower.CfgGrammar``).
        nullable_terminals: terminal ids whose regex accepts the empty string.
        max_items: budget of items over all nodes built.
        empty_terminals: terminal ids whose regex matches no string; the productions
            that use one are dropped (they never finish).
        native: scan in C (``csrc/earley.c``); None: when the extension is built.

    Attributes:
        root: the node at the start of the input (id 0).
        items: per node, its incomplete items (a frozenset of ``(p, dot, origin)``).
        waiting: per node, ``{symbol: [its items waiting on symbol, in sorted order]}``.
        expected: per node, the sorted terminal ids it can scan.
        final: per node, whether the parse may end there.
        max_items: the item budget (settable).
        max_completed_items: bound on the items the completion memo holds (``_completion``;
            ``max_items`` by default; settable).

    Raises:
        InvalidGrammarError: the start rule derives no string.
        ConfigError: ``native=True`` without the C extension built.
    """

    def __init__(
        self,
        cfg: CfgGrammar,
        nullable_terminals: set[int],
        max_items: int = DEFAULT_MAX_ITEMS,
        empty_terminals: set[int] | frozenset[int] = frozenset(),
        native: bool | None = None,
    ) -> None:
        if native and _EXT is None:
            raise ConfigError("EarleyCharts(native=True): the C extension _earley is not built")
        self.cfg = cfg
        self._max_items = max_items
        self._num_items = 0
        num_nt = len(cfg.names)
        dead = {-1 - t for t in empty_terminals}  # symbols of the empty terminals
        productive = _productive(cfg, num_nt, dead)
        if not productive[cfg.start]:
            raise InvalidGrammarError("the grammar's start rule derives no string")
        self._rhs = cfg.rhs
        self._lhs = cfg.lhs
        self._by_lhs: list[list[int]] = [[] for _ in range(num_nt)]
        by_lhs = self._by_lhs
        if len(cfg.lhs) != len(cfg.rhs):
            raise ValueError("a CfgGrammar needs one right-hand side per production")
        if not dead and all(productive):  # every production can finish
            for p, lhs in enumerate(cfg.lhs):
                by_lhs[lhs].append(p)
        else:
            for p, (lhs, rhs) in enumerate(zip(cfg.lhs, cfg.rhs)):
                if all(productive[s] if s >= 0 else s not in dead for s in rhs):
                    by_lhs[lhs].append(p)  # productions that can finish
        nullable_nt = _nullable_nonterminals(cfg, num_nt, nullable_terminals)
        self._nullable = _nullable_predicate(nullable_nt, nullable_terminals)
        self._ids: dict[tuple[frozenset, bool], int] = {}
        self.items: list[frozenset] = []
        self.waiting: list[dict[int, list[tuple[int, int, int]]]] = []
        self.expected: list[list[int]] = []  # terminal ids each node can scan
        self.final: list[bool] = []
        self._scans: dict[tuple[int, int], int] = {}
        # (live items with an origin, final) -> node: they decide a node (see ``_node``)
        self._by_own: dict[tuple[frozenset, bool], int] = {}
        self._predicted_memo: dict[int, frozenset[tuple[int, int, int]]] = {}
        # (nonterminal, origin node) -> what completing it there adds (``_close_own``)
        self._completed: dict[tuple[int, int], tuple[frozenset, frozenset[int], frozenset]] = {}
        self._completed_items = 0  # items held by _completed (a cache: emptied past the bound)
        self._max_completed = max_items
        self._canon: dict[tuple[int, int], int] = {}  # (nonterminal, node) -> canonical node
        self._canon_of: dict[tuple[int, frozenset], int] = {}  # (nonterminal, seeds) -> node
        self._core = None
        if HAVE_C_EARLEY if native is None else native:
            self._native_tables(cfg, num_nt, nullable_terminals, max_items, nullable_nt)
        else:
            self.root = self._node([(0, 0, SELF)])

    def _native_tables(
        self, cfg: CfgGrammar, num_nt: int, nullable_terminals, max_items, nullable_nt
    ) -> None:
        """The charts in C (``csrc/earley.c``): ``scan`` is the C method; ``items`` and
        ``waiting`` are read from its tables on demand.
        """
        num_t = len(cfg.terminals)
        self._core = core = _EXT.Charts(
            [tuple(body) for body in self._rhs],
            list(self._lhs),
            self._by_lhs,
            bytes(nullable_nt),
            bytes(t in nullable_terminals for t in range(num_t)),
            cfg.start,
            max_items,
            GrammarTooComplexError,
        )
        self.scan = core.scan  # the C method itself: no Python frame per scan
        self.expected, self.final = core.expected, core.final
        self.items = _NodeTable(core.items, core)
        self.waiting = _NodeTable(core.waiting, core)
        self.root = 0

    @property
    def native(self) -> bool:
        """Whether ``scan`` runs in C."""
        return self._core is not None

    @property
    def num_items(self) -> int:
        """Items over all nodes built."""
        return self._num_items if self._core is None else self._core.num_items

    @property
    def max_items(self) -> int:
        """The item budget (settable: a smaller one holds from the next new node on)."""
        return self._max_items if self._core is None else self._core.max_items

    @max_items.setter
    def max_items(self, value: int) -> None:
        if self._core is not None:
            self._core.max_items = value
        self._max_items = value

    @property
    def max_completed_items(self) -> int:
        """Bound on the items the completion memo holds (settable)."""
        return self._max_completed if self._core is None else self._core.max_completed_items

    @max_completed_items.setter
    def max_completed_items(self, value: int) -> None:
        if self._core is not None:
            self._core.max_completed_items = value
        self._max_completed = value

    # ---- nodes -------------------------------------------------------------------

    def _node(self, kernel: list[tuple[int, int, int]]) -> int:
        """The interned node of the closure of ``kernel``.

        The closure splits in two (see ``_predicted``): the items with an origin (the
        kernel's, their nullable advances and the completions they cause: ``_close_own``,
        each completion's cascade memoised per nonterminal and origin), and the ``SELF``
        items, which depend only on the nonterminals the former wait on and are the union of
        ``_predicted``'s sets. The live items with an origin therefore decide the node (of
        every node but the root, whose kernel is a ``SELF`` item): a second index on them
        answers a repeated closure without the ``SELF`` part.
        """
        rhs = self._rhs
        if len(kernel) == 1 and kernel[0][2] != SELF and kernel[0][1] == len(rhs[kernel[0][0]]):
            # one complete item (a lexeme scanned at the end of a production): its closure
            # is its completion's, memoised; no set is copied
            p, _, origin = kernel[0]
            key = (self._lhs[p], origin)
            done = self._completed.get(key)
            if done is None:
                done = self._completion(key)
            final = kernel[0] == (0, 1, 0) or (0, 1, 0) in done[0]
            nid = self._by_own.get((done[2], final))
            if nid is None:
                nid = self._intern_node(done[2], done[1], final, ())
            return nid
        items: set[tuple[int, int, int]] = set()
        waits: set[int] = set()  # nonterminals the items with an origin wait on
        live: set[tuple[int, int, int]] = set()  # the incomplete ones among ``items``
        roots = [item[:2] for item in kernel if item[2] == SELF]  # the root's kernel only
        self._close_own([item for item in kernel if item[2] != SELF], items, waits, True, live)
        live_own = frozenset(live)
        if not roots:
            final = (0, 1, 0) in items
            nid = self._by_own.get((live_own, final))
            if nid is not None:
                return nid
            return self._intern_node(live_own, waits, final, ())
        selfs = self._self_closure([(p, dot, SELF) for p, dot in roots])
        # the root: the parse may end where it starts when the start rule is nullable
        final = (0, 1, 0) in items or (not self.items and (0, 1, SELF) in selfs)
        return self._intern_node(
            live_own, waits, final, [item for item in selfs if item[1] < len(rhs[item[0]])]
        )

    def _intern_node(self, live_own: frozenset, waits, final: bool, roots) -> int:
        """The node of the incomplete items with an origin ``live_own``, the ``SELF`` items
        predicted for the nonterminals ``waits`` and the root's own ``SELF`` items ``roots``
        (interned; indexed by ``(live_own, final)`` unless it is the root).
        """
        live_set = set(live_own)
        for sym in waits:
            live_set |= self._predicted(sym)
        live_set.update(roots)
        # completed items have done their work (the items they advance are in the set): a
        # node is its incomplete items and whether the parse may end here, so parses that
        # differ only in what they just completed share one node
        live = frozenset(live_set)
        key = (live, final)
        nid = self._ids.get(key)
        if nid is None:
            nid = self._new_node(live, final)
            self._ids[key] = nid
        if not roots:
            self._by_own[(live_own, final)] = nid
        return nid

    def _close_own(
        self,
        seeds: list[tuple[int, int, int]],
        items: set,
        waits: set[int],
        compute: bool,
        live: set,
    ) -> None:
        """Close the items with an origin ``seeds`` under nullable advance and completion,
        into ``items`` (in place), adding the incomplete ones to ``live`` and the
        nonterminals they wait on to ``waits``. A completion of nonterminal ``A`` begun at
        node ``o`` adds the memoised closure ``_completed[(A, o)]`` (computed here first when
        ``compute``; else, while computing one, expanded in place unless memoised): the
        closure of a set is the union
        of its items' closures, and what completing ``A`` at ``o`` adds depends on node
        ``o`` alone (built nodes never change), so a completion cascade repeated at the same
        origin (each character of an identifier completing it again) is one set union.
        """
        rhs, lhs_of, nullable, completed = self._rhs, self._lhs, self._nullable, self._completed
        agenda = []
        for item in seeds:
            if item not in items:
                items.add(item)
                agenda.append(item)
        while agenda:
            p, dot, origin = agenda.pop()
            body = rhs[p]
            if dot < len(body):
                live.add((p, dot, origin))
                sym = body[dot]
                if sym >= 0:
                    waits.add(sym)
                if nullable(sym):
                    item = (p, dot + 1, origin)
                    if item not in items:
                        items.add(item)
                        agenda.append(item)
                continue
            key = (lhs_of[p], origin)  # complete: advance the items waiting at the origin
            done = completed.get(key)
            if done is None and compute:
                done = self._completion(key)
            if done is not None:
                items |= done[0]
                waits |= done[1]
                live |= done[2]
                continue
            for q, qdot, qorigin in self.waiting[origin].get(key[0], ()):
                item = self._item(q, qdot + 1, origin if qorigin == SELF else qorigin)
                if item not in items:
                    items.add(item)
                    agenda.append(item)

    def _completion(self, key: tuple[int, int]) -> tuple[frozenset, frozenset[int], frozenset]:
        """``(items, waits, live)`` of completing nonterminal ``key[0]`` begun at node
        ``key[1]``: the items waiting for it there advanced, closed (``_close_own``), the
        nonterminals the incomplete ones wait on and the incomplete ones; memoised in
        ``_completed`` (emptied when it would hold more than ``max_completed_items`` items,
        ``max_items`` by default: a cache, so memory stays bounded as the charts' own items
        are).
        """
        lhs, origin = key
        seeds = [
            self._item(q, qdot + 1, origin if qorigin == SELF else qorigin)
            for q, qdot, qorigin in self.waiting[origin].get(lhs, ())
        ]
        items: set[tuple[int, int, int]] = set()
        waits: set[int] = set()
        live: set[tuple[int, int, int]] = set()
        self._close_own(seeds, items, waits, False, live)
        done = (frozenset(items), frozenset(waits), frozenset(live))
        self._completed_items += len(items)
        if self._completed_items > self._max_completed:
            self._completed.clear()
            self._completed_items = len(items)
        self._completed[key] = done
        return done

    def _new_node(self, live: frozenset, final: bool) -> int:
        """Append the node of the incomplete items ``live`` (not interned yet)."""
        rhs = self._rhs
        self._num_items += len(live)
        if self._num_items > self._max_items:
            raise GrammarTooComplexError(
                f"the grammar's parser exceeds {self._max_items} Earley items; "
                "simplify the grammar or shorten the output"
            )
        nid = len(self.items)
        waiting: dict[int, list[tuple[int, int, int]]] = {}
        # in sorted order: the waiting lists decide which origin ``_canonical`` sees first,
        # so a set's iteration order would make node ids depend on hashing (the C charts
        # follow the same order)
        for item in sorted(live):
            waiting.setdefault(rhs[item[0]][item[1]], []).append(item)
        self.items.append(live)
        self.waiting.append(waiting)
        self.expected.append(sorted(-1 - s for s in waiting if s < 0))
        self.final.append(final)
        return nid

    def _predicted(self, sym: int) -> frozenset[tuple[int, int, int]]:
        """The incomplete ``SELF`` items a node holds because an item with an origin
        waits on nonterminal ``sym`` (memoised): the closure of ``(q, 0, SELF)`` for its
        productions under prediction and nullable advance. A ``SELF`` item is never
        completed into others (Aycock and Horspool: its nullable advances already hold
        what that would add), so no other item adds to it, and a node's ``SELF`` items are
        the union of these sets over the nonterminals waited on.
        """
        hit = self._predicted_memo.get(sym)
        if hit is None:
            rhs = self._rhs
            closure = self._self_closure([(q, 0, SELF) for q in self._by_lhs[sym]])
            hit = frozenset(item for item in closure if item[1] < len(rhs[item[0]]))
            self._predicted_memo[sym] = hit
        return hit

    def _self_closure(self, start: list[tuple[int, int, int]]) -> set[tuple[int, int, int]]:
        """``start`` (``SELF`` items) closed under prediction and nullable advance."""
        rhs, by_lhs, nullable = self._rhs, self._by_lhs, self._nullable
        items = set(start)
        agenda = list(start)
        while agenda:
            p, dot, _ = agenda.pop()
            body = rhs[p]
            if dot < len(body):
                sym = body[dot]
                if sym >= 0:
                    for q in by_lhs[sym]:
                        item = (q, 0, SELF)
                        if item not in items:
                            items.add(item)
                            agenda.append(item)
                if nullable(sym):
                    item = (p, dot + 1, SELF)
                    if item not in items:
                        items.add(item)
                        agenda.append(item)
        return items

    def _item(self, p: int, dot: int, origin: int) -> tuple[int, int, int]:
        """The item ``(p, dot, origin)``, its origin moved to the top of a right-recursive
        chain (Leo, 1991): when ``p`` waits on its last symbol and the one item waiting
        for ``lhs(p)`` at ``origin`` is of the same nonterminal and also waits on its last
        symbol, finishing ``p`` finishes that item, so ``p`` may as well have started
        where that item did. Equal futures then give equal items: a run of ``- - - x``
        or of a right-recursive list stays in one chart node instead of one per level.
        The origin is then made canonical (``_canonical``).
        """
        rhs = self._rhs
        lhs = self._lhs[p]
        if dot != len(rhs[p]) - 1:
            return (p, dot, self._canonical(lhs, origin))
        while True:
            above = self.waiting[origin].get(lhs)
            if above is None or len(above) != 1:
                return (p, dot, self._canonical(lhs, origin))
            q, qdot, qorigin = above[0]
            if qorigin == SELF or self._lhs[q] != lhs or qdot != len(rhs[q]) - 1:
                return (p, dot, self._canonical(lhs, origin))
            origin = qorigin

    def _canonical(self, lhs: int, origin: int) -> int:
        """The first node seen whose completion of ``lhs`` is ``origin``'s (memoised).

        Completing ``lhs`` begun at a node advances the items waiting for it there, with a
        ``SELF`` origin read as that node; two nodes with the same advanced items (e.g.
        the root and the node after the first element of a left-recursive list ``x*``,
        whose items waiting for ``x`` both advance to ``star -> star x .`` begun at the
        root) give the same completion, so an item of ``lhs`` has the same future begun
        at either, and one of them stands for both: the items of the second element are
        those of the first, and its chart nodes are shared instead of built again.
        """
        key = (lhs, origin)
        hit = self._canon.get(key)
        if hit is None:
            if lhs == self.cfg.start:  # S' is never waited for: keep the root's marker
                hit = origin
            else:
                seeds = frozenset(
                    (q, qdot + 1, origin if qorigin == SELF else qorigin)
                    for q, qdot, qorigin in self.waiting[origin].get(lhs, ())
                )
                hit = self._canon_of.setdefault((lhs, seeds), origin)
            self._canon[key] = hit
        return hit

    def scan(self, node: int, terminal: int) -> int:
        """The node after one lexeme of ``terminal`` read at ``node`` (memoised).

        Raises:
            GrammarTooComplexError: the item budget is exceeded.
        """
        key = (node, terminal)
        nid = self._scans.get(key)
        if nid is None:
            kernel = [
                self._item(p, dot + 1, node if origin == SELF else origin)
                for p, dot, origin in self.waiting[node].get(-1 - terminal, ())
            ]
            nid = self._scans[key] = self._node(kernel)
        return nid

    def productions_of(self, nonterminal: int) -> list[int]:
        """The productive productions of ``nonterminal`` (ids into ``cfg.lhs``/``rhs``)."""
        return self._by_lhs[nonterminal]

    @property
    def num_nodes(self) -> int:
        """Nodes built so far."""
        return len(self.items)


class _NodeTable:
    """A per-node table of the C charts read as a list (``items[n]``, ``waiting[n]``): each
    entry built from the C tables when read (the budget paths and tests read a few).
    """

    def __init__(self, read, core) -> None:
        self._read, self._core = read, core

    def __len__(self) -> int:
        return self._core.num_nodes

    def __getitem__(self, node: int):
        return self._read(node)

    def __iter__(self):
        return (self._read(n) for n in range(self._core.num_nodes))

    def __eq__(self, other) -> bool:
        return list(self) == list(other)


def _derivers(
    cfg: CfgGrammar,
    num_nt: int,
    dead: set[int] | frozenset[int] = frozenset(),
    only: set[int] | frozenset[int] | None = None,
) -> list[bool]:
    """Per nonterminal: does it derive a string of usable terminal symbols?

    A terminal symbol ``s`` (``s < 0``) is usable when it is not in ``dead`` and, with
    ``only`` given, is in ``only``. A worklist over the productions (each counts the
    nonterminal occurrences not known to derive yet), linear in the grammar's size: a
    chain of 10,000 rules is one pass, not 10,000. With ``csrc/earley.c`` built the same
    worklist runs there (``_earley.derivers``; ``use_c_derivers``). Raises: never.
    """
    if _C_DERIVERS[0] and _EXT is not None:
        return _EXT.derivers(cfg.rhs, cfg.lhs, num_nt, dead, only)
    derives = [False] * num_nt
    lhs_of = cfg.lhs
    pending = [-1] * len(lhs_of)  # per production: nonterminals left; -1: never finishes
    users: list[list[int]] = [[] for _ in range(num_nt)]  # productions, per occurrence
    agenda: list[int] = []
    for p, rhs in enumerate(cfg.rhs):
        if rhs and min(rhs) < 0:  # holds a terminal symbol
            if only is not None and not only:
                continue  # no terminal is usable
            if (dead or only is not None) and not all(
                s >= 0 or (s not in dead and (only is None or s in only)) for s in rhs
            ):
                continue
            nts = [s for s in rhs if s >= 0]
        else:
            nts = rhs
        for s in nts:
            users[s].append(p)
        pending[p] = len(nts)
        if not nts and not derives[lhs_of[p]]:
            derives[lhs_of[p]] = True
            agenda.append(lhs_of[p])
    while agenda:
        for p in users[agenda.pop()]:
            if pending[p] > 0:
                pending[p] -= 1
                if pending[p] == 0 and not derives[lhs_of[p]]:
                    derives[lhs_of[p]] = True
                    agenda.append(lhs_of[p])
    return derives


def _productive(
    cfg: CfgGrammar, num_nt: int, dead: set[int] | frozenset[int] = frozenset()
) -> list[bool]:
    """Nonterminals that derive at least one string (terminals do, but the ``dead``
    terminal symbols, whose language is empty).
    """
    return _derivers(cfg, num_nt, dead)


def _nullable_nonterminals(
    cfg: CfgGrammar, num_nt: int, nullable_terminals: set[int] | frozenset[int]
) -> list[bool]:
    """Per nonterminal: does it derive the empty string? (``nullable_terminals``: the
    terminal ids whose lexer accepts the empty string.) Raises: never.
    """
    return _derivers(cfg, num_nt, only=frozenset(-1 - t for t in nullable_terminals))


def _nullable(cfg: CfgGrammar, num_nt: int, nullable_terminals: set[int]):
    """A predicate: does symbol ``s`` derive the empty string?"""
    return _nullable_predicate(
        _nullable_nonterminals(cfg, num_nt, nullable_terminals), nullable_terminals
    )


def _nullable_predicate(nt: list[bool], nullable_terminals: set[int] | frozenset[int]):
    """``_nullable``'s predicate over per-nonterminal answers ``nt``."""
    terms = frozenset(nullable_terminals)

    def nullable(s: int) -> bool:
        return nt[s] if s >= 0 else (-1 - s) in terms

    return nullable
