"""CORAL's conversation construction, part 1: title trees from Wikipedia-style HTML pages and
the four conversation-flow samplers (Cheng et al., *CORAL: Benchmarking Multi-turn
Conversational Retrieval-Augmented Generation*, arXiv 2410.23090; repository Ariya12138/CORAL).

A page becomes a :class:`TitleTree`: the ``<h1>`` is the root, ``<h2>``..``<h6>`` nest by
level. A conversation flow is a sequence of node ids; each node later becomes one turn
(keyword chain = the titles from the root to the node, golden response = the node's
section text, golden passages = its cited references). Turning flows into turns is not
this module's job.

HTML convention (read with the standard library's ``html.parser``; real Wikipedia markup
fits it):

- root title: the text of the first ``<h1>``; without one, the ``<title>``, else the page
  id. Root text (the lead) = the text between the ``<h1>`` and the first section heading;
  text and headings before the ``<h1>`` are page chrome and are dropped (without an
  ``<h1>`` the text before the first heading is the lead). A later ``<h1>`` is read as an ``<h2>``.
- sections: ``<h2>``..``<h6>``; a heading attaches to the nearest earlier heading of a
  smaller level (a skipped level, ``h2`` then ``h4``, attaches the ``h4`` to the ``h2``);
  its ``level`` is its own tag's number. A heading with empty text is not a heading.
  Section text = the text between the heading and the next heading of any level, in
  document order; block elements (``p``, ``li``, ``div``, ``br``, ...) break lines.
- dropped everywhere: ``script``, ``style``, ``noscript``, ``template``, ``<head>`` and
  any element whose class is ``mw-editsection`` (the "[edit]" links) or
  ``mw-cite-backlink`` (the "^" back links of the reference list).
- citations: ``<sup class="reference"><a href="#ID">[3]</a></sup>``; ``ID`` (the link's
  fragment, e.g. Wikipedia's ``cite_note-3`` / ``cite_note-Smith-3``, or ``ref-3``) is the
  reference id. The marker is removed from ``text``; ``marked_text`` keeps it as
  ``[ID]`` at its position (for per-sentence citation labelling), ``cited_refs`` lists
  the ids in order of first citation. Ids missing from the reference list are kept.
- reference list: any element with class ``references`` (Wikipedia's
  ``<ol class="references">``); each ``<li id="ID">`` inside it is one reference, its
  text stored in ``TitleTree.references[ID]``. The list's text belongs to no section.
- ``skip_sections`` (default :data:`DEFAULT_SKIP_SECTIONS`: References, External links,
  See also, Notes, ...; compared case-insensitively) drops those sections with all their
  subsections; pass ``()`` to keep every heading.

CORAL's own code (``find_hi`` in ``Linear_Descent_Sampling/preprocess_LDS.py``)
additionally drops sections under 10 characters and stops splitting at a heading of more
than 10 words; those filters are left to the caller (a node's ``text`` is all it needs).

Node ids are ``"<page_id>#<k>"`` with ``k`` the node's position in document order (root
0), unique across pages, so a DTRW flow that spans two trees is still a plain id list.

Samplers (all start at the root, never repeat a node, and draw everything from the given
``numpy.random.Generator``, so the same seed gives the same flow). The number of turns
``n`` is drawn uniformly from ``[min, min(max, capacity)]`` where capacity is the longest
flow the tree allows (:func:`flow_capacity`); a tree whose capacity is below ``min``
raises :class:`FlowTooShortError` (the caller skips and counts it).

- LDS (linear descent): each next node is a child of the previous one; the child is drawn
  uniformly among those whose subtree still reaches ``n`` nodes.
- SIDS (sibling-inclusive descent): each next node is a child of the previous one or its
  next sibling (the following node with the same parent), as CORAL's
  ``find_down_right.py`` moves "down or right"; drawn uniformly among the moves that can
  still reach ``n`` nodes. Flows therefore follow reading order.
- STRW (single-tree random walk): the links are parent, child and sibling (any other child
  of the same parent). Each step moves to a uniformly drawn unvisited linked node; at a dead
  end (no unvisited linked node) the walk steps back along its own path, through nodes
  already discussed, to the latest one that has an unvisited linked node, and moves on
  from there (depth-first). So every move follows a link, a section is never asked twice,
  and a walk of ``n <= len(tree)`` nodes always exists (capacity = number of nodes). (From
  the root an unvisited parent never occurs, so "up" happens only by stepping back.)
  CORAL's ``Single_Tree_Random_Walk/cleaning_data.py`` takes the nodes in plain pre-order,
  which is this walk with children always taken first, in order.
- DTRW (dual-tree random walk): the second tree is the one whose root title BM25 (the
  project's ``bm25s`` settings: Lucene BM25, k1 0.9, b 0.4, English stopwords and stemmer)
  ranks first against the current root title, among the other trees (same page id
  excluded; ties go to the earlier tree; no tree with a positive score raises
  :class:`NoRelatedTreeError`). ``n`` is drawn from ``[min, min(max, |T1| + |T2|)]``; the
  first ``k`` turns are an STRW walk in the first tree, the remaining ``n - k`` an STRW
  walk in the second tree entered at its root; ``k`` is uniform over
  ``[ceil(0.4 n), floor(0.6 n)]`` (:data:`DTRW_FIRST_SHARE`) within what both trees allow
  (at least one turn in each). CORAL's released code pairs pages with a dense retriever
  and cuts the first page at a random 7..10 turns (``Dual_Tree_Random_Walk/group``); the
  paper describes BM25 over root titles, which is what this does.

Turn ranges (the paper's dataset description, as recorded in the project's shared reference
``published/coral.yaml``): 2,000 conversations per sampler; LDS 3-6 turns; SIDS, STRW and DTRW 1,600 with 6-10 turns plus
400 with 11-20 (CORAL's STRW filter and DTRW merge keep 11-20 turns and number their
samples from 1601, i.e. they build the 400 long ones). :func:`draw_turn_range` draws that
mixture.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Iterable, Iterator, Sequence

import numpy as np

from convrag.errors import ConfigError, ConvragError

SAMPLERS = ("lds", "sids", "strw", "dtrw")
LDS_TURNS = (3, 6)
DESCENT_TURNS = (6, 10)  # SIDS / STRW / DTRW, the 1,600 regular conversations per sampler
LONG_TURNS = (11, 20)  # SIDS / STRW / DTRW, the 400 long conversations per sampler
LONG_SHARE = 400 / 2000
DEFAULT_TURNS = {"lds": LDS_TURNS, "sids": DESCENT_TURNS, "strw": DESCENT_TURNS, "dtrw": DESCENT_TURNS}
TURN_RANGES = {"lds": (LDS_TURNS,), "sids": (DESCENT_TURNS, LONG_TURNS),
               "strw": (DESCENT_TURNS, LONG_TURNS), "dtrw": (DESCENT_TURNS, LONG_TURNS)}
DTRW_FIRST_SHARE = (0.4, 0.6)
DEFAULT_SKIP_SECTIONS = frozenset({
    "references", "external links", "see also", "notes", "further reading", "bibliography",
    "sources", "citations", "footnotes", "notes and references",
})


class FlowError(ConvragError):
    """A flow cannot be sampled from the given tree(s)."""


class FlowTooShortError(FlowError):
    """The tree (or tree pair) cannot hold the minimum number of turns."""


class NoRelatedTreeError(FlowError):
    """DTRW found no other tree whose root title shares a term with the current one."""


# --------------------------------------------------------------------------- trees


@dataclass
class TitleNode:
    node_id: str
    page_id: str
    index: int  # position in document order; the root is 0
    title: str
    level: int  # 1 for the root, else the heading tag's number (2..6)
    parent: str | None
    children: list[str] = field(default_factory=list)
    text: str = ""
    marked_text: str = ""  # ``text`` with each citation kept as ``[ref id]``
    cited_refs: tuple[str, ...] = ()


@dataclass
class TitleTree:
    page_id: str
    nodes: dict[str, TitleNode]  # in document order, root first
    references: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> TitleNode:
        return next(iter(self.nodes.values()))

    @property
    def root_id(self) -> str:
        return self.root.node_id

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[TitleNode]:
        return iter(self.nodes.values())

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def __getitem__(self, node_id: str) -> TitleNode:
        return self.nodes[node_id]

    def siblings(self, node_id: str) -> list[str]:
        """The other children of the node's parent, in document order."""
        parent = self.nodes[node_id].parent
        return [] if parent is None else [c for c in self.nodes[parent].children if c != node_id]

    def next_sibling(self, node_id: str) -> str | None:
        parent = self.nodes[node_id].parent
        if parent is None:
            return None
        kids = self.nodes[parent].children
        i = kids.index(node_id)
        return kids[i + 1] if i + 1 < len(kids) else None

    def links(self, node_id: str) -> list[str]:
        """STRW's links: the parent, the siblings and the children, in that order."""
        node = self.nodes[node_id]
        return ([node.parent] if node.parent else []) + self.siblings(node_id) + list(node.children)

    def keyword_chain(self, node_id: str) -> list[str]:
        """Titles from the root down to the node (CORAL's keyword chain)."""
        chain = []
        cur: str | None = node_id
        while cur is not None:
            chain.append(self.nodes[cur].title)
            cur = self.nodes[cur].parent
        return chain[::-1]

    @property
    def height(self) -> int:
        """Nodes on the longest root-to-leaf path."""
        return _longest(self, lambda n: n.children)[self.root_id]

    def to_dict(self) -> dict:
        return {"page_id": self.page_id, "references": dict(self.references),
                "nodes": [{"node_id": n.node_id, "index": n.index, "title": n.title, "level": n.level,
                           "parent": n.parent, "children": list(n.children), "text": n.text,
                           "marked_text": n.marked_text, "cited_refs": list(n.cited_refs)} for n in self]}

    @classmethod
    def from_dict(cls, d: dict) -> "TitleTree":
        nodes = {x["node_id"]: TitleNode(x["node_id"], d["page_id"], x["index"], x["title"], x["level"],
                                         x["parent"], list(x["children"]), x["text"], x["marked_text"],
                                         tuple(x["cited_refs"])) for x in d["nodes"]}
        return cls(d["page_id"], nodes, dict(d.get("references", {})))


