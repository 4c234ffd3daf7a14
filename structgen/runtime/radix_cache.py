"""RadixCache: a radix tree over token ids whose nodes own KV pages of a KVPool.

The idea is SGLang's RadixAttention (a prefix tree of computed KV, reused across
requests, evicted LRU); the code is our own.

Page granularity (the design decision)
--------------------------------------
The tree stores **whole pages only**. Every key is cut down to a multiple of
``page_size`` before it is matched or inserted, every edge's token run is a multiple
of ``page_size``, and a node owns ``len(node.key) // page_size`` pages, page ``i`` of
the node holding the node's tokens ``[i * page_size, (i + 1) * page_size)``. So
``match_prefix`` always returns a length that is a multiple of ``page_size``, and a
request reuses the matched pages as they are (it appends to none of them) and
computes everything after them into fresh pages of its own.

Why: a page is then either wholly the tree's (shared, read-only, never written
again) or wholly one request's (private, being written). A page has a single owner,
and a reference count per *node* (not per page) is enough.

Partial last page: ``match_prefix_partial`` also names the tree page whose leading
tokens continue the whole-page match (fewer than ``page_size`` of them: the first
page of a child edge that starts like the request's next tokens and then parts). The
caller copies those slots' KV into a fresh page of its own (``KVPool.copy_page_prefix``)
instead of recomputing them: copy-on-write at page granularity, so the tree's page is
only read and the ownership rules below are unchanged. Without it, each request
recomputes up to ``page_size - 1`` tokens of a cached prefix (many scoring requests
that part inside one page: extraction's candidate scoring, forks, ``select``).

Partial leaves: a finished request's last page, filled only up to ``r < page_size``
tokens, is given to the tree with ``insert_partial`` instead of being freed: a leaf whose
key is those ``r`` tokens (keyed by all of them in its parent's ``children``; never a
parent, never matched by ``match_prefix``, only named as a tail by
``match_prefix_partial``). Its page is never written again (its request is done), so
copying its leading slots is as valid as copying a whole page's. The scoring requests
that continue a finished generation (extraction's candidates, forks) copy the
generation's last partial page instead of recomputing it.

Ownership contract
------------------
* Pages in the tree are owned by the tree. ``match_prefix`` lends them: a request
  that uses them must ``inc_ref`` the returned node first and ``dec_ref`` it when
  done; locked pages are never evicted, unlocked ones may be at any ``evict``.
* ``insert(token_ids, pages)`` takes ownership of the pages it stores (those of the
  whole-page prefix that was not cached yet). It returns the caller's pages of the
  already-cached part that are *not* the tree's own pages (duplicates computed twice):
  the caller frees those with ``pool.free``. The caller keeps ownership of
  ``pages[len(token_ids) // page_size:]`` (e.g. the partial last page) and frees them
  too. Passing the tree's own pages (from an earlier ``match_prefix``) is the normal
  case; they are recognised and not returned.
* Callers are runtime code, so contract violations (unbalanced ``dec_ref``, too few
  pages, ``reset`` with locks held) are internal invariants checked by ``assert``.

LRU uses a logical clock (one tick per ``match_prefix`` / ``insert``), so eviction
order is deterministic and testable. A node's access time is never older than any of
its descendants' (every touch of a node touches its whole root path).
"""

from __future__ import annotations

import heapq

from structgen.runtime.kv_pool import KVPool

__all__ = ["Node", "RadixCache"]


