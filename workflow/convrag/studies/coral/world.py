"""The embedded CORAL world: the project's generated mini world (``convrag.data.miniworld``)
rendered as small Wikipedia-like HTML pages, so that CORAL's conversation construction
(``convrag.studies.coral.pages``), retrieval and generation all run offline on data the project
makes itself.

Why pages: CORAL builds conversations from Wikipedia pages (title tree = headings, golden
response = a section's text, golden passages = the section's cited references). Here every
page is about one core entity of the world and every section is built from the world's
facts, so a section's golden passages are exactly the world passages that state its facts.

**Pages.** One page per core entity of :data:`PAGE_KINDS` (people, companies, universities,
orchestras, novels, films, albums, cities): an ``<h1>`` title, a lead paragraph, and a section
tree that follows the entity's relations (and the inverse ones: a person's works, a city's
people) into the related entities' facts, down to ``<h4>`` or ``<h5>``, e.g. a person:
"Early life" > birth city > its country; "Education" > the university > its founding and
location; "Career" > each work > its publication > the publisher; "Personal life". Lists of
related entities (a person's works, a city's people...) are capped at ``max_items``, the
earliest first. Distractor entities (``core=False``) never appear, so their passages stay
uncited distractors of the corpus.

**Citations.** Every sentence states facts of the world and cites, with Wikipedia's markup
``<sup class="reference"><a href="#cite_note-K">[K]</a></sup>``, the world passage(s) that
state them (the entity's own passage or a related entity's). References are numbered by first
citation; ``<ol class="references">`` lists each cited passage once as ``<li
id="cite_note-K">`` holding the passage text verbatim, and :class:`Page` keeps ``refs``
(reference id -> the passage's corpus doc id), so golden passages map to corpus ids.

**Root titles and DTRW.** DTRW pairs a page with the page whose root title ranks first by
BM25 against its own, so related pages share a title word, as Wikipedia disambiguates:
a person "Name (profession)" (joins the others of that profession), a work "Title (Surname
novel|film|album)" (joins its creator's page; in the default world every creator's top
partner is one of its works), a city "City, Country" (joins the other cities of that
country), an organisation "Name (City)" (joins its home city's page and the other
organisations there). A page therefore has a partner with a positive score whenever its
creator, profession, home city or country appears in another page's title: in the default
world (and every small world tried) every page has one (asserted in the tests). A page
without one cannot start a DTRW flow (``NoRelatedTreeError``); :func:`page_statistics`
counts the pages that can.

Facts beyond the entity attributes (a city's population, a country's economy...) are read
from the entity's own passage with the generator's wording; a phrase that is not found is
left out, never guessed.

Deterministic: nothing is drawn at random; the same world (spec + seed) gives byte-identical
HTML, a different seed a different world and so different pages.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from convrag.data.miniworld import BASED, FLAVOUR, ORGS, PROFESSIONS, SECTORS, WORK, WORKS, Entity, World
from convrag.errors import ConfigError
from convrag.io import temp_dir

PAGE_KINDS = ("person", *ORGS, *WORKS, "city")
MIN_DEPTH = 3  # LDS needs 3 nodes root-to-leaf
MIN_NODES = 6  # SIDS / STRW need 6 turns
_SECTIONS_OF_WORK = {"novel": ("Plot", "Authorship", "Publication", "author"),
                     "film": ("Plot", "Direction", "Production", "director"),
                     "album": ("Recording", "Artist", "Release", "artist")}


@dataclass
class Page:
    """One rendered page: ``refs`` maps each reference id of its reference list to the world
    passage's doc id (the corpus id of that golden passage)."""

    page_id: str
    title: str
    html: str
    refs: dict[str, str]
    kind: str = ""
    doc_id: str = ""  # the page subject's own passage


# --------------------------------------------------------------------------- section trees


@dataclass
class _Sent:
    text: str
    sources: tuple[Entity, ...]


