"""RadixCache on a 1-layer 1-head KV pool: exact page ids, eviction order, no leaks.

Hand cases first, then a hypothesis state machine against a naive reference model (a
dict from every cached whole-page prefix to the page holding its last page, with LRU
times and lock counts per prefix).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from structgen.runtime.kv_pool import KVPool
from structgen.runtime.radix_cache import Node, RadixCache


def _cache(num_pages: int = 16, page_size: int = 2) -> tuple[KVPool, RadixCache]:
    pool = KVPool(1, num_pages, page_size, 1, 2)
    return pool, RadixCache(pool)


def _nodes(cache: RadixCache) -> list[Node]:
    out, stack = [], list(cache.root.children.values())
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.children.values())
    return out


def _tree_pages(cache: RadixCache) -> list[int]:
    return [p for n in _nodes(cache) for p in n.pages]


def _check_tree(cache: RadixCache) -> None:
    """Structural invariants: whole-page edges (partial leaves: one page, shorter key, no
    children), child keys, leaf set, counters."""
    ps = cache.page_size
    nodes = _nodes(cache)
    for node in [cache.root, *nodes]:
        for first, child in node.children.items():
            assert child.parent is node
            assert first == child.key[:ps]
        if node is not cache.root and len(node.key) % ps:  # a partial leaf
            assert len(node.key) < ps and len(node.pages) == 1 and not node.children
        elif node is not cache.root:
            assert len(node.key) > 0
            assert len(node.pages) == len(node.key) // ps
            # A node's count is its own locks plus every child's.
            assert node.lock_ref >= sum(c.lock_ref for c in node.children.values())
            assert node.parent.parent is None or node.parent.last_access >= node.last_access
    assert cache._leaves == {n for n in nodes if not n.children}
    assert cache.num_cached_pages == len(_tree_pages(cache))
    locked = sum(len(n.pages) for n in nodes if n.lock_ref > 0)
    assert cache.num_evictable_pages == cache.num_cached_pages - locked
    assert cache.total_size() == cache.num_cached_pages * ps


def _no_leak(pool: KVPool, cache: RadixCache, held: list[int]) -> None:
    owned = _tree_pages(cache) + list(pool._free) + held
    assert len(owned) == len(set(owned)), "a page is owned twice"
    assert sorted(owned) == list(range(1, pool.num_pages)), "page leak or scratch page used"


# ---------------------------------------------------------------------- hand cases


def test_empty_match_returns_root():
    _, cache = _cache()
    pages, n, node = cache.match_prefix([1, 2, 3])
    assert (pages, n, node) == ([], 0, cache.root)


def test_insert_then_match_whole_pages_and_mid_page_rounds_down():
    pool, cache = _cache()
    pages = pool.alloc(3)  # [1, 2, 3]
    assert pages == [1, 2, 3]
    # 5 tokens: two whole pages cached; the third (partial) page stays the caller's.
    assert cache.insert([10, 11, 12, 13, 14], pages) == []
    pool.free(pages[2:])
    assert cache.num_cached_pages == 2
    got, n, node = cache.match_prefix([10, 11, 12, 13, 14, 15])
    assert (got, n, node.key) == ([1, 2], 4, (10, 11, 12, 13))
    # Match ending mid-page rounds down to the page boundary.
    got, n, _ = cache.match_prefix([10, 11, 12])
    assert (got, n) == ([1], 2)
    got, n, _ = cache.match_prefix([10, 99])
    assert (got, n) == ([], 0)
    # A mismatch in the second token of a page loses the whole page.
    got, n, _ = cache.match_prefix([10, 11, 12, 99])
    assert (got, n) == ([1], 2)
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_shared_prefix_splits_edge():
    pool, cache = _cache()
    a = pool.alloc(3)  # [1, 2, 3]
    cache.insert([1, 2, 3, 4, 5, 6], a)
    b = pool.alloc(3)  # [4, 5, 6]
    dup = cache.insert([1, 2, 3, 4, 7, 8], b)
    assert dup == [4, 5]  # pages for [1,2] and [3,4] were already cached as 1 and 2
    pool.free(dup)
    root_child = cache.root.children[(1, 2)]
    assert root_child.key == (1, 2, 3, 4) and root_child.pages == [1, 2]
    assert {k: (c.key, c.pages) for k, c in root_child.children.items()} == {
        (5, 6): ((5, 6), [3]),
        (7, 8): ((7, 8), [6]),
    }
    assert cache.match_prefix([1, 2, 3, 4, 7, 8, 9])[:2] == ([1, 2, 6], 6)
    assert cache.match_prefix([1, 2, 3, 4, 5, 6])[:2] == ([1, 2, 3], 6)
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_match_splits_edge_at_page_boundary_and_node_is_lockable():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4, 5, 6], pool.alloc(3))
    pages, n, node = cache.match_prefix([1, 2, 3, 4, 9, 9])
    assert (pages, n) == ([1, 2], 4)
    assert node.key == (1, 2, 3, 4) and node.pages == [1, 2]
    assert [c.key for c in node.children.values()] == [(5, 6)]
    cache.inc_ref(node)
    assert cache.num_evictable_pages == 1
    assert cache.evict(3) == 1  # only the unlocked tail page [5, 6]
    assert cache.match_prefix([1, 2, 3, 4, 5, 6])[:2] == ([1, 2], 4)
    cache.dec_ref(node)
    assert cache.num_evictable_pages == 2
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_match_prefix_partial_names_the_page_continuing_the_match():
    pool, cache = _cache(page_size=4)
    cache.insert([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], pool.alloc(3))  # pages 1, 2, 3
    cache.insert([1, 2, 3, 4, 5, 6, 9, 9], [1] + pool.alloc(1))  # page 4 under [1..4]
    # whole page [1..4], then 5, 6, 7 go on inside page 2 (the first child with the run)
    pages, n, node, tail = cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7, 0, 0])
    assert (pages, n, node.key) == ([1], 4, (1, 2, 3, 4))
    tail_node, k = tail
    assert (tail_node.pages, k, tail_node.parent) == ([2], 3, node)
    # the tail's edge was split after its first page; pages and matches are unchanged
    assert tail_node.key == (5, 6, 7, 8) and [c.pages for c in tail_node.children.values()] == [[3]]
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0])[:2] == ([1, 2, 3], 12)
    # a tie (5, 6 shared by both children) names the first child; 9 leads to page 4
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 0])[3][0].pages == [2]
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 9])[3][0].pages == [4]
    # only up to page_size - 1 tokens are read past the match; no shared first token: None
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7])[3][1] == 3
    assert cache.match_prefix_partial([1, 2, 3, 4, 8])[3] is None
    assert cache.match_prefix_partial([1, 2, 3, 4])[3] is None
    assert cache.match_prefix_partial([7])[1:] == (0, cache.root, None)
    _, n, _, (root_tail, k) = cache.match_prefix_partial([1, 2, 9])
    assert (n, root_tail.pages, k) == (0, [1], 2)
    # a locked tail survives eviction; unlocked, it goes as any cached page
    _, _, _, (tail_node, _) = cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 9, 0])
    cache.inc_ref(tail_node)
    cache.evict(10)
    assert tail_node.pages == [4] and cache.num_cached_pages == 2
    cache.dec_ref(tail_node)
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_insert_partial_keeps_a_last_page_for_copies_only():
    """A finished request's partial last page as a partial leaf: never served by
    ``match_prefix``, named as the tail by ``match_prefix_partial`` (longest run first),
    refused where a cached page already continues the prefix with its tokens, evicted as
    any leaf."""
    pool, cache = _cache(page_size=4)
    tokens = [1, 2, 3, 4, 5, 6]
    pages = pool.alloc(2)  # [1, 2]: tokens 1..4, and 5, 6 in page 2's first slots
    cache.insert(tokens, pages)
    assert cache.insert_partial(tokens, pages[1])
    assert cache.num_cached_pages == 2
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7, 8])[:2] == ([1], 4)
    _, n, node, (tail, k) = cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7, 8])
    assert (n, tail.pages, k, tail.parent) == (4, [2], 2, node)
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 9])[3][1] == 1
    assert cache.match_prefix_partial([1, 2, 3, 4, 6])[3] is None
    other = pool.alloc(1)[0]  # 3
    assert not cache.insert_partial([1, 2, 3, 4, 5], other)  # (5, 6) continues it already
    assert cache.insert_partial([1, 2, 3, 4, 5, 6, 7], other)  # longer: kept beside it
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7, 8])[3][0].pages == [other]
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 9])[3][1] == 2
    whole = pool.alloc(2)  # [4, 5]: a whole page (5, 6, 7, 8) beside the partial leaves
    assert cache.insert([1, 2, 3, 4, 5, 6, 7, 8], [1, *whole[1:]]) == []
    pool.free(whole[:1])
    spare = pool.alloc(1)[0]
    assert not cache.insert_partial([1, 2, 3, 4, 5, 6], spare)
    assert cache.insert_partial([1, 2, 3, 4, 5, 6, 7, 8, 9], spare)  # under the new page
    assert cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7, 8, 9, 9])[3][0].pages == [spare]
    assert cache.num_cached_pages == 5
    _check_tree(cache)
    _no_leak(pool, cache, [])
    # a locked partial tail survives eviction; unlocked, it goes like any leaf
    tail = cache.match_prefix_partial([1, 2, 3, 4, 5, 6, 7, 0])[3][0]
    assert tail.pages == [other]
    cache.inc_ref(tail)
    assert cache.evict(10) == 3  # (5, 6), (9,) and then (5, 6, 7, 8)
    assert tail.pages == [other] and cache.num_cached_pages == 2
    cache.dec_ref(tail)
    assert cache.evict(10) == 2
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_insert_passing_tree_pages_returns_only_true_duplicates():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4], pool.alloc(2))  # pages [1, 2]
    pages, n, node = cache.match_prefix([1, 2, 3, 4, 5, 6, 7])
    cache.inc_ref(node)
    fresh = pool.alloc(2)  # the request computes [5, 6] and [7] into its own pages
    dup = cache.insert([1, 2, 3, 4, 5, 6, 7], pages + fresh)
    assert dup == []  # the tree's own pages are not duplicates
    cache.dec_ref(node)
    pool.free(fresh[1:])  # the partial last page stays the caller's
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7])[:2] == ([1, 2, fresh[0]], 6)
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_insert_existing_prefix_returns_duplicates():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4], pool.alloc(2))  # [1, 2]
    again = pool.alloc(2)  # [3, 4], computed twice by a request that did not match
    assert cache.insert([1, 2, 3, 4], again) == [3, 4]
    pool.free(again)
    assert cache.num_cached_pages == 2
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_lru_eviction_order_exact():
    pool, cache = _cache()
    cache.insert([1, 1], pool.alloc(1))  # page 1, t=1
    cache.insert([2, 2], pool.alloc(1))  # page 2, t=2
    cache.insert([3, 3], pool.alloc(1))  # page 3, t=3
    cache.match_prefix([1, 1])  # touch page 1: now the order is 2, 3, 1
    free_before = pool.num_free_pages
    assert cache.evict(1) == 1
    assert pool._free[-1] == 2
    assert cache.evict(1) == 1
    assert pool._free[-1] == 3
    assert cache.match_prefix([1, 1])[:2] == ([1], 2)
    assert pool.num_free_pages == free_before + 2
    _check_tree(cache)


def test_evict_trims_leaf_tail_then_parent_becomes_evictable():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4], pool.alloc(2))  # [1, 2]
    cache.insert([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, *pool.alloc(2)])  # child [3, 4]
    cache.insert([1, 2, 3, 4, 9, 9], [1, 2, *pool.alloc(1)])  # child [5], newest
    # Oldest leaf is [5,6,7,8] -> pages [3, 4]; its tail page goes first.
    assert cache.evict(1) == 1 and pool._free[-1] == 4
    assert cache.match_prefix([1, 2, 3, 4, 5, 6, 7, 8])[:2] == ([1, 2, 3], 6)  # touched now
    # Now leaf [9, 9] (page 5) is the oldest; then [5, 6] (page 3); then the parent.
    assert cache.evict(2) == 2
    assert pool._free[-2:] == [5, 3]
    parent = cache.root.children[(1, 2)]
    assert parent.children == {} and cache._leaves == {parent}
    assert cache.evict(10) == 2
    assert cache.num_cached_pages == 0 and cache.root.children == {}
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_locked_path_never_evicted_and_parent_of_locked_child_stays():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4], pool.alloc(2))  # [1, 2]
    cache.insert([1, 2, 3, 4, 5, 6], [1, 2, *pool.alloc(1)])  # [3]
    cache.insert([7, 8], pool.alloc(1))  # [4]
    _, _, node = cache.match_prefix([1, 2, 3, 4, 5, 6])
    cache.inc_ref(node)
    cache.inc_ref(node)  # two requests share it
    assert cache.num_evictable_pages == 1
    assert cache.evict(10) == 1  # only [7, 8]
    assert cache.num_cached_pages == 3
    cache.dec_ref(node)
    assert cache.evict(10) == 0
    cache.dec_ref(node)
    assert cache.num_evictable_pages == 3
    assert cache.evict(10) == 3
    _check_tree(cache)
    _no_leak(pool, cache, [])


def test_reset_frees_everything():
    pool, cache = _cache()
    cache.insert([1, 2, 3, 4], pool.alloc(2))
    cache.insert([5, 6], pool.alloc(1))
    cache.reset()
    assert cache.num_cached_pages == 0 and cache.match_prefix([1, 2])[1] == 0
    _no_leak(pool, cache, [])


def test_reset_with_lock_asserts():
    pool, cache = _cache()
    cache.insert([1, 2], pool.alloc(1))
    cache.inc_ref(cache.match_prefix([1, 2])[2])
    try:
        cache.reset()
    except AssertionError:
        pass
    else:
        raise AssertionError("reset must refuse while a path is locked")


# ---------------------------------------------------------------------- state machine

PAGE_SIZE = 2
NUM_PAGES = 13  # 12 usable: small enough that eviction happens often
# Prompts are a cut of one of a few shared documents plus a short random tail, so that
# prefixes are shared often (and edges split) rather than by chance.
_DOCS = [[0] * 10, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0, 1, 1, 2, 2], [2, 1] * 5]
tokens_st = st.builds(
    lambda doc, n, tail: doc[:n] + tail,
    st.sampled_from(_DOCS),
    st.integers(0, 10),
    st.lists(st.integers(0, 2), max_size=3),
)


class RadixCacheMachine(RuleBasedStateMachine):
    """Random insert / match / lock / unlock / evict against a reference model.

    Reference: ``ref[prefix] = [page, last_access]`` for every cached whole-page prefix
    (a tuple of tokens) and every partial leaf (its whole prefix plus the leaf's tokens),
    ``locks[prefix]`` = requests holding it. A "request" matches and locks a prefix,
    allocates fresh pages for the rest, and on finish inserts everything (with
    ``partial``, its partial last page too).
    """

    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.pool = KVPool(1, NUM_PAGES, PAGE_SIZE, 1, 2)
        self.cache = RadixCache(self.pool)
        self.ref: dict[tuple[int, ...], list[int]] = {}
        self.locks: Counter[tuple[int, ...]] = Counter()
        self.clock = 0
        self.live: dict[int, dict] = {}
        self.next_id = 0

    # --- reference helpers

    def _ref_match(self, tokens: list[int]) -> tuple[list[int], int]:
        pages, n = [], PAGE_SIZE
        while n <= len(tokens) and tuple(tokens[:n]) in self.ref:
            pages.append(self.ref[tuple(tokens[:n])][0])
            n += PAGE_SIZE
        return pages, len(pages) * PAGE_SIZE

    def _ref_touch(self, tokens: list[int], length: int) -> None:
        self.clock += 1
        for n in range(PAGE_SIZE, length + 1, PAGE_SIZE):
            self.ref[tuple(tokens[:n])][1] = self.clock

    def _ref_insert(self, tokens: list[int], pages: list[int]) -> list[int]:
        dup = []
        for i in range(len(tokens) // PAGE_SIZE):
            key = tuple(tokens[: (i + 1) * PAGE_SIZE])
            if key in self.ref:
                if self.ref[key][0] != pages[i]:
                    dup.append(pages[i])
            else:
                self.ref[key] = [pages[i], 0]
        self._ref_touch(tokens, len(tokens) - len(tokens) % PAGE_SIZE)
        return dup

    def _ref_evict(self, num_pages: int) -> list[int]:
        """Greedy page-level LRU: the oldest unlocked prefix that no cached prefix extends."""
        freed = []
        for _ in range(num_pages):
            inner = {k[: (len(k) - 1) // PAGE_SIZE * PAGE_SIZE] for k in self.ref}
            cands = [
                (t, k) for k, (_, t) in self.ref.items() if not self.locks[k] and k not in inner
            ]
            if not cands:
                break
            cands.sort()
            assert len(cands) == 1 or cands[0][0] != cands[1][0], "LRU tie in the reference"
            key = cands[0][1]
            freed.append(self.ref.pop(key)[0])
        return freed

    def _held(self) -> list[int]:
        return [p for r in self.live.values() for p in r["fresh"]]

    # --- rules

    @rule(tokens=tokens_st)
    def match(self, tokens):
        pages, n, node = self.cache.match_prefix(tokens)
        assert (pages, n) == self._ref_match(tokens)
        self._ref_touch(tokens, n)
        node_path_len = 0
        while node.parent is not None:
            node_path_len += len(node.key)
            node = node.parent
        assert node_path_len == n

    @rule(tokens=tokens_st)
    def match_partial(self, tokens):
        """``match_prefix_partial`` against the reference: the cached one-page extensions
        of the whole-page match, ranked by the run they share with the next tokens."""
        pages, n, _, tail = self.cache.match_prefix_partial(tokens)
        assert (pages, n) == self._ref_match(tokens)
        self._ref_touch(tokens, n)
        rest = tokens[n : n + PAGE_SIZE - 1]

        def run(key: tuple[int, ...]) -> int:
            m = 0
            while m < len(rest) and n + m < len(key) and key[n + m] == rest[m]:
                m += 1
            return m

        exts = [k for k in self.ref if n < len(k) <= n + PAGE_SIZE and list(k[:n]) == tokens[:n]]
        best = max((run(k) for k in exts), default=0)
        if best == 0:
            assert tail is None
            return
        tail_node, m = tail
        assert m == best
        (key,) = [k for k in exts if run(k) == best and self.ref[k][0] == tail_node.pages[0]]
        assert tail_node.pages == [self.ref[key][0]]
        self.ref[key][1] = self.clock  # stamped with the match

    @rule(tokens=tokens_st)
    def insert_fresh(self, tokens):
        """A request that computed everything itself (no match) and inserts on finish."""
        need = -(-len(tokens) // PAGE_SIZE)
        pages = self._alloc(need)
        if pages is None:
            return
        dup = self.cache.insert(tokens, pages)
        assert dup == self._ref_insert(tokens, pages)
        self.pool.free(dup)
        self.pool.free(pages[len(tokens) // PAGE_SIZE :])

    def _alloc(self, n: int) -> list[int] | None:
        pages = self.pool.alloc(n)
        if pages is None:
            short = n - self.pool.num_free_pages
            freed = self.cache.evict(short)
            assert sorted(self.pool._free[-freed:] if freed else []) == sorted(
                self._ref_evict(short)
            )
            pages = self.pool.alloc(n)
        return pages

    @rule(target=requests, tokens=tokens_st)
    def start_request(self, tokens):
        pages, n, node = self.cache.match_prefix(tokens)
        assert (pages, n) == self._ref_match(tokens)
        self._ref_touch(tokens, n)
        self.cache.inc_ref(node)
        for m in range(PAGE_SIZE, n + 1, PAGE_SIZE):
            self.locks[tuple(tokens[:m])] += 1
        rid = self.next_id
        self.next_id += 1
        self.live[rid] = {"tokens": tokens, "node": node, "matched": pages, "n": n, "fresh": []}
        fresh = self._alloc(-(-len(tokens) // PAGE_SIZE) - len(pages))
        if fresh is not None:
            self.live[rid]["fresh"] = fresh
        else:
            self.live[rid]["tokens"] = tokens[:n]  # could not grow: keeps only its match
        return rid

    def _unlock(self, r: dict) -> None:
        self.cache.dec_ref(r["node"])
        for m in range(PAGE_SIZE, r["n"] + 1, PAGE_SIZE):
            self.locks[tuple(r["tokens"][:m])] -= 1

    @rule(rid=consumes(requests), partial=st.booleans())
    def finish_request(self, rid, partial):
        r = self.live.pop(rid)
        tokens, table = r["tokens"], r["matched"] + r["fresh"]
        dup = self.cache.insert(tokens, table)
        assert dup == self._ref_insert(tokens, table)
        whole = len(tokens) // PAGE_SIZE
        if partial and len(tokens) % PAGE_SIZE:
            # covered: a cached page continuing the whole prefix with the partial tokens
            covered = any(
                whole * PAGE_SIZE < len(k) <= (whole + 1) * PAGE_SIZE
                and k[: len(tokens)] == tuple(tokens)
                for k in self.ref
            )
            took = self.cache.insert_partial(tokens, table[whole])
            self._ref_touch(tokens, whole * PAGE_SIZE)
            assert took == (not covered)
            if took:
                self.ref[tuple(tokens)] = [table[whole], self.clock]
                whole += 1
        self._unlock(r)
        self.pool.free(dup)
        self.pool.free(table[whole:])

    @rule(rid=consumes(requests))
    def abort_request(self, rid):
        r = self.live.pop(rid)
        self._unlock(r)
        self.pool.free(r["fresh"])

    @rule(num_pages=st.integers(0, 6))
    def evict(self, num_pages):
        expected = min(num_pages, self.cache.num_evictable_pages)
        freed = self.cache.evict(num_pages)
        assert freed == expected
        assert sorted(self.pool._free[len(self.pool._free) - freed :]) == sorted(
            self._ref_evict(num_pages)
        )

    @precondition(lambda self: not self.live)
    @rule()
    def reset(self):
        self.cache.reset()
        self.ref.clear()

    # --- invariants

    @invariant()
    def pages_accounted(self):
        _check_tree(self.cache)
        _no_leak(self.pool, self.cache, self._held())
        assert sorted(_tree_pages(self.cache)) == sorted(p for p, _ in self.ref.values())

    @invariant()
    def locked_pages_still_cached(self):
        for r in self.live.values():
            assert self._ref_match(r["tokens"])[0][: len(r["matched"])] == r["matched"]
            assert r["node"] is self.cache.root or r["node"].lock_ref > 0
        locked = {p for key, (p, _) in self.ref.items() if self.locks[key]}
        tree_locked = {p for n in _nodes(self.cache) if n.lock_ref for p in n.pages}
        assert locked == tree_locked


RadixCacheMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_radix_cache_state_machine = RadixCacheMachine.TestCase
