"""CORAL title trees and the four conversation-flow samplers (LDS, SIDS, STRW, DTRW)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convrag.studies.coral.pages import (
    DEFAULT_TURNS,
    DESCENT_TURNS,
    DTRW_FIRST_SHARE,
    LDS_TURNS,
    LONG_TURNS,
    Flow,
    FlowTooShortError,
    NoRelatedTreeError,
    RootTitleIndex,
    TitleTree,
    draw_turn_range,
    flow_capacity,
    parse_html_page,
    rank_related_trees,
    sample_dtrw,
    sample_flow,
    sample_lds,
    sample_sids,
    sample_strw,
)
from convrag.errors import ConfigError

SEEDS = range(300)


def _page(title: str, sections: list[tuple[int, str]]) -> str:
    """A small HTML page: an h1, a lead, then (level, title) headings each with one paragraph."""
    body = [f"<h1>{title}</h1>", f"<p>Lead of {title}.</p>"]
    for level, head in sections:
        body.append(f"<h{level}>{head}</h{level}><p>About {head}.</p>")
    return "<html><body>" + "\n".join(body) + "</body></html>"


def _big_sections() -> list[tuple[int, str]]:
    """16 h2 parts with 3 h3 each, 2 h4 under every first h3, one h5/h6 chain: 99 nodes, height 6,
    and a longest child-or-next-sibling path of 20 (root, the 16 parts, 3 h3 of the last)."""
    out = []
    for a in range(1, 17):
        out.append((2, f"Part {a}"))
        for b in range(3):
            out.append((3, f"Part {a}.{b}"))
            if b == 0:
                out += [(4, f"Part {a}.{b}x"), (4, f"Part {a}.{b}y")]
                if a == 1:
                    out += [(5, "Deeper"), (6, "Deepest")]
    return out


@pytest.fixture(scope="module")
def big() -> TitleTree:
    return parse_html_page(_page("Python programming language", _big_sections()), "python")


@pytest.fixture(scope="module")
def others() -> list[TitleTree]:
    pages = {
        "cats": ("Domestic cats", [(2, "Care"), (2, "Breeds"), (3, "Siamese")]),
        "java": ("Java programming language", [(2, "Syntax"), (2, "Runtime"), (3, "JIT")]),
        "history": ("History of the Python programming language",
                    [(2, "Origins"), (3, "ABC"), (2, "Python 2"), (2, "Python 3"), (3, "Migration")]),
        "monty": ("Monty Python", [(2, "Members"), (2, "Films")]),
    }
    return [parse_html_page(_page(t, s), pid) for pid, (t, s) in pages.items()]


# --------------------------------------------------------------------------- parser


PAGE = """<html><head><title>Head title</title><style>.x { color: red }</style></head><body>
<nav><h2>Contents</h2><p>Navigation chrome.</p></nav>
<h1 id="firstHeading">Rivers of Europe</h1>
<p>Europe has many rivers.<sup id="cite_ref-1" class="reference"><a href="#cite_note-1"><span>[</span>1<span>]</span></a></sup>
Some are long.</p>
<div class="mw-heading mw-heading2"><h2 id="Danube">Danube</h2><span class="mw-editsection">[<a href="/e">edit</a>]</span></div>
<p>The Danube flows east.<sup class="reference"><a href="#ref-2">[2]</a></sup></p><p>It crosses ten countries.<sup class="reference"><a href="#cite_note-1">[1]</a></sup><sup class="reference"><a href="#ref-2">[2]</a></sup></p>
<h4>Delta</h4><p>The delta is in Romania.<br>It is a wetland.<sup class="reference"><a href="#ref-3">[3]</a></sup></p>
<h3>Tributaries</h3><p>The Inn and the Drava.</p>
<h5>Inn</h5><p>The Inn starts in Switzerland.</p>
<h2>Rhine</h2><p>The Rhine flows north.</p><script>var x = "not text";</script>
<h2></h2><p>Still the Rhine.</p>
<h2>References</h2>
<div class="reflist"><ol class="references">
<li id="cite_note-1"><span class="mw-cite-backlink"><a href="#cite_ref-1">^</a></span> <span class="reference-text">Smith, <i>Rivers</i>, 2001.</span></li>
<li id="ref-2">Jones, Danube atlas.</li>
<li id="ref-3">Pop, Delta survey.<sup class="reference"><a href="#ref-2">[2]</a></sup></li>
</ol></div>
<h3>Web sources</h3><p>Dropped with its parent.</p>
<h2>Climate</h2><p>Rivers freeze rarely.</p>
</body></html>"""


def test_parser_levels_texts_and_citations():
    t = parse_html_page(PAGE, "rivers")
    titles = [n.title for n in t]
    assert titles == ["Rivers of Europe", "Danube", "Delta", "Tributaries", "Inn", "Rhine", "Climate"]
    ids = {n.title: n.node_id for n in t}
    assert ids["Rivers of Europe"] == "rivers#0" == t.root_id and ids["Climate"] == "rivers#6"
    by = {n.title: n for n in t}
    # skipped levels attach to the nearest shallower heading; levels are the tags' own numbers
    assert by["Delta"].parent == ids["Danube"] and by["Delta"].level == 4
    assert by["Tributaries"].parent == ids["Danube"] and by["Tributaries"].level == 3
    assert by["Inn"].parent == ids["Tributaries"] and by["Inn"].level == 5
    assert by["Danube"].children == [ids["Delta"], ids["Tributaries"]]
    assert t.root.children == [ids["Danube"], ids["Rhine"], ids["Climate"]]
    assert t.root.level == 1 and t.root.parent is None
    # section texts: between a heading and the next one; chrome, [edit], scripts, markers dropped
    assert t.root.text == "Europe has many rivers. Some are long."
    assert by["Danube"].text == "The Danube flows east.\nIt crosses ten countries."
    assert by["Delta"].text == "The delta is in Romania.\nIt is a wetland."
    assert by["Rhine"].text == "The Rhine flows north.\nStill the Rhine."  # an empty heading is no heading
    assert "edit" not in by["Danube"].title and "not text" not in by["Rhine"].text
    assert all("Navigation" not in n.text and "Dropped" not in n.text and "Smith" not in n.text for n in t)
    # citations, in order of first appearance, and the marked text
    assert t.root.cited_refs == ("cite_note-1",)
    assert by["Danube"].cited_refs == ("ref-2", "cite_note-1")
    assert by["Danube"].marked_text == ("The Danube flows east.[ref-2]\n"
                                        "It crosses ten countries.[cite_note-1][ref-2]")
    assert by["Delta"].cited_refs == ("ref-3",) and by["Climate"].cited_refs == ()
    assert t.references == {"cite_note-1": "Smith, Rivers, 2001.", "ref-2": "Jones, Danube atlas.",
                            "ref-3": "Pop, Delta survey.[2]"}
    assert t.keyword_chain(ids["Inn"]) == ["Rivers of Europe", "Danube", "Tributaries", "Inn"]
    assert t.height == 4 and len(t) == 7
    assert TitleTree.from_dict(t.to_dict()) == t


def test_parser_keeps_skip_sections_on_request_and_falls_back_to_title():
    t = parse_html_page(PAGE, "rivers", skip_sections=())
    assert [n.title for n in t][-3:] == ["References", "Web sources", "Climate"]
    web = next(n for n in t if n.title == "Web sources")
    assert web.text == "Dropped with its parent." and t[web.parent].title == "References"
    assert t[web.parent].text == "" and t[web.parent].cited_refs == ()  # the list's text is no section's
    assert t.references["ref-3"] == "Pop, Delta survey.[2]"
    no_h1 = parse_html_page("<html><head><title>Only title</title></head><body><p>Lead text.</p>"
                            "<h3>A</h3><p>a</p><h2>B</h2><p>b</p></body></html>", "p1")
    assert [(n.title, n.level, n.parent) for n in no_h1] == [("Only title", 1, None), ("A", 3, "p1#0"),
                                                             ("B", 2, "p1#0")]
    assert no_h1.root.text == "Lead text."
    bare = parse_html_page("<p>Just text</p>", "bare")
    assert bare.root.title == "bare" and bare.root.text == "Just text" and len(bare) == 1
    with pytest.raises(ConfigError):
        parse_html_page(PAGE, "a#b")


# --------------------------------------------------------------------------- helpers for the rules


def _check_walk(tree: TitleTree, ids: list[str]) -> int:
    """STRW's rule: from the root, each new node is an unvisited link (parent/child/sibling) of the
    walk's current node, and the walk steps back along its path only at a dead end. Returns the
    number of back-steps."""
    assert ids[0] == tree.root_id and len(set(ids)) == len(ids) and all(i in tree for i in ids)
    seen, path, back = {ids[0]}, [ids[0]], 0
    for nxt in ids[1:]:
        while not [m for m in tree.links(path[-1]) if m not in seen]:
            path.pop()
            back += 1
            assert path, "the walk ran out of nodes"
        assert nxt in tree.links(path[-1]), (path[-1], nxt)
        seen.add(nxt)
        path.append(nxt)
    return back


# --------------------------------------------------------------------------- LDS / SIDS


def test_lds_only_descends(big):
    lengths, flows = set(), set()
    for s in SEEDS:
        ids = sample_lds(big, np.random.default_rng(s))
        assert ids[0] == big.root_id
        assert all(b in big[a].children for a, b in zip(ids, ids[1:]))  # never up, never sideways
        assert LDS_TURNS[0] <= len(ids) <= LDS_TURNS[1]
        lengths.add(len(ids))
        flows.add(tuple(ids))
    assert lengths == {3, 4, 5, 6} and len(flows) > 20


def test_sids_only_down_or_next_sibling(big):
    moves = {"child": 0, "sibling": 0}
    for turns in (DESCENT_TURNS, LONG_TURNS):
        lengths = set()
        for s in SEEDS:
            ids = sample_sids(big, np.random.default_rng(s), turns)
            assert ids[0] == big.root_id and len(set(ids)) == len(ids)
            for a, b in zip(ids, ids[1:]):
                if b in big[a].children:
                    moves["child"] += 1
                else:
                    assert b == big.next_sibling(a), (a, b)
                    moves["sibling"] += 1
            assert [big[i].index for i in ids] == sorted(big[i].index for i in ids)  # reading order
            assert turns[0] <= len(ids) <= turns[1]
            lengths.add(len(ids))
        assert lengths == set(range(turns[0], turns[1] + 1))
    assert moves["child"] > 100 and moves["sibling"] > 100


# --------------------------------------------------------------------------- STRW


def test_strw_follows_links_within_one_tree(big):
    prev_sibling = backsteps = 0
    for turns in (DESCENT_TURNS, LONG_TURNS):
        lengths = set()
        for s in SEEDS:
            ids = sample_strw(big, np.random.default_rng(s), turns)
            assert {big[i].page_id for i in ids} == {"python"}
            backsteps += _check_walk(big, ids)
            prev_sibling += sum(big[b].parent == big[a].parent and big[b].index < big[a].index
                                for a, b in zip(ids, ids[1:]) if a != big.root_id)
            assert turns[0] <= len(ids) <= turns[1]
            lengths.add(len(ids))
        assert lengths == set(range(turns[0], turns[1] + 1))
    assert prev_sibling > 50 and backsteps > 50  # it is a walk, not a descent


def test_strw_covers_a_whole_tree():
    t = parse_html_page(_page("Tiny", [(2, "A"), (3, "A1"), (3, "A2"), (2, "B"), (3, "B1")]), "tiny")
    assert len(t) == 6
    for s in range(50):  # a self-avoiding walk from the root cannot see them all; backtracking can
        ids = sample_strw(t, np.random.default_rng(s), (6, 6))
        assert sorted(ids) == sorted(n.node_id for n in t)
        _check_walk(t, ids)


# --------------------------------------------------------------------------- DTRW


def test_dtrw_enters_exactly_the_bm25_top_tree(big, others):
    ranked = rank_related_trees(big, [big, *others])
    assert ranked[0][0] == "history" and ranked[0][1] > ranked[1][1]
    assert {p for p, _ in ranked} == {"history", "java", "monty"}  # itself and cats excluded
    hist = next(t for t in others if t.page_id == "history")
    index = RootTitleIndex([big, *others])
    for turns in (DESCENT_TURNS, LONG_TURNS):
        lengths = set()
        for s in SEEDS:
            ids, second = sample_dtrw(big, [big, *others], np.random.default_rng(s), turns)
            assert second == "history"
            assert (ids, second) == sample_dtrw(big, index, np.random.default_rng(s), turns)
            pages = [i.rsplit("#", 1)[0] for i in ids]
            k = pages.index("history")
            assert set(pages[:k]) == {"python"} and set(pages[k:]) == {"history"}  # one switch, no return
            _check_walk(big, ids[:k])
            _check_walk(hist, ids[k:])  # entered at its root
            n = len(ids)
            assert turns[0] <= n <= turns[1]
            lo, hi = max(1, n - len(hist)), min(n - 1, len(big))
            slo, shi = max(lo, math.ceil(DTRW_FIRST_SHARE[0] * n)), min(hi, math.floor(DTRW_FIRST_SHARE[1] * n))
            assert (slo <= k <= shi) if slo <= shi else (lo <= k <= hi)
            lengths.add(n)
        assert lengths == set(range(turns[0], turns[1] + 1))


def test_dtrw_without_related_tree_or_room(big, others):
    cats = next(t for t in others if t.page_id == "cats")
    with pytest.raises(NoRelatedTreeError):
        sample_dtrw(big, [cats, big], np.random.default_rng(0))
    with pytest.raises(NoRelatedTreeError):
        sample_dtrw(big, [], np.random.default_rng(0))
    java = next(t for t in others if t.page_id == "java")
    hist = next(t for t in others if t.page_id == "history")
    assert rank_related_trees(java, [hist])[0][0] == "history"
    with pytest.raises(FlowTooShortError):  # 4 + 6 nodes cannot hold 11 turns
        sample_dtrw(java, [hist], np.random.default_rng(0), LONG_TURNS)


# --------------------------------------------------------------------------- shared rules


@pytest.mark.parametrize("kind", ["lds", "sids", "strw", "dtrw"])
def test_same_seed_same_flow_other_seeds_differ(kind, big, others):
    def flow(seed):
        return sample_flow(kind, big, np.random.default_rng(seed), others=others if kind == "dtrw" else None)

    assert flow(7) == flow(7)
    assert len({flow(s).node_ids for s in range(20)}) > 5
    f = flow(3)
    assert isinstance(f, Flow) and f.kind == kind
    lo, hi = DEFAULT_TURNS[kind]
    assert lo <= len(f.node_ids) <= hi and len(f.page_ids) == len(f.node_ids)
    assert f.second_page_id == ("history" if kind == "dtrw" else None)
    assert f.page_ids[0] == "python" and f.page_ids[-1] == (f.second_page_id or "python")


def test_too_small_trees_raise_and_capacity(big):
    flat = parse_html_page(_page("Flat", [(2, "A"), (2, "B"), (2, "C")]), "flat")
    assert flow_capacity("lds", flat) == 2 and flow_capacity("sids", flat) == 4
    assert flow_capacity("strw", flat) == 4 == flow_capacity("dtrw", flat)
    assert flow_capacity("lds", big) == big.height == 6 and flow_capacity("strw", big) == len(big) == 99
    assert flow_capacity("sids", big) == 20
    with pytest.raises(FlowTooShortError, match="at most 2 turns"):
        sample_lds(flat, np.random.default_rng(0))
    with pytest.raises(FlowTooShortError):
        sample_sids(flat, np.random.default_rng(0))
    with pytest.raises(FlowTooShortError):
        sample_strw(flat, np.random.default_rng(0))
    # a range wider than the tree is capped at the tree's capacity
    assert {len(sample_strw(flat, np.random.default_rng(s), (2, 10))) for s in range(60)} == {2, 3, 4}
    assert [len(sample_sids(flat, np.random.default_rng(s), (4, 9))) for s in range(5)] == [4] * 5


def test_bad_arguments(big):
    rng = np.random.default_rng(0)
    for turns in ((0, 3), (5, 4), (3,), (2.0, 3), "ab", (True, 3)):
        with pytest.raises(ConfigError):
            sample_lds(big, rng, turns)
    with pytest.raises(ConfigError):
        sample_flow("walk", big, rng)
    with pytest.raises(ConfigError):
        sample_flow("dtrw", big, rng)
    with pytest.raises(ConfigError):
        sample_dtrw(big, [big], rng, (1, 1))
    with pytest.raises(ConfigError):
        flow_capacity("walk", big)


def test_turn_range_mixture():
    rng = np.random.default_rng(0)
    assert {draw_turn_range("lds", rng) for _ in range(50)} == {LDS_TURNS}
    draws = [draw_turn_range("strw", rng) for _ in range(4000)]
    assert set(draws) == {DESCENT_TURNS, LONG_TURNS}
    assert abs(draws.count(LONG_TURNS) / len(draws) - 0.2) < 0.03