@dataclass
class _Sec:
    title: str
    sents: list[_Sent]
    children: list["_Sec"] = field(default_factory=list)

    def height(self) -> int:
        return 1 + max((c.height() for c in self.children), default=0)

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


def _s(text: str, *sources: Entity) -> _Sent:
    return _Sent(text, sources)


def _listing(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _match(e: Entity, pattern: str) -> str | None:
    """A phrase of the entity's own passage (so a sentence using it states what the passage states)."""
    m = re.search(pattern, e.text)
    return m.group(1) if m else None


def _flavour(e: Entity, pool: str) -> str | None:
    return next((f for f in FLAVOUR[pool] if f in e.text), None)


class _Index:
    """The world's inverse relations over core entities, each list earliest first."""

    def __init__(self, world: World):
        self.core = [e for e in world.entities if e.core]
        by: dict[tuple[str, int], list[Entity]] = {}
        for e in self.core:
            for rel, t in e.rel.items():
                if isinstance(t, Entity) and t.core:
                    by.setdefault((rel, id(t)), []).append(e)
        self.by = {k: sorted(v, key=lambda x: (x.year or 0, x.name)) for k, v in by.items()}

    def of(self, rel: str, target: Entity, kinds: Iterable[str] | None = None) -> list[Entity]:
        out = self.by.get((rel, id(target)), [])
        return [e for e in out if kinds is None or e.kind in kinds]


# ---- facts, one sentence each, with the passage that states them ------------------------


def _person_intro(p: Entity) -> _Sent:
    return _s(f"{p.name} is a {p.attrs['prof']} born in {p.year}.", p)


def _born(p: Entity) -> _Sent:
    return _s(f"{p.name} was born in {p.rel['born_in'].name} in {p.year}.", p)


def _studied(p: Entity) -> _Sent:
    return _s(f"{p.attrs['surname']} studied at {p.rel['studied'].name}.", p)


def _career(p: Entity) -> _Sent:
    return _s(f"After university, {p.attrs['surname']} began a career in {PROFESSIONS[p.attrs['prof']]} "
              f"as a {p.attrs['prof']}.", p)


def _city_in(c: Entity) -> _Sent:
    return _s(f"{c.name} is a city in {c.rel['country'].name}.", c)


def _city_geo(c: Entity) -> list[_Sent]:
    geo = _match(c, r"is a city in [^,]+, ([^.]+)\.")
    return [_s(f"{c.name} is {re.sub(r'^lying ', 'set ', geo)}.", c)] if geo else []


def _city_pop(c: Entity) -> list[_Sent]:
    pop = _match(c, r"population of about ([\d,]+) people")
    return [_s(f"About {pop} people live in {c.name}.", c)] if pop else []


def _city_extra(c: Entity) -> list[_Sent]:
    return _city_geo(c) + _city_pop(c)


def _country(k: Entity) -> _Sent:
    return _s(f"{k.name}, officially the {k.attrs['long']}, is a small country on the continent of Oresta.", k)


def _independence(k: Entity) -> _Sent:
    return _s(f"{k.name} has been an independent state since {k.year}.", k)


def _economy(k: Entity) -> list[_Sent]:
    econ = _match(k, r"economy relies mainly on ([^,]+),")
    return [_s(f"The economy of {k.name} rests mainly on {econ}.", k)] if econ else []


def _org_desc(o: Entity) -> str:
    if o.kind == "company":
        return SECTORS[o.attrs["sector"]][0]
    return {"university": "public university", "orchestra": "orchestra"}[o.kind]


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _org_intro(o: Entity) -> _Sent:
    d = _org_desc(o)
    return _s(f"{o.name} is {_article(d)} {d} {BASED[o.kind]} in {o.rel['home'].name}.", o)


def _founded(o: Entity) -> _Sent:
    return _s(f"{o.name} was founded in {o.year} by {o.rel['founder'].name}.", o)


def _org_home(o: Entity) -> _Sent:
    return _s(f"{o.name} is {BASED[o.kind]} in {o.rel['home'].name}.", o)


def _org_extra(o: Entity) -> list[_Sent]:
    if o.kind == "company":
        known = _match(o, r"best known for ([^.]+)\.")
        return [_s(f"{o.name} is best known for {known}.", o)] if known else []
    if o.kind == "university":
        n = _match(o, r"has about ([\d,]+) students")
        return [_s(f"About {n} students attend {o.name} today.", o)] if n else []
    n = _match(o, r"gives about (\d+) concerts")
    return [_s(f"{o.name} gives about {n} concerts in a season.", o)] if n else []


def _work_intro(w: Entity) -> _Sent:
    what = {"novel": "novel written", "film": "film directed", "album": "album recorded"}[w.kind]
    return _s(f"{w.name} is {_article(what)} {what} by {w.rel['creator'].name}, {WORK[w.kind]['out']} in {w.year}.", w)


def _work_pub(w: Entity) -> _Sent:
    return _s(f"{w.name} was {WORK[w.kind]['pub']} by {w.rel['publisher'].name}.", w)


def _work_body(w: Entity) -> list[_Sent]:
    if w.kind == "album":
        return [_s(f"The songs of {w.name} were recorded within a single week in a small rented studio.", w)] \
            if "single week" in w.text else []
    return [_s(f"The story of {w.name} follows {w.attrs['plot']}.", w)] if w.attrs.get("plot") in w.text else []


def _flavour_sent(e: Entity, pool: str, subject: str = "") -> list[_Sent]:
    f = _flavour(e, pool)
    if f is None:
        return []
    return [_s(f"{subject} {f}" if subject else f, e)]


# ---- pages, one builder per kind -----------------------------------------------------------


def _country_sec(k: Entity, ix: _Index, city: Entity, level_title: str | None = None) -> _Sec:
    others = [c for c in ix.of("country", k, ("city",)) if c is not city]
    kids = [_Sec("Independence", [_independence(k)]), *([_Sec("Economy", _economy(k))] if _economy(k) else [])]
    if others:
        shown = others[:3]
        kids.append(_Sec("Other cities", [_s(f"Other cities of {k.name} include {_listing([c.name for c in shown])}.",
                                             *shown)]))
    return _Sec(level_title or k.name, [_country(k)], kids)


def _person_page(p: Entity, ix: _Index, max_items: int) -> tuple[str, list[_Sent], list[_Sec]]:
    city, uni = p.rel["born_in"], p.rel["studied"]
    country = city.rel["country"]
    early = _Sec("Early life", [_born(p)], [
        _Sec("Birthplace", [_city_in(city), *_city_extra(city)], [
            _Sec(country.name, [_country(country), _independence(country)])])])
    founder = uni.rel["founder"]
    edu = _Sec("Education", [_studied(p)], [
        _Sec(uni.name, [_org_intro(uni), *_org_extra(uni)], [
            _Sec("Founding", [_founded(uni), _person_intro(founder)] if founder is not p else [_founded(uni)]),
            _Sec("Location", [_org_home(uni), _city_in(uni.rel["home"])])])])
    works = ix.of("creator", p, WORKS)[:max_items]
    orgs = ix.of("founder", p, ORGS)[:max_items]
    career_sents = [_career(p)]
    if works:
        career_sents.append(_s(f"The works of {p.attrs['surname']} include {_listing([w.name for w in works])}.", *works))
    career = _Sec("Career", career_sents)
    seen: set[int] = set()  # a publisher of several of the works is described once
    for w in works:
        pub = w.rel["publisher"]
        about_pub = [] if id(pub) in seen else [_Sec(pub.name, [_org_intro(pub), _founded(pub)])]
        seen.add(id(pub))
        career.children.append(_Sec(w.name, [_work_intro(w), *_work_body(w)], [
            _Sec(_SECTIONS_OF_WORK[w.kind][2], [_work_pub(w)], about_pub)]))
    for o in orgs:
        where = [] if o is uni else [_Sec("Location", [_org_home(o), _city_in(o.rel["home"])])]
        career.children.append(_Sec(f"Founding of {o.name}", [_founded(o), _org_intro(o)], where))
    personal = _flavour_sent(p, "person", p.attrs["surname"])
    secs = [early, edu, career, *([_Sec("Personal life", personal)] if personal else [])]
    return f"{p.name} ({p.attrs['prof']})", [_person_intro(p)], secs


def _org_page(o: Entity, ix: _Index, max_items: int) -> tuple[str, list[_Sent], list[_Sec]]:
    home, founder = o.rel["home"], o.rel["founder"]
    country = home.rel["country"]
    head = {"company": "Headquarters", "university": "Campus", "orchestra": "Home"}[o.kind]
    place = _Sec(head, [_org_home(o)], [
        _Sec(home.name, [_city_in(home), *_city_extra(home)], [
            _Sec(country.name, [_country(country), *_economy(country)])])])
    f_uni = founder.rel["studied"]
    fkids = [_Sec("Early life", [_born(founder), _city_in(founder.rel["born_in"])])]
    if f_uni is not o:
        fkids.append(_Sec("Education", [_studied(founder), _org_intro(f_uni)]))
    history = _Sec("History", [_founded(o)], [
        _Sec("Founder", [_person_intro(founder), _career(founder)], fkids)])
    secs = [history, place]
    if o.kind == "company":
        works = ix.of("publisher", o, WORKS)[:max_items]
        if works:
            cat = _Sec("Catalogue", [_s(f"Titles brought out by {o.name} include {_listing([w.name for w in works])}.",
                                        *works)])
            seen: set[int] = set()  # a creator of several of the works is described once
            for w in works:
                c = w.rel["creator"]
                about = [] if id(c) in seen else [
                    _Sec(_SECTIONS_OF_WORK[w.kind][3].capitalize(), [_person_intro(c), _born(c)])]
                seen.add(id(c))
                cat.children.append(_Sec(w.name, [_work_intro(w), _work_pub(w)], about))
            secs.append(cat)
    elif o.kind == "university":
        alumni = [a for a in ix.of("studied", o, ("person",)) if a is not founder][:max_items]
        if alumni:
            al = _Sec("Notable alumni", [_s(f"Alumni of {o.name} include {_listing([a.name for a in alumni])}.",
                                            *alumni)])
            for a in alumni:
                al.children.append(_Sec(a.name, [_person_intro(a), _career(a)], [
                    _Sec("Early life", [_born(a)])]))
            secs.append(al)
    extra = _org_extra(o) + _flavour_sent(o, "org")
    if extra:
        secs.insert(1, _Sec("Activities" if o.kind == "orchestra" else "Profile", extra))
    return f"{o.name} ({home.name})", [_org_intro(o)], secs


def _work_page(w: Entity, ix: _Index, max_items: int) -> tuple[str, list[_Sent], list[_Sec]]:
    c, pub = w.rel["creator"], w.rel["publisher"]
    body_title, who_title, pub_title, _ = _SECTIONS_OF_WORK[w.kind]
    secs = []
    body = _work_body(w)
    if body:
        secs.append(_Sec(body_title, body))
    uni = c.rel["studied"]
    others = [x for x in ix.of("creator", c, WORKS) if x is not w][:max_items]
    ckids = [_Sec("Early life", [_born(c), _city_in(c.rel["born_in"])]),
             _Sec("Education", [_studied(c), _org_intro(uni)])]
    if others:
        ckids.append(_Sec("Other works", [_s(f"{c.attrs['surname']} is also known for "
                                             f"{_listing([x.name for x in others])}.", *others)]))
    secs.append(_Sec(who_title, [_s(f"{w.name} is the work of {c.name}.", w)], [
        _Sec(c.name, [_person_intro(c), _career(c)], ckids)]))
    home = pub.rel["home"]
    secs.append(_Sec(pub_title, [_s(f"{w.name} was {WORK[w.kind]['out']} in {w.year}.", w), _work_pub(w)], [
        _Sec(pub.name, [_org_intro(pub), _founded(pub)], [
            _Sec("Headquarters", [_org_home(pub), _city_in(home)], [
                _Sec(home.rel["country"].name, [_country(home.rel["country"])])]),
            _Sec("Founder", [_person_intro(pub.rel["founder"])])])]))
    reception = _flavour_sent(w, "work")
    if reception:
        secs.append(_Sec("Reception", reception))
    return f"{w.name} ({c.attrs['surname']} {w.kind})", [_work_intro(w)], secs


def _city_page(c: Entity, ix: _Index, max_items: int) -> tuple[str, list[_Sent], list[_Sec]]:
    k = c.rel["country"]
    secs = []
    culture = _flavour_sent(c, "city")
    if culture:
        secs.append(_Sec("Culture", culture))
    secs.append(_Sec("Geography", _city_geo(c) or [_city_in(c)], [_country_sec(k, ix, c)]))
    people = ix.of("born_in", c, ("person",))[:max_items]
    if people:
        sec = _Sec("Notable people", [_s(f"People born in {c.name} include {_listing([p.name for p in people])}.",
                                         *people)])
        for p in people:
            sec.children.append(_Sec(p.name, [_person_intro(p), _career(p)], [
                _Sec("Education", [_studied(p), _org_intro(p.rel["studied"])])]))
        secs.append(sec)
    orgs = ix.of("home", c, ORGS)[:max_items]
    if orgs:
        sec = _Sec("Institutions", [_s(f"{c.name} is home to {_listing([o.name for o in orgs])}.", *orgs)])
        for o in orgs:
            sec.children.append(_Sec(o.name, [_org_intro(o), *_org_extra(o)], [
                _Sec("History", [_founded(o), _person_intro(o.rel["founder"])])]))
        secs.append(sec)
    return f"{c.name}, {k.name}", [_city_in(c), *_city_pop(c)], secs


_BUILDERS = {"person": _person_page, **{k: _org_page for k in ORGS}, **{k: _work_page for k in WORKS},
             "city": _city_page}


# --------------------------------------------------------------------------- HTML


def page_id_of(title: str) -> str:
    """A file-name- and wildcard-safe page id from a title (letters, digits and ``_``)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_")


class _Refs:
    """Reference numbering by first citation (Wikipedia's order)."""

    def __init__(self) -> None:
        self.num: dict[str, int] = {}  # doc id -> K
        self.text: dict[str, str] = {}

    def mark(self, e: Entity) -> str:
        first = e.doc_id not in self.num
        if first:
            self.num[e.doc_id] = len(self.num) + 1
            self.text[e.doc_id] = e.text
        k = self.num[e.doc_id]
        sid = f' id="cite_ref-{k}"' if first else ""
        return f'<sup{sid} class="reference"><a href="#cite_note-{k}">[{k}]</a></sup>'


def _paragraph(sents: Sequence[_Sent], refs: _Refs) -> str:
    out = []
    for s in sents:
        if not s.sources:
            raise ValueError(f"uncited sentence {s.text!r}")  # a renderer bug, never data
        marks = "".join(refs.mark(e) for e in dict.fromkeys(s.sources))
        out.append(html.escape(s.text, quote=False) + marks)
    return f"<p>{' '.join(out)}</p>"


def _anchor(title: str, used: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_") or "section"
    a, i = base, 2
    while a in used:
        a, i = f"{base}_{i}", i + 1
    used.add(a)
    return a


def _render(title: str, lead: list[_Sent], secs: list[_Sec]) -> tuple[str, dict[str, str]]:
    refs = _Refs()
    used: set[str] = set()
    t = html.escape(title, quote=False)
    lines = ["<!DOCTYPE html>", '<html lang="en">',
             f'<head><meta charset="utf-8"><title>{t}</title></head>', "<body>", '<div id="content">',
             f'<h1 id="firstHeading">{t}</h1>', _paragraph(lead, refs)]

    def emit(sec: _Sec, level: int) -> None:
        if level > 6:
            raise ValueError(f"section {sec.title!r} deeper than h6")
        a = _anchor(sec.title, used)
        lines.append(f'<h{level}><span class="mw-headline" id="{a}">{html.escape(sec.title, quote=False)}</span>'
                     f'<span class="mw-editsection">[<a href="#{a}">edit</a>]</span></h{level}>')
        lines.append(_paragraph(sec.sents, refs))
        for c in sec.children:
            emit(c, level + 1)

    for s in secs:
        emit(s, 2)
    lines.append('<h2><span class="mw-headline" id="References">References</span></h2>')
    lines.append('<div class="reflist"><ol class="references">')
    ref_ids = {}
    for doc_id, k in refs.num.items():
        ref_ids[f"cite_note-{k}"] = doc_id
        lines.append(f'<li id="cite_note-{k}"><span class="mw-cite-backlink"><a href="#cite_ref-{k}">^</a></span> '
                     f'<span class="reference-text">{html.escape(refs.text[doc_id], quote=False)}</span></li>')
    lines += ["</ol></div>", "</div>", "</body>", "</html>", ""]
    return "\n".join(lines), ref_ids


def _drop_repeats(root: _Sec) -> _Sec:
    """Drop (with its subtree) any section whose text repeats an earlier node's, so no two turns
    of a flow share a golden response."""
    seen: set[tuple[str, ...]] = set()

    def walk(sec: _Sec) -> _Sec:
        seen.add(tuple(s.text for s in sec.sents))
        kept = []
        for c in sec.children:
            if tuple(s.text for s in c.sents) not in seen:
                kept.append(walk(c))
        return _Sec(sec.title, sec.sents, kept)

    return walk(root)


def render_pages(world: World, *, min_depth: int = MIN_DEPTH, min_nodes: int = MIN_NODES,
                 kinds: Sequence[str] = PAGE_KINDS, max_items: int = 3) -> list[Page]:
    """One page per core entity of ``kinds`` (in the world's entity order), keeping those whose
    title tree has at least ``min_depth`` nodes root-to-leaf and ``min_nodes`` nodes (the
    builders meet the defaults for every entity; the bounds keep a caller's stricter choice
    honest). ``max_items`` caps each list of related entities (earliest first)."""
    unknown = set(kinds) - set(PAGE_KINDS)
    if unknown:
        raise ConfigError(f"coral_world: unknown page kind(s) {sorted(unknown)} (known: {', '.join(PAGE_KINDS)})")
    if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
        raise ConfigError(f"coral_world: max_items must be an integer >= 1, got {max_items!r}")
    ix = _Index(world)
    pages, ids = [], set()
    for e in ix.core:
        if e.kind not in kinds:
            continue
        title, lead, secs = _BUILDERS[e.kind](e, ix, max_items)
        root = _drop_repeats(_Sec(title, lead, secs))
        secs = root.children
        if root.height() < min_depth or root.size() < min_nodes:
            continue
        pid = page_id_of(title)
        if pid in ids:  # names are unique in the world, so titles are; guard the slug anyway
            raise ValueError(f"duplicate page id {pid!r}")
        ids.add(pid)
        doc, refs = _render(title, lead, secs)
        pages.append(Page(pid, title, doc, refs, e.kind, e.doc_id))
    return pages


# --------------------------------------------------------------------------- statistics and files


def page_statistics(pages: Sequence[Page]) -> dict:
    """What the pages give CORAL's construction: trees as ``parse_html_page`` reads them, their
    sizes and depths, and how many pages can start each sampler at its regular turn range
    (LDS 3-6, SIDS/STRW 6-10; DTRW needs a root-title partner and 6 turns over both trees) and
    at the long range (11-20 turns; LDS has none)."""
    from convrag.studies.coral.pages import DEFAULT_TURNS, LONG_TURNS, RootTitleIndex, flow_capacity, parse_html_page

    trees = [parse_html_page(p.html, p.page_id) for p in pages]
    index = RootTitleIndex(trees)
    start, long = Counter(), Counter()
    for t in trees:
        for kind in ("lds", "sids", "strw"):
            start[kind] += flow_capacity(kind, t) >= DEFAULT_TURNS[kind][0]
            long[kind] += flow_capacity(kind, t) >= LONG_TURNS[0]
        ranked = index.rank(t)
        both = len(t) + len(ranked[0][0]) if ranked else 0
        start["dtrw"] += both >= DEFAULT_TURNS["dtrw"][0]
        long["dtrw"] += both >= LONG_TURNS[0]
    depth = Counter(t.height for t in trees)
    return {"pages": len(pages), "pages_by_kind": dict(sorted(Counter(p.kind for p in pages).items())),
            "nodes": sum(len(t) for t in trees), "min_nodes": min((len(t) for t in trees), default=0),
            "max_nodes": max((len(t) for t in trees), default=0),
            "max_depth": max(depth, default=0), "depths": {str(d): depth[d] for d in sorted(depth)},
            "references": sum(len(p.refs) for p in pages),
            "can_start": {k: int(start[k]) for k in ("lds", "sids", "strw", "dtrw")},
            "can_start_long": {k: int(long[k]) for k in ("sids", "strw", "dtrw")}}


def page_records(name: str, block: dict) -> list[dict]:
    """The pages of the world that the ``miniworld`` corpus block ``block`` named ``name``
    generates (same name, spec and seed as ``convrag prepare-corpus``), so every reference maps
    to a doc id of that corpus: ``{page_id, title, kind, doc_id, html, refs}`` per page."""
    from convrag.data.miniworld import build_world

    world = build_world({**(block.get("spec") or {}), "name": name}, block.get("seed", 13))
    return [{"page_id": p.page_id, "title": p.title, "kind": p.kind, "doc_id": p.doc_id, "html": p.html,
             "refs": dict(p.refs)} for p in render_pages(world)]


def write_coral_world(spec: dict | None, seed: int, out_dir: str | os.PathLike, **render) -> dict:
    """Write ``pages/<page_id>.html``, ``corpus.jsonl`` (every passage of the world, cited or not,
    so retrieval has distractors) and ``pages.json`` (ids, titles, reference -> doc id maps),
    each atomically (the pages folder is built aside and swapped in; ``pages.json`` comes last,
    so its presence means the set is complete). Returns the counts (``page_statistics`` plus
    passages and cited passages). ``render`` goes to :func:`render_pages`."""
    from convrag.data.miniworld import DEFAULT_SPEC, build_world
    from convrag.io import write_json
    from convrag.records import write_records

    world = build_world(spec, seed)
    pages = render_pages(world, **render)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(out, prefix=".pages.")  # mkdir()'s mode under the umask, not mkdtemp's 0700
    try:
        for p in pages:
            (tmp / f"{p.page_id}.html").write_text(p.html, encoding="utf-8")
        old = out / "pages"
        if old.exists():
            trash = temp_dir(out, prefix=".pages.old.")
            os.replace(old, trash / "pages")
            shutil.rmtree(trash)
        os.replace(tmp, old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    write_records(out / "corpus.jsonl", world.passages)
    stats = page_statistics(pages)
    cited = {d for p in pages for d in p.refs.values()}
    report = {**stats, "passages": len(world.passages), "cited_passages": len(cited)}
    name = {**DEFAULT_SPEC, **(spec or {})}["name"]
    write_json(out / "pages.json", {
        "world": name, "seed": seed,
        "pages": [{"page_id": p.page_id, "title": p.title, "kind": p.kind, "doc_id": p.doc_id,
                   "file": f"pages/{p.page_id}.html", "refs": p.refs} for p in pages]})
    return report