class Node:
    """One tree node: an edge of whole pages of tokens, and the pages holding them.

    Attributes:
        key: the edge's token ids (a tuple, ``len(key) % page_size == 0``; ``()`` at the root;
            1 to ``page_size - 1`` ids for a partial leaf, ``RadixCache.insert_partial``).
        pages: page ids, ``len(key) // page_size`` of them.
        parent: the parent node (None at the root).
        children: child nodes keyed by their first page of tokens (a tuple of ``page_size`` ids;
            a partial leaf by its whole, shorter key).
        lock_ref: locks held on this node or any descendant (a node is locked while > 0).
        last_access: logical time of the last match or insert through this node.
        id: creation number within its cache (a deterministic tie-break for eviction).
    """

    __slots__ = ("key", "pages", "parent", "children", "lock_ref", "last_access", "id")

    def __init__(
        self, key: tuple[int, ...], pages: list[int], parent: Node | None, node_id: int
    ) -> None:
        self.key = key
        self.pages = pages
        self.parent = parent
        self.children: dict[tuple[int, ...], Node] = {}
        self.lock_ref = 0
        self.last_access = 0
        self.id = node_id

    def __repr__(self) -> str:
        return f"Node(key={self.key}, pages={self.pages}, lock_ref={self.lock_ref})"