# --------------------------------------------------------------------------- HTML


_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "head"})
_SKIP_CLASSES = frozenset({"mw-editsection", "mw-cite-backlink"})
_BLOCK_TAGS = frozenset({
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "caption", "blockquote",
    "pre", "section", "article", "figure", "figcaption", "br", "hr", "tbody", "thead", "tfoot",
})
_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                        "param", "source", "track", "wbr"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_WS = re.compile(r"\s+")


def _norm_lines(pieces: Iterable[str]) -> str:
    lines = (_WS.sub(" ", line).strip() for line in "".join(pieces).split("\n"))
    text = "\n".join(line for line in lines if line)
    return re.sub(r" +([.,;:!?)])", r"\1", text)


@dataclass
class _Section:
    title: str
    level: int
    plain: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    cites: list[str] = field(default_factory=list)


class _PageParser(HTMLParser):
    """Event parser: a flat list of sections (the lead first) plus the reference list."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str | None]] = []  # (tag, role)
        self.skip = 0
        self.reflists = 0
        self.pre_h1 = _Section("", 1)  # text before the h1 (dropped if an h1 comes)
        self.sections: list[_Section] = []
        self.seen_h1 = False
        self.page_title: list[str] = []
        self.in_title = False
        self.heading: tuple[int, list[str]] | None = None
        self.cite: tuple[list[str], list[str]] | None = None  # (hrefs, label)
        self.ref_item: tuple[str, list[str]] | None = None
        self.references: dict[str, str] = {}

    # where ordinary text goes
    @property
    def current(self) -> _Section:
        return self.sections[-1] if self.sections else self.pre_h1

    def _emit(self, text: str) -> None:
        sec = self.current  # source newlines are spaces; only block elements break lines
        sec.plain.append(text)
        sec.marked.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        classes = set(a.get("class", "").split())
        if tag == "title":
            self.in_title = True
        if tag in _VOID_TAGS:  # no end tag follows: only a line break matters
            if tag in _BLOCK_TAGS and not self.skip:
                if self.reflists and self.ref_item is not None:
                    self.ref_item[1].append("\n")
                elif self.heading is None and self.cite is None and not self.reflists:
                    self._emit("\n")
            return
        role: str | None = None
        if self.skip or tag in _SKIP_TAGS or classes & _SKIP_CLASSES:
            role = "skip"
            self.skip += 1
        elif self.heading is not None or self.cite is not None:
            if self.cite is not None and tag == "a" and a.get("href", "").startswith("#"):
                self.cite[0].append(a["href"][1:])
        elif tag in _HEADINGS and self.reflists == 0:
            role = "heading"
            self.heading = (_HEADINGS[tag], [])
        elif tag == "sup" and "reference" in classes and not self.reflists:
            role = "cite"
            self.cite = ([], [])
        elif "references" in classes:
            role = "reflist"
            self.reflists += 1
        elif self.reflists:
            if tag == "li":
                self._close_ref_item()
                role = "refitem"
                self.ref_item = (a.get("id", ""), [])
            elif tag in _BLOCK_TAGS and self.ref_item is not None:
                self.ref_item[1].append("\n")
        elif tag in _BLOCK_TAGS:
            self._emit("\n")
        self.stack.append((tag, role))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in _VOID_TAGS:
            return
        if not any(t == tag for t, _ in self.stack):
            return  # a stray end tag
        while self.stack:
            t, role = self.stack.pop()
            self._close(role)
            if t == tag:
                break
        if tag in _BLOCK_TAGS and not self.skip and self.heading is None and not self.reflists:
            self._emit("\n")

    def _close(self, role: str | None) -> None:
        if role == "skip":
            self.skip -= 1
        elif role == "heading" and self.heading is not None:
            level, parts = self.heading
            self.heading = None
            title = _WS.sub(" ", "".join(parts)).strip()
            if not title:
                return
            if level == 1:
                if not self.seen_h1:
                    self.seen_h1 = True
                    self.sections = [_Section(title, 1)]  # the lead; everything before is chrome
                    return
                level = 2
            self.sections.append(_Section(title, level))
        elif role == "cite" and self.cite is not None:
            hrefs, _label = self.cite
            self.cite = None
            if hrefs:
                sec = self.current
                sec.marked.append(f"[{hrefs[0]}]")
                if hrefs[0] not in sec.cites:
                    sec.cites.append(hrefs[0])
        elif role == "reflist":
            self._close_ref_item()
            self.reflists -= 1
        elif role == "refitem":
            self._close_ref_item()

    def _close_ref_item(self) -> None:
        if self.ref_item is not None:
            ref_id, parts = self.ref_item
            self.ref_item = None
            if ref_id:
                self.references[ref_id] = _norm_lines(parts)

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.page_title.append(data)
        if self.skip:
            return
        if self.heading is not None:
            self.heading[1].append(data)
        elif self.cite is not None:
            self.cite[1].append(data)
        elif self.reflists:
            if self.ref_item is not None:
                self.ref_item[1].append(_WS.sub(" ", data))
        else:
            self._emit(_WS.sub(" ", data))


def parse_html_page(html: str, page_id: str, *,
                    skip_sections: Iterable[str] = DEFAULT_SKIP_SECTIONS) -> TitleTree:
    """Parse one page into its title tree (see the module docstring for the convention)."""
    if not page_id or "#" in page_id:
        raise ConfigError(f"page id must be non-empty and contain no '#', got {page_id!r}")
    p = _PageParser()
    p.feed(html)
    p.close()
    while p.stack:  # unclosed tags at the end of the page
        p._close(p.stack.pop()[1])
    sections = list(p.sections)
    if not p.seen_h1:
        title = _WS.sub(" ", "".join(p.page_title)).strip() or page_id
        p.pre_h1.title = title
        sections.insert(0, p.pre_h1)
    skipped = {_WS.sub(" ", s).strip().lower() for s in skip_sections}

    nodes: dict[str, TitleNode] = {}
    stack: list[tuple[int, str | None]] = []  # (level, node id or None for a dropped section)
    for sec in sections:
        while stack and stack[-1][0] >= sec.level:
            stack.pop()
        parent = stack[-1][1] if stack else None
        drop = bool(stack) and (parent is None or sec.title.lower() in skipped)
        if drop:
            stack.append((sec.level, None))
            continue
        node_id = f"{page_id}#{len(nodes)}"
        nodes[node_id] = TitleNode(node_id, page_id, len(nodes), sec.title, sec.level, parent,
                                   text=_norm_lines(sec.plain), marked_text=_norm_lines(sec.marked),
                                   cited_refs=tuple(sec.cites))
        if parent is not None:
            nodes[parent].children.append(node_id)
        stack.append((sec.level, node_id))
    return TitleTree(page_id, nodes, p.references)


# --------------------------------------------------------------------------- BM25 over root titles


class RootTitleIndex:
    """BM25 over the root titles of a set of trees (build once, rank many trees against it)."""

    def __init__(self, trees: Sequence[TitleTree]):
        import bm25s

        from convrag.retrieval.bm25 import DEFAULTS, _tokenize

        self.trees = list(trees)
        self._params = DEFAULTS
        self._model = None
        if self.trees:
            self._model = bm25s.BM25(k1=DEFAULTS["k1"], b=DEFAULTS["b"], method="lucene")
            self._model.index(_tokenize([t.root.title for t in self.trees], DEFAULTS, return_ids=True),
                              show_progress=False)

    def rank(self, tree: TitleTree) -> list[tuple[TitleTree, float]]:
        """Trees other than ``tree`` (by page id) with a positive score, best first (ties: earlier)."""
        from convrag.retrieval.bm25 import _tokenize

        if self._model is None:
            return []
        tokens = _tokenize([tree.root.title], self._params, return_ids=False)[0]
        if not tokens:
            return []
        scores = np.asarray(self._model.get_scores(list(tokens)), dtype=float)
        order = sorted(range(len(self.trees)), key=lambda i: (-scores[i], i))
        return [(self.trees[i], float(scores[i])) for i in order
                if scores[i] > 0 and self.trees[i].page_id != tree.page_id]


def rank_related_trees(tree: TitleTree, others: Sequence[TitleTree] | RootTitleIndex) -> list[tuple[str, float]]:
    """(page id, BM25 score) of the other trees by root-title similarity to ``tree``, best first."""
    index = others if isinstance(others, RootTitleIndex) else RootTitleIndex(others)
    return [(t.page_id, s) for t, s in index.rank(tree)]


# --------------------------------------------------------------------------- samplers


def _check_turns(turns: Sequence[int], kind: str) -> tuple[int, int]:
    try:
        lo, hi = turns
    except (TypeError, ValueError):
        raise ConfigError(f"{kind}: turns must be a [min, max] pair, got {turns!r}") from None
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in (lo, hi)) or not 1 <= lo <= hi:
        raise ConfigError(f"{kind}: turns must be integers with 1 <= min <= max, got {turns!r}")
    return int(lo), int(hi)


def _longest(tree: TitleTree, moves) -> dict[str, int]:
    """Nodes on the longest path from each node when moves only go forward in document order."""
    best: dict[str, int] = {}
    for node in reversed(list(tree)):
        best[node.node_id] = 1 + max((best[m] for m in moves(node) if m is not None), default=0)
    return best


def _draw_n(rng: np.random.Generator, lo: int, hi: int, capacity: int, what: str) -> int:
    if capacity < lo:
        raise FlowTooShortError(f"{what}: holds at most {capacity} turns, fewer than the minimum {lo}")
    return int(rng.integers(lo, min(hi, capacity) + 1))


def _descent(tree: TitleTree, rng: np.random.Generator, turns, kind: str, moves) -> list[str]:
    lo, hi = _check_turns(turns, kind)
    reach = _longest(tree, moves)
    n = _draw_n(rng, lo, hi, reach[tree.root_id], f"{kind} on page {tree.page_id!r}")
    path = [tree.root_id]
    while len(path) < n:
        need = n - len(path)
        options = [m for m in moves(tree[path[-1]]) if m is not None and reach[m] >= need]
        path.append(options[int(rng.integers(len(options)))])
    return path


def _lds_moves(tree: TitleTree):
    return lambda node: node.children


def _sids_moves(tree: TitleTree):
    return lambda node: [*node.children, tree.next_sibling(node.node_id)]


def sample_lds(tree: TitleTree, rng: np.random.Generator, turns: Sequence[int] = LDS_TURNS) -> list[str]:
    """Linear descent: root, then each node a child of the previous one."""
    return _descent(tree, rng, turns, "lds", _lds_moves(tree))


def sample_sids(tree: TitleTree, rng: np.random.Generator, turns: Sequence[int] = DESCENT_TURNS) -> list[str]:
    """Sibling-inclusive descent: root, then each node a child or the next sibling of the previous one."""
    return _descent(tree, rng, turns, "sids", _sids_moves(tree))


def _walk(tree: TitleTree, rng: np.random.Generator, n: int) -> list[str]:
    """STRW's depth-first random walk of ``n`` distinct nodes from the root (``n <= len(tree)``)."""
    visited = [tree.root_id]
    seen = {tree.root_id}
    path = [tree.root_id]  # the walk's way back
    while len(visited) < n:
        options = [m for m in tree.links(path[-1]) if m not in seen]
        if not options:
            path.pop()  # step back through a node already discussed
            continue
        nxt = options[int(rng.integers(len(options)))]
        visited.append(nxt)
        seen.add(nxt)
        path.append(nxt)
    return visited


