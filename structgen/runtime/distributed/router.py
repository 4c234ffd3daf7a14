"""Cache-aware routing of requests over data-parallel replicas.

The policy of SGLang's router (``sgl-router``, "cache-aware load balancing"): the router
keeps an *approximate* radix tree of the prompts it has sent to each replica (it never
asks the replicas what they really cache), and

1. when the load is imbalanced (``max - min > balance_abs_threshold`` and
   ``max > balance_rel_threshold * min`` outstanding requests) it sends the request to the
   least-loaded replica;
2. otherwise to the replica whose tree holds the longest prefix of the prompt, if that
   prefix covers more than ``cache_threshold`` of it;
3. otherwise to the least-loaded replica (fewest outstanding requests; ties rotate).

The chosen replica's tree then records the prompt. Each replica's share of the tree is
bounded (``max_tree_items``); least recently used leaves are evicted first, which mirrors
the replicas' own LRU eviction. Keys are sequences of hashable items: the characters of
a prompt's text (as SGLang does, no tokenizer needed at the router) or token ids.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

__all__ = ["ApproxRadixTree", "CacheAwareRouter", "routing_key"]


class _Node:
    __slots__ = ("children", "edge", "parent", "tenants")

    def __init__(self, edge: tuple, parent: _Node | None) -> None:
        self.edge = edge  # items on the edge from the parent to this node
        self.parent = parent
        self.children: dict[Hashable, _Node] = {}  # first item of the child's edge -> child
        self.tenants: dict[int, float] = {}  # replica -> last access time


class ApproxRadixTree:
    """Radix tree over item sequences whose nodes remember which replicas saw them.

    A replica present at a node is present at every ancestor (inserts tag the whole path).
    """

    def __init__(self) -> None:
        self.root = _Node((), None)
        self.size: dict[int, int] = {}  # replica -> items on edges tagged with it
        self._clock = itertools.count()

    def insert(self, key: Sequence[Hashable], tenant: int) -> None:
        """Record that ``tenant`` has (will have) cached ``key``."""
        key = tuple(key)
        now = next(self._clock)
        node, i = self.root, 0
        node.tenants[tenant] = now
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                child = _Node(key[i:], node)
                node.children[key[i]] = child
            else:
                n = _common(child.edge, key, i)
                if n < len(child.edge):
                    child = self._split(child, n)
            if tenant not in child.tenants:
                self.size[tenant] = self.size.get(tenant, 0) + len(child.edge)
            child.tenants[tenant] = now
            node, i = child, i + len(child.edge)

    def _split(self, child: _Node, n: int) -> _Node:
        """Split ``child``'s edge after ``n`` items; returns the new upper node."""
        parent = child.parent
        upper = _Node(child.edge[:n], parent)
        upper.tenants = dict(child.tenants)
        parent.children[child.edge[0]] = upper
        child.edge = child.edge[n:]
        child.parent = upper
        upper.children[child.edge[0]] = child
        return upper

    def prefix_match(self, key: Sequence[Hashable]) -> dict[int, int]:
        """For each replica, how many leading items of ``key`` its share of the tree holds."""
        key = tuple(key)
        best: dict[int, int] = {}
        node, i = self.root, 0
        while i < len(key):
            child = node.children.get(key[i])
            if child is None:
                break
            n = _common(child.edge, key, i)
            for tenant in child.tenants:
                best[tenant] = i + n
            if n < len(child.edge):
                break
            node, i = child, i + n
        return best

    def evict(self, tenant: int, max_items: int) -> None:
        """Drop ``tenant``'s least recently used leaves until it holds at most ``max_items``."""
        while self.size.get(tenant, 0) > max_items:
            leaves = [
                n
                for n in self._nodes()
                if tenant in n.tenants and not any(tenant in c.tenants for c in n.children.values())
            ]
            if not leaves:
                return
            leaves.sort(key=lambda n: n.tenants[tenant])
            target = self.size[tenant] - max_items * 9 // 10  # evict to 90%: amortise the scan
            for leaf in leaves:
                if target <= 0:
                    break
                del leaf.tenants[tenant]
                self.size[tenant] -= len(leaf.edge)
                target -= len(leaf.edge)
                self._prune(leaf)

    def _prune(self, node: _Node) -> None:
        while node.parent is not None and not node.tenants and not node.children:
            del node.parent.children[node.edge[0]]
            node = node.parent

    def _nodes(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node is not self.root:
                yield node
            stack.extend(node.children.values())


def _common(edge: tuple, key: tuple, start: int) -> int:
    n = 0
    limit = min(len(edge), len(key) - start)
    while n < limit and edge[n] == key[start + n]:
        n += 1
    return n


def routing_key(prompt) -> Sequence[Hashable]:
    r"""The item sequence the router matches for a prompt: its text's characters, chat
    messages rendered as ``role\ncontent\n`` text, or its token ids.
    """
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, dict) for m in prompt):
        return "".join(f"{m.get('role', '')}\n{m.get('content', '')}\n" for m in prompt)
    return tuple(prompt) if isinstance(prompt, (list, tuple)) else (repr(prompt),)