class RadixCache:
    """Prefix cache of whole KV pages over token ids, with per-node locks and LRU eviction.

    Args:
        pool: the KV page pool the cached pages belong to (and are freed back to).
    """

    def __init__(self, pool: KVPool) -> None:
        self.pool = pool
        self.page_size = pool.page_size
        self._clock = 0
        self._init_tree()

    def _init_tree(self) -> None:
        self._nodes_created = 0
        self.root = self._new_node((), [], None)
        self._leaves: set[Node] = set()  # every non-root node without children
        self._num_cached_pages = 0
        self._num_locked_pages = 0

    def _new_node(self, key: tuple[int, ...], pages: list[int], parent: Node | None) -> Node:
        self._nodes_created += 1
        return Node(key, pages, parent, self._nodes_created)

    # ------------------------------------------------------------------ sizes

    @property
    def num_cached_pages(self) -> int:
        """Pages owned by the tree."""
        return self._num_cached_pages

    @property
    def num_evictable_pages(self) -> int:
        """Pages owned by the tree and not locked (what ``evict`` could free now)."""
        return self._num_cached_pages - self._num_locked_pages

    def total_size(self) -> int:
        """Token slots of the tree's pages (``num_cached_pages * page_size``: a partial
        leaf's page counts whole).
        """
        return self._num_cached_pages * self.page_size

    # ------------------------------------------------------------------ lookup

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _whole_pages(self, token_ids: list[int]) -> tuple[int, ...]:
        n = len(token_ids) - len(token_ids) % self.page_size
        return tuple(token_ids[:n])

    def _common_pages(self, key: tuple[int, ...], tokens: tuple[int, ...], pos: int) -> int:
        """Whole pages shared by ``key`` and ``tokens[pos:]`` (the first page is known equal)."""
        ps = self.page_size
        n = min(len(key), len(tokens) - pos) // ps
        if key[: n * ps] == tokens[pos : pos + n * ps]:  # the usual case: one comparison
            return n
        i = 1
        while i < n and key[i * ps : (i + 1) * ps] == tokens[pos + i * ps : pos + (i + 1) * ps]:
            i += 1
        return i

    def _split(self, child: Node, num_pages: int) -> Node:
        """Cut ``child``'s edge after ``num_pages`` pages; return the new upper node.

        ``child`` keeps the lower part (so a request holding it keeps a valid node), and
        the new node inherits its lock count (its access time is stamped by ``_walk``).
        """
        ps = self.page_size
        parent = child.parent
        assert parent is not None and 0 < num_pages < len(child.pages)
        upper = self._new_node(child.key[: num_pages * ps], child.pages[:num_pages], parent)
        upper.lock_ref = child.lock_ref
        child.key = child.key[num_pages * ps :]
        child.pages = child.pages[num_pages:]
        child.parent = upper
        upper.children[child.key[:ps]] = child
        parent.children[upper.key[:ps]] = upper
        return upper

    def _walk(self, tokens: tuple[int, ...], now: int) -> tuple[Node, int, list[int]]:
        """Follow ``tokens`` (whole pages) down the tree, splitting the last edge if the
        match ends inside it, and stamp every node on the path with ``now``.

        Returns:
            The deepest matched node, the matched length in tokens, and the matched pages.
        """
        ps = self.page_size
        node, pos, pages = self.root, 0, []
        node.last_access = now
        while pos < len(tokens):
            child = node.children.get(tokens[pos : pos + ps])
            if child is None:
                break
            n = self._common_pages(child.key, tokens, pos)
            if n < len(child.pages):
                child = self._split(child, n)
            child.last_access = now
            pages.extend(child.pages)
            pos += len(child.key)
            node = child
        return node, pos, pages

    def match_prefix(self, token_ids: list[int]) -> tuple[list[int], int, Node]:
        """Find the longest cached whole-page prefix of ``token_ids``.

        Marks the matched path as just used (LRU). May split an edge so that the match
        ends exactly at the returned node. Does not lock anything: call ``inc_ref`` on
        the node before relying on the pages.

        Args:
            token_ids: the request's tokens; a trailing partial page is ignored.

        Returns:
            ``(pages, matched_len, node)``: the page ids holding the prefix in order,
            its length in tokens (``len(pages) * page_size``), and the node where the
            match ends (the root when nothing matched).

        Raises:
            Never.
        """
        node, matched_len, pages = self._walk(self._whole_pages(token_ids), self._tick())
        return pages, matched_len, node

    def match_prefix_partial(
        self, token_ids: list[int]
    ) -> tuple[list[int], int, Node, tuple[Node, int] | None]:
        """``match_prefix``, and where the tree continues the match inside one page.

        After the whole-page match ends at ``node``, the child edge of ``node`` whose
        first page shares the longest run of leading tokens with the rest of
        ``token_ids`` (1 to ``page_size - 1`` tokens; the first such child on a tie) is
        the partial tail: its first page's first ``num_tokens`` slots hold the KV of
        exactly those tokens in this context. The tail's edge is split after its first
        page (as ``match_prefix`` splits where a match ends) and that one-page node is
        stamped as used with the match (LRU). Nothing is locked: to read the tail page,
        ``inc_ref`` the tail node (a child of ``node``) until the copy is done.

        Args:
            token_ids: the request's tokens (what the cache may serve of them).

        Returns:
            ``(pages, matched_len, node, tail)``: the first three as ``match_prefix``
            returns them; ``tail`` is ``(tail_node, num_tokens)`` (the page is
            ``tail_node.pages[0]``), or None when no child shares a first token.

        Raises:
            Never.
        """
        now = self._tick()
        node, matched_len, pages = self._walk(self._whole_pages(token_ids), now)
        rest = token_ids[matched_len : matched_len + self.page_size - 1]
        best, best_len = None, 0
        if rest:
            for child in node.children.values():
                n = 0
                for a, b in zip(child.key, rest):
                    if a != b:
                        break
                    n += 1
                if n > best_len:
                    best, best_len = child, n
        if best is None:
            return pages, matched_len, node, None
        if len(best.pages) > 1:
            best = self._split(best, 1)
        best.last_access = now  # as new as its parent's stamp: the LRU order holds
        return pages, matched_len, node, (best, best_len)

    # ------------------------------------------------------------------ locks

    def inc_ref(self, node: Node) -> None:
        """Lock the path from ``node`` up to the root so its pages cannot be evicted.

        Args:
            node: a node returned by ``match_prefix`` (the root is a no-op).

        Raises:
            Never.
        """
        while node.parent is not None:
            if node.lock_ref == 0:
                self._num_locked_pages += len(node.pages)
            node.lock_ref += 1
            node = node.parent

    def dec_ref(self, node: Node) -> None:
        """Release one lock taken by ``inc_ref(node)``.

        Args:
            node: the node passed to the matching ``inc_ref`` (splits since then keep
                it valid: it still ends at the same token position).

        Raises:
            AssertionError: the path is not locked (unbalanced call).
        """
        while node.parent is not None:
            assert node.lock_ref > 0, "dec_ref without a matching inc_ref"
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._num_locked_pages -= len(node.pages)
            node = node.parent

    # ------------------------------------------------------------------ insert

    def insert(self, token_ids: list[int], pages: list[int]) -> list[int]:
        """Cache the whole-page prefix of ``token_ids``, held by ``pages``.

        Where part of the prefix is already cached the tree keeps its own pages. The
        inserted path is marked as just used (LRU).

        Args:
            token_ids: the tokens whose KV has been computed; a trailing partial page is
                not cached.
            pages: the caller's page table for ``token_ids``; at least
                ``len(token_ids) // page_size`` entries; page ``i`` holds tokens
                ``[i * page_size, (i + 1) * page_size)``.

        Returns:
            The caller's pages of the already-cached part that are not the tree's own
            (duplicates), in order. The caller must ``pool.free`` them, and also still
            owns (and must free) ``pages[len(token_ids) // page_size:]``. Every other
            page in ``pages`` now belongs to the tree.

        Raises:
            AssertionError: ``pages`` is too short for the whole pages of ``token_ids``.
        """
        ps = self.page_size
        tokens = self._whole_pages(token_ids)
        num_pages = len(tokens) // ps
        assert len(pages) >= num_pages, "insert needs a page for every whole page of tokens"
        now = self._tick()
        node, pos, tree_pages = self._walk(tokens, now)
        duplicates = [p for p, q in zip(pages, tree_pages) if p != q]
        if pos < len(tokens):
            leaf = self._new_node(tokens[pos:], list(pages[pos // ps : num_pages]), node)
            leaf.last_access = now
            node.children[leaf.key[:ps]] = leaf
            self._leaves.discard(node)
            self._leaves.add(leaf)
            self._num_cached_pages += len(leaf.pages)
            # A locked ``node`` means its path is locked, not the new leaf: no lock count.
        return duplicates

    def insert_partial(self, token_ids: list[int], page: int) -> bool:
        """Cache the trailing partial page of ``token_ids`` as a partial leaf.

        Args:
            token_ids: tokens whose KV has been computed, ``len(token_ids) % page_size``
                of them (>= 1) in ``page``; their whole-page prefix must be cached (an
                ``insert`` of the same tokens just before, with no eviction between).
            page: the caller's page holding those trailing tokens in its leading slots;
                it must never be written again (the caller is done with it).

        Returns:
            True when the tree took ``page`` (it now owns it); False when a cached page
            already continues the whole-page prefix with those tokens (a whole page, or
            a partial leaf at least as long): the caller still owns ``page`` and frees it.

        Raises:
            AssertionError: no trailing partial page, or its whole-page prefix is not cached.
        """
        whole = self._whole_pages(token_ids)
        tail = tuple(token_ids[len(whole) :])
        assert tail, "insert_partial needs a trailing partial page"
        now = self._tick()
        node, pos, _ = self._walk(whole, now)
        assert pos == len(whole), "insert_partial needs its whole-page prefix cached"
        if any(child.key[: len(tail)] == tail for child in node.children.values()):
            return False
        leaf = self._new_node(tail, [page], node)
        leaf.last_access = now
        node.children[tail] = leaf
        self._leaves.discard(node)
        self._leaves.add(leaf)
        self._num_cached_pages += 1
        return True

    # ------------------------------------------------------------------ import

    def import_prefix(self, src: RadixCache, token_ids: list[int]) -> int:
        """Copy into this cache what ``src`` holds of ``token_ids``' prefix past this
        cache's own match: the KV of its whole pages, and of the page that continues them
        inside one page (the tail ``match_prefix_partial`` names), copied into pages of this
        cache's pool and inserted as if computed here. Two engines over one model (host
        pipelines) so share a prefix one of them computed instead of computing it again:
        the same KV, as the kernels are batch and thread-count invariant.

        The pages come from this pool's free pages, evicting unlocked cached pages (LRU)
        where they run short (this cache's match is kept); where they cannot be had,
        nothing is imported. ``src``'s matched path is stamped as used, as a match is.

        Args:
            src: a cache over another pool of the same layout (``KVPool.same_layout``)
                whose tree and pages nothing changes during the call (the caller holds
                what steps its engine).
            token_ids: tokens a request may be served from the cache (its cache limit).

        Returns:
            Tokens of ``token_ids`` this cache now serves that it did not (0: nothing
            imported).

        Raises:
            AssertionError: ``src``'s pool does not have this pool's layout.
        """
        own_pages, own_len, own_node, own_tail = self.match_prefix_partial(token_ids)
        pages, length, _, tail = src.match_prefix_partial(token_ids)
        if length < own_len or (
            length == own_len
            and (tail is None or (own_tail is not None and own_tail[1] >= tail[1]))
        ):
            return 0
        ps = self.page_size
        copy = pages[own_len // ps :] + ([tail[0].pages[0]] if tail is not None else [])
        self.inc_ref(own_node)  # eviction must leave the pages the import continues
        try:
            short = len(copy) - self.pool.num_free_pages
            if short > 0:
                self.evict(short)
            new = self.pool.alloc(len(copy))
        finally:
            self.dec_ref(own_node)
        if new is None:
            return 0
        self.pool.copy_pages_from(src.pool, copy, new)
        whole = list(token_ids[:length])
        table = own_pages + new
        gained = length - own_len
        if tail is not None:
            key = tail[0].key
            if len(key) == ps:  # a whole page of a longer cached prefix: cached as such
                self.pool.free(self.insert(whole + list(key), table))
            else:  # a partial leaf: cached as one
                self.pool.free(self.insert(whole, table[:-1]))
                if not self.insert_partial(whole + list(key), table[-1]):
                    self.pool.free(table[-1:])
            gained += tail[1]
        else:
            self.pool.free(self.insert(whole, table))
        return gained

    # ------------------------------------------------------------------ eviction

    def evict(self, num_pages: int) -> int:
        """Free up to ``num_pages`` unlocked pages back to the pool, least recently used first.

        Pages go from the ends of unlocked leaves (the deepest tokens first); a leaf left
        without pages is removed, which may make its parent an evictable leaf. Stops
        early when nothing unlocked is left.

        Args:
            num_pages: pages wanted.

        Returns:
            Pages freed (``min(num_pages, num_evictable_pages)`` before the call).

        Raises:
            Never.
        """
        heap = [(n.last_access, n.id, n) for n in self._leaves if n.lock_ref == 0]
        heapq.heapify(heap)
        freed = 0
        while freed < num_pages and heap:
            _, _, leaf = heapq.heappop(heap)
            take = min(num_pages - freed, len(leaf.pages))
            self.pool.free(leaf.pages[len(leaf.pages) - take :])
            freed += take
            self._num_cached_pages -= take
            if take < len(leaf.pages):  # trim the leaf's tail; it stays a leaf
                del leaf.pages[len(leaf.pages) - take :]
                leaf.key = leaf.key[: len(leaf.pages) * self.page_size]
                break
            parent = leaf.parent
            assert parent is not None
            del parent.children[leaf.key[: self.page_size]]
            self._leaves.discard(leaf)
            if not parent.children and parent.parent is not None:
                self._leaves.add(parent)
                if parent.lock_ref == 0:
                    heapq.heappush(heap, (parent.last_access, parent.id, parent))
        return freed

    def reset(self) -> None:
        """Free every cached page to the pool and empty the tree.

        Raises:
            AssertionError: some path is still locked.
        """
        assert self._num_locked_pages == 0, "reset with locked pages"
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            self.pool.free(node.pages)
            stack.extend(node.children.values())
        self._init_tree()