def sample_strw(tree: TitleTree, rng: np.random.Generator, turns: Sequence[int] = DESCENT_TURNS) -> list[str]:
    """Single-tree random walk over parent/child/sibling links (depth-first at dead ends)."""
    lo, hi = _check_turns(turns, "strw")
    n = _draw_n(rng, lo, hi, len(tree), f"strw on page {tree.page_id!r}")
    return _walk(tree, rng, n)


def sample_dtrw(tree: TitleTree, others: Sequence[TitleTree] | RootTitleIndex, rng: np.random.Generator,
                turns: Sequence[int] = DESCENT_TURNS) -> tuple[list[str], str]:
    """Dual-tree random walk: an STRW walk in ``tree``, then one in the BM25-top tree of ``others``.

    Returns (node ids, the second tree's page id). For many flows over one page collection pass a
    :class:`RootTitleIndex` built once; a plain sequence is indexed on every call.
    """
    lo, hi = _check_turns(turns, "dtrw")
    if hi < 2:
        raise ConfigError(f"dtrw: needs at least 2 turns (one per tree), got {turns!r}")
    index = others if isinstance(others, RootTitleIndex) else RootTitleIndex(others)
    ranked = index.rank(tree)
    if not ranked:
        raise NoRelatedTreeError(f"dtrw on page {tree.page_id!r}: no other tree's root title shares a "
                                 f"term with {tree.root.title!r}")
    second = ranked[0][0]
    n1, n2 = len(tree), len(second)
    n = _draw_n(rng, max(lo, 2), hi, n1 + n2, f"dtrw on pages {tree.page_id!r} + {second.page_id!r}")
    k_lo, k_hi = max(1, n - n2), min(n - 1, n1)
    s_lo, s_hi = max(k_lo, math.ceil(DTRW_FIRST_SHARE[0] * n)), min(k_hi, math.floor(DTRW_FIRST_SHARE[1] * n))
    if s_lo <= s_hi:
        k_lo, k_hi = s_lo, s_hi
    k = int(rng.integers(k_lo, k_hi + 1))
    return _walk(tree, rng, k) + _walk(second, rng, n - k), second.page_id