class CacheAwareRouter:
    """Chooses a replica per request (see module doc); tracks outstanding requests.

    Args:
        num_replicas: replicas to route over.
        cache_threshold: least matched share of the prompt that routes by cache (0..1).
        balance_abs_threshold / balance_rel_threshold: when both are exceeded by the spread
            of outstanding requests, route by load only.
        max_tree_items: items (characters or tokens) each replica's share of the tree keeps.

    Attributes:
        outstanding: per replica, requests sent and not finished.
        num_routed / num_cache_routed: per replica, requests routed / routed by cache hit.
    """

    def __init__(
        self,
        num_replicas: int,
        cache_threshold: float = 0.5,
        balance_abs_threshold: int = 32,
        balance_rel_threshold: float = 1.5,
        max_tree_items: int = 1 << 20,
    ) -> None:
        self.num_replicas = num_replicas
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.max_tree_items = max_tree_items
        self.tree = ApproxRadixTree()
        self.outstanding = [0] * num_replicas
        self.num_routed = [0] * num_replicas
        self.num_cache_routed = [0] * num_replicas
        self._rotate = itertools.count()
        self.alive = [True] * num_replicas

    def _least_loaded(self) -> int:
        live = [r for r in range(self.num_replicas) if self.alive[r]]
        low = min(self.outstanding[r] for r in live)
        ties = [r for r in live if self.outstanding[r] == low]
        return ties[next(self._rotate) % len(ties)]

    def route(self, key: Sequence[Hashable]) -> int:
        """The replica for a request with routing key ``key``; counts it as outstanding.

        Raises:
            RuntimeError: no replica is alive.
        """
        if not any(self.alive):
            raise RuntimeError("no data-parallel replica is alive")
        loads = [self.outstanding[r] for r in range(self.num_replicas) if self.alive[r]]
        hi, lo = max(loads), min(loads)
        imbalanced = hi - lo > self.balance_abs_threshold and hi > self.balance_rel_threshold * lo
        choice, by_cache = None, False
        if not imbalanced and len(key):
            matches = {r: n for r, n in self.tree.prefix_match(key).items() if self.alive[r]}
            if matches:
                best = max(matches, key=lambda r: (matches[r], -self.outstanding[r]))
                if matches[best] / len(key) > self.cache_threshold:
                    choice, by_cache = best, True
        if choice is None:
            choice = self._least_loaded()
        self.tree.insert(key, choice)
        if self.tree.size.get(choice, 0) > self.max_tree_items:
            self.tree.evict(choice, self.max_tree_items)
        self.outstanding[choice] += 1
        self.num_routed[choice] += 1
        self.num_cache_routed[choice] += by_cache
        return choice

    def finished(self, replica: int) -> None:
        """A request routed to ``replica`` is done."""
        self.outstanding[replica] = max(0, self.outstanding[replica] - 1)

    def mark_dead(self, replica: int) -> None:
        """Route nothing more to ``replica``."""
        self.alive[replica] = False
