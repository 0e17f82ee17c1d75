"""The embedded CORAL world: the mini world rendered as Wikipedia-like pages whose title trees
feed CORAL's samplers and whose citations map to the world's corpus."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from convrag.studies.coral.pages import RootTitleIndex, flow_capacity, parse_html_page, sample_flow
from convrag.studies.coral.world import PAGE_KINDS, page_statistics, render_pages, write_coral_world
from convrag.data.miniworld import build_world
from convrag.errors import ConfigError
from convrag.io import read_json
from convrag.records import Passage, read_records

SMALL = {"n_people": 12, "n_places": 6, "n_organisations": 6, "n_works": 9, "n_distractors": 5,
         "questions": {"2": 1, "3": 1, "4": 0}}
SEED = 3
MARK = re.compile(r"((?:\[cite_note-\d+\])+)")
YEAR = re.compile(r"\b(1[6-9]\d\d|20\d\d)\b")


@pytest.fixture(scope="module")
def small():
    world = build_world(SMALL, SEED)
    pages = render_pages(world)
    trees = {p.page_id: parse_html_page(p.html, p.page_id) for p in pages}
    return world, pages, trees


def _entity(world, page):
    return next(e for e in world.entities if e.doc_id == page.doc_id)


def _node(tree, title):
    return next(n for n in tree if n.title == title)


def _has(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def test_one_page_per_core_entity_and_every_tree_is_deep_enough(small):
    world, pages, trees = small
    core = Counter(e.kind for e in world.entities if e.core and e.kind in PAGE_KINDS)
    assert Counter(p.kind for p in pages) == core and set(core) == set(PAGE_KINDS)
    assert len({p.page_id for p in pages}) == len(pages)
    for p in pages:
        t = trees[p.page_id]
        assert t.root.title == p.title
        assert t.height >= 3 and len(t) >= 6, p.page_id
        assert all(n.title and "edit" not in n.title and n.text for n in t)  # no "[edit]", no empty section
        assert "References" not in {n.title for n in t}
        assert len({n.text for n in t}) == len(t), p.page_id  # no two turns share a golden response
    # related pages share a root-title word (what DTRW's BM25 pairs on)
    by_title = {p.title: p for p in pages}
    for p in pages:
        e = _entity(world, p)
        if p.kind == "city":
            assert p.title == f"{e.name}, {e.rel['country'].name}"
        elif p.kind in ("novel", "film", "album"):
            assert p.title == f"{e.name} ({e.rel['creator'].attrs['surname']} {p.kind})"
        elif p.kind == "person":
            assert p.title == f"{e.name} ({e.attrs['prof']})"
        else:
            assert p.title == f"{e.name} ({e.rel['home'].name})"
    assert len(by_title) == len(pages)


def test_every_citation_is_a_corpus_passage_that_states_the_sentence(small):
    world, pages, trees = small
    corpus = {x.doc_id: x for x in world.passages}
    names = sorted({e.name for e in world.entities if e.core}, key=len, reverse=True)
    n_sentences = 0
    for p in pages:
        t = trees[p.page_id]
        assert set(t.references) == set(p.refs)
        assert len(set(p.refs.values())) == len(p.refs)  # each passage listed once
        for ref, doc_id in p.refs.items():
            assert doc_id in corpus and t.references[ref] == corpus[doc_id].text
        for node in t:
            assert set(node.cited_refs) <= set(p.refs)
            parts = MARK.split(node.marked_text)
            assert parts[-1].strip() == "", (p.page_id, node.title)  # every sentence ends with its citations
            for sentence, marks in zip(parts[0::2], parts[1::2]):
                n_sentences += 1
                cited = [corpus[p.refs[r]].text for r in re.findall(r"\[(cite_note-\d+)\]", marks)]
                assert cited, sentence
                for name in (n for n in names if _has(sentence, n)):
                    assert any(_has(c, name) for c in cited), (p.page_id, node.title, sentence, name)
                for year in YEAR.findall(sentence):
                    assert any(year in c for c in cited), (p.page_id, sentence, year)
    assert n_sentences > 10 * len(pages)


def test_hand_picked_facts_cite_the_passage_that_states_them(small):
    world, pages, trees = small
    corpus = {x.doc_id: x.text for x in world.passages}

    def cited(page, node):
        return [page.refs[r] for r in node.cited_refs]

    person = next(p for p in pages if p.kind == "person")
    e, t = _entity(world, person), trees[person.page_id]
    city, country = e.rel["born_in"], e.rel["born_in"].rel["country"]
    assert cited(person, _node(t, "Early life")) == [e.doc_id] and city.name in corpus[e.doc_id]
    birthplace = _node(t, "Birthplace")
    assert cited(person, birthplace) == [city.doc_id] and country.name in corpus[city.doc_id]
    assert cited(person, t[birthplace.children[0]]) == [country.doc_id]
    assert cited(person, _node(t, "Education")) == [e.doc_id] and e.rel["studied"].name in corpus[e.doc_id]

    novel = next(p for p in pages if p.kind == "novel")
    w, t = _entity(world, novel), trees[novel.page_id]
    pub = _node(t, "Publication")
    assert cited(novel, pub) == [w.doc_id] and w.rel["publisher"].name in corpus[w.doc_id]
    publisher = t[pub.children[0]]
    assert publisher.title == w.rel["publisher"].name and cited(novel, publisher) == [w.rel["publisher"].doc_id]

    org = next(p for p in pages if p.kind == "company")
    o, t = _entity(world, org), trees[org.page_id]
    assert cited(org, _node(t, "History")) == [o.doc_id] and o.rel["founder"].name in corpus[o.doc_id]
    assert cited(org, _node(t, "Founder"))[0] == o.rel["founder"].doc_id

    city_page = next(p for p in pages if p.kind == "city" and any(n.title == "Notable people"
                                                                  for n in trees[p.page_id]))
    c, t = _entity(world, city_page), trees[city_page.page_id]
    born_here = cited(city_page, _node(t, "Notable people"))
    assert born_here and all(f"born in {c.name}" in corpus[d] for d in born_here)


def test_references_list_each_cited_passage_once_and_nothing_else(small):
    world, pages, trees = small
    for p in pages:
        li = re.findall(r'<li id="(cite_note-\d+)"', p.html)
        assert len(li) == len(set(li)) == len(p.refs)
        used = {r for n in trees[p.page_id] for r in n.cited_refs}
        assert used == set(li)
        assert li == [f"cite_note-{k}" for k in range(1, len(li) + 1)]  # numbered by first citation
        first = re.findall(r'href="#(cite_note-\d+)"', p.html)
        assert list(dict.fromkeys(first)) == li


def test_every_page_starts_lds_sids_strw_and_dtrw(small):
    world, pages, trees = small
    rng = np.random.default_rng(0)
    allowed = Counter()
    for t in trees.values():
        for kind, turns in (("lds", (3, 6)), ("sids", (6, 10)), ("strw", (6, 10))):
            if flow_capacity(kind, t) < turns[0]:
                continue
            allowed[kind] += 1
            flow = sample_flow(kind, t, rng, turns)
            assert turns[0] <= len(flow.node_ids) <= turns[1] and len(set(flow.node_ids)) == len(flow.node_ids)
            assert flow.node_ids[0] == t.root_id
    assert allowed == {"lds": len(pages), "sids": len(pages), "strw": len(pages)}

    index = RootTitleIndex(list(trees.values()))
    # a person who created a work is related to its page (the surname is in both titles)
    creator = next(p for p in pages if p.kind == "person" and any(
        x.core and x.rel.get("creator") is _entity(world, p) for x in world.entities))
    surname = _entity(world, creator).attrs["surname"]
    ranked = index.rank(trees[creator.page_id])
    assert any(surname in t.root.title for t, _ in ranked)
    top = ranked[0][0]
    flow = sample_flow("dtrw", trees[creator.page_id], rng, (6, 10), others=index)
    assert flow.second_page_id == top.page_id and set(flow.page_ids) == {creator.page_id, top.page_id}
    assert 6 <= len(flow.node_ids) <= 10 and flow.page_ids[0] == creator.page_id
    stats = page_statistics(pages)
    assert stats["can_start"] == {k: len(pages) for k in ("lds", "sids", "strw", "dtrw")}


def test_default_world_every_page_has_a_dtrw_partner():
    world = build_world(None, 13)
    pages = render_pages(world)
    trees = [parse_html_page(p.html, p.page_id) for p in pages]
    index = RootTitleIndex(trees)
    assert len(pages) == 145
    assert all(index.rank(t) for t in trees)
    # every creator's best partner is one of its own works
    for p, t in zip(pages, trees):
        e = _entity(world, p)
        if p.kind == "person" and any(x.core and x.rel.get("creator") is e for x in world.entities):
            top = index.rank(t)[0][0]
            assert top.root.title.endswith(("novel)", "film)", "album)")) and e.attrs["surname"] in top.root.title
    stats = page_statistics(pages)
    assert stats["can_start"]["dtrw"] == stats["pages"] == 145
    assert stats["max_depth"] >= 5 and set(stats["depths"]) <= {"4", "5"}


def test_same_seed_same_bytes_other_seed_other_pages(tmp_path):
    a = [p.html for p in render_pages(build_world(SMALL, SEED))]
    b = [p.html for p in render_pages(build_world(SMALL, SEED))]
    c = [p.html for p in render_pages(build_world(SMALL, SEED + 1))]
    assert a == b and a != c
    ra = write_coral_world(SMALL, SEED, tmp_path / "a")
    rb = write_coral_world(SMALL, SEED, tmp_path / "b")
    write_coral_world(SMALL, SEED + 1, tmp_path / "c")
    assert ra == rb
    files = sorted(f.relative_to(tmp_path / "a") for f in (tmp_path / "a").rglob("*") if f.is_file())
    assert {str(f) for f in files} >= {"corpus.jsonl", "pages.json"} and not any(f.name.startswith(".") for f in files)
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() != (tmp_path / "c" / "corpus.jsonl").read_bytes()
    assert (tmp_path / "a" / "pages.json").read_bytes() != (tmp_path / "c" / "pages.json").read_bytes()


def test_write_coral_world_files_and_report(tmp_path):
    world = build_world(SMALL, SEED)
    report = write_coral_world(SMALL, SEED, tmp_path)
    corpus = read_records(tmp_path / "corpus.jsonl", Passage)
    assert [x.doc_id for x in corpus] == [x.doc_id for x in world.passages]  # all passages, cited or not
    index = read_json(tmp_path / "pages.json")
    assert index["seed"] == SEED and len(index["pages"]) == report["pages"] == 32
    ids = {x.doc_id for x in corpus}
    cited = set()
    for entry in index["pages"]:
        html = (tmp_path / entry["file"]).read_text(encoding="utf-8")
        tree = parse_html_page(html, entry["page_id"])
        assert tree.root.title == entry["title"] and set(tree.references) == set(entry["refs"])
        assert set(entry["refs"].values()) <= ids
        cited |= set(entry["refs"].values())
    assert report["passages"] == len(corpus) > report["cited_passages"] == len(cited)
    assert {x.doc_id for x in corpus if x.title in {e.name for e in world.entities if not e.core}}.isdisjoint(cited)
    assert report["nodes"] == sum(len(parse_html_page((tmp_path / e["file"]).read_text(), e["page_id"]))
                                  for e in index["pages"])
    assert report["max_depth"] >= 3 and report["references"] == sum(len(e["refs"]) for e in index["pages"])
    # a rewrite with fewer pages leaves no stale page behind
    write_coral_world(SMALL, SEED, tmp_path, kinds=("city",))
    left = sorted(f.stem for f in (tmp_path / "pages").iterdir())
    assert left == sorted(e["page_id"] for e in read_json(tmp_path / "pages.json")["pages"]) and len(left) == 5


def test_render_options_are_checked():
    world = build_world(SMALL, SEED)
    with pytest.raises(ConfigError, match="unknown page kind"):
        render_pages(world, kinds=("country",))
    with pytest.raises(ConfigError, match="max_items"):
        render_pages(world, max_items=0)
    assert render_pages(world, min_nodes=1000) == []
    assert {p.kind for p in render_pages(world, kinds=("novel", "city"))} == {"novel", "city"}