@dataclass(frozen=True)
class Flow:
    kind: str
    node_ids: tuple[str, ...]
    page_ids: tuple[str, ...]  # the page of each turn
    second_page_id: str | None = None  # DTRW only


def flow_capacity(kind: str, tree: TitleTree) -> int:
    """The most turns ``kind`` can take from ``tree`` alone (DTRW: from ``tree`` 's side)."""
    if kind == "lds":
        return tree.height
    if kind == "sids":
        return _longest(tree, _sids_moves(tree))[tree.root_id]
    if kind in ("strw", "dtrw"):
        return len(tree)
    raise ConfigError(f"unknown flow sampler {kind!r} (known: {', '.join(SAMPLERS)})")


def draw_turn_range(kind: str, rng: np.random.Generator, long_share: float = LONG_SHARE) -> tuple[int, int]:
    """The paper's mixture: LDS always 3-6; the others 11-20 with probability ``long_share``, else 6-10."""
    if kind not in TURN_RANGES:
        raise ConfigError(f"unknown flow sampler {kind!r} (known: {', '.join(SAMPLERS)})")
    ranges = TURN_RANGES[kind]
    if len(ranges) == 1:
        return ranges[0]
    return ranges[1] if rng.random() < long_share else ranges[0]


def sample_flow(kind: str, tree: TitleTree, rng: np.random.Generator, turns: Sequence[int] | None = None, *,
                others: Sequence[TitleTree] | RootTitleIndex | None = None) -> Flow:
    """One flow of the named sampler; ``turns`` defaults to :data:`DEFAULT_TURNS`; DTRW needs ``others``."""
    if kind not in SAMPLERS:
        raise ConfigError(f"unknown flow sampler {kind!r} (known: {', '.join(SAMPLERS)})")
    turns = DEFAULT_TURNS[kind] if turns is None else turns
    second = None
    if kind == "dtrw":
        if others is None:
            raise ConfigError("dtrw: needs the other trees (others=...)")
        ids, second = sample_dtrw(tree, others, rng, turns)
    else:
        ids = {"lds": sample_lds, "sids": sample_sids, "strw": sample_strw}[kind](tree, rng, turns)
    return Flow(kind, tuple(ids), tuple(i.rsplit("#", 1)[0] for i in ids), second)
