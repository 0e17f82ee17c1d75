"""A seeded, fictional multi-hop world: the project's own offline default data.

Why fictional: a tiny LLM must not answer from memory, so every name is invented from
syllables and every fact exists only in the generated passages; closed-book accuracy then
measures guessing, and retrieval really matters. Why generated: the default grid must run
offline with data the project itself produces (real benchmark files are never shipped).

The world is a graph of entities (people, cities, countries, companies, universities,
orchestras, novels, films, albums) with functional relations (a work has one creator and
one publisher, a person one birth city, an organisation one founder and one home city, a
city one country). Each entity gets one short passage that states exactly its own outgoing
facts, so a bridge question that follows a relation chain from a named anchor has exactly
one answer, one supporting passage per hop (in hop order) and the answer only in the last
one. Comparison questions ask which of two entities came earlier (distinct years).
Distractor entities point into the core world but never take part in a question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from convrag.errors import ConfigError
from convrag.records import Passage, Question

DEFAULT_SPEC: dict = {
    "name": "miniworld",
    "n_people": 50,
    "n_places": 25,  # about one country per five places, the rest cities
    "n_organisations": 30,  # companies, universities and orchestras
    "n_works": 45,  # novels, films and albums
    "n_distractors": 50,
    "questions": {"2": 12, "3": 10, "4": 8},
    "comparison_share": 0.5,  # share of the 2-hop questions that are comparisons
}

_SYL = ("ka lo ven mir sa dor tel bri nor ves la qui ran zel tho mo fen ris gal dra lin sor "
        "pet vin ar em ost ul bel cor ta ni rel vo sem du ber mal tes wen").split()
_ENDS = {
    "first": ["", "a", "o", "in", "is", "el"],
    "last": ["sen", "ova", "ic", "ard", "wyn", "ez", "ani", "berg", "holt", "ley"],
    "city": ["", "ford", "holm", "vik", "grad", "mont", "ton", "burg", "port"],
    "country": ["ia", "ora", "and", "esh", "aria", "una", "ovia"],
    "word": ["", "a", "en", "is", "or"],
}
_ADJ = ("Silent Amber Hollow Crimson Distant Broken Golden Quiet Northern Paper Glass Winter "
        "Hidden Last Burning Salt Velvet Iron Pale Endless").split()
_NOUN = ("Harbour Lantern Orchard River Garden Mirror Tower Voyage Letters Season Bridge Archive "
         "Island Compass Meadow Chorus Lighthouse Canal Engine Horizon").split()
PROFESSIONS = {"novelist": "literature", "film director": "cinema", "musician": "music",
                "entrepreneur": "business", "scientist": "research", "architect": "architecture"}
_CREATOR = {"novel": "novelist", "film": "film director", "album": "musician"}
SECTORS = {  # sector -> (description, name suffixes, what the company is known for)
    "publishing": ("publishing house", ["Press", "Books"], "its carefully edited fiction list"),
    "film": ("film production company", ["Pictures", "Studios"], "its low-budget dramas"),
    "music": ("record label", ["Records", "Sound"], "its recordings of young bands"),
    "shipping": ("shipping company", ["Lines", "Freight"], "its fleet of coastal ferries"),
    "software": ("software company", ["Systems", "Software"], "its accounting programs"),
    "textiles": ("textile company", ["Mills", "Textiles"], "its woollen fabrics"),
}
_PUBLISHER_SECTOR = {"novel": "publishing", "film": "film", "album": "music"}
WORK = {  # kind -> phrases used in passages and questions
    "novel": {"author": "the author of", "made": "wrote", "pub": "published", "out": "first published"},
    "film": {"author": "the director of", "made": "directed", "pub": "produced", "out": "first released"},
    "album": {"author": "the musician who recorded", "made": "recorded", "pub": "released", "out": "first released"},
}
BASED = {"company": "headquartered", "university": "located", "orchestra": "based"}
WORKS, ORGS = tuple(WORK), tuple(BASED)
_RELS = {  # subject kind -> relations it can follow, in a fixed order
    **{k: ("creator", "publisher", "released") for k in WORKS},
    "person": ("born_in", "born_year", "studied"),
    **{k: ("founder", "home", "founded") for k in ORGS},
    "city": ("country",),
}
_YEAR_OF = {"released": "year", "born_year": "year", "founded": "year"}
FLAVOUR = {
    "person": [
        "is known among colleagues for a patient and methodical way of working.",
        "has often said in interviews that long walks are the best source of new ideas.",
        "divides the year between a busy city apartment and a small house by the sea.",
        "is remembered by former teachers as a curious and stubborn student.",
        "has served on several juries that support young talent.",
        "collects old maps and rarely gives public speeches.",
    ],
    "city": [
        "The old town is famous for its stone bridges and its covered market.",
        "Its central square hosts a large and popular music festival every autumn.",
        "Local cuisine there is known for smoked fish and dark rye bread.",
        "A fast railway line links it with the other large towns of the surrounding region.",
    ],
    "org": [
        "Its main building was renovated after a fire in the early years.",
        "It publishes a short report about its activities every spring.",
        "Several of its early members later became well known in their fields.",
        "It has received a number of regional awards for its work.",
    ],
    "work": [
        "Critics praised its careful structure and its quiet, precise style from the first page.",
        "It sold modestly at first but slowly found a loyal audience over the following years.",
        "It was later translated into several languages and adapted for the radio.",
        "Some reviewers found the ending too abrupt, while others admired its restraint.",
    ],
}
_PLOTS = [
    "a young cartographer who finds a coastline missing from every official map",
    "two estranged sisters who inherit a failing lighthouse",
    "a retired engineer searching for a lost family letter",
    "a travelling theatre company stranded by a winter storm",
    "a clockmaker who keeps receiving anonymous commissions",
    "a ferry captain who agrees to carry one last mysterious passenger",
]


@dataclass(eq=False)
class Entity:
    kind: str
    name: str
    core: bool = True
    year: int | None = None
    attrs: dict = field(default_factory=dict)
    rel: dict = field(default_factory=dict)  # relation -> Entity
    aliases: list = field(default_factory=list)
    text: str = ""
    doc_id: str = ""


@dataclass
class World:
    """Everything generated; ``links[qid]`` lists, per supporting passage, the strings it must
    contain (bridge: the hop's entity and the next one; comparison: the entity and its year)."""

    questions: list[Question]
    passages: list[Passage]
    entities: list[Entity]
    links: dict[str, list[list[str]]]


def _norm(s: str) -> str:
    return re.sub(r"^(the|a|an) ", "", s.lower().strip())


class _Gen:
    """Holds the rng and the name registry (every name and surname unique after lowercasing
    and dropping a leading article, so an answer string names exactly one entity)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.names: set[str] = set()

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def year(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def claim(self, name: str) -> bool:
        if _norm(name) in self.names:
            return False
        self.names.add(_norm(name))
        return True

    def word(self, ends: str, syllables: tuple[int, int] = (2, 2)) -> str:
        for _ in range(2000):
            syl = [self.pick(_SYL) for _ in range(self.year(*syllables))]
            w = ("".join(syl) + self.pick(_ENDS[ends])).capitalize()
            if len(w) >= 4 and len(set(syl)) == len(syl) and self.claim(w):  # no "Kaka"
                return w
        raise ConfigError("miniworld: ran out of distinct invented names; reduce the spec sizes")

    def unique(self, make) -> str:
        for _ in range(2000):
            name = make()
            if self.claim(name):
                return name
        raise ConfigError("miniworld: ran out of distinct names; reduce the spec sizes")


def check_spec(spec: dict | None) -> dict:
    spec = {**DEFAULT_SPEC, **(spec or {})}
    unknown = set(spec) - set(DEFAULT_SPEC)
    if unknown:
        raise ConfigError(f"miniworld spec: unknown key(s) {sorted(unknown)} (known: {sorted(DEFAULT_SPEC)})")
    if not isinstance(spec["name"], str) or not re.fullmatch(r"[\w.-]+", spec["name"]):
        raise ConfigError(f"miniworld spec: 'name' must be a non-empty word (letters, digits, . _ -), got {spec['name']!r}")
    mins = {"n_people": 3, "n_places": 2, "n_organisations": 3, "n_works": 1, "n_distractors": 0}
    for k, lo in mins.items():
        if isinstance(spec[k], bool) or not isinstance(spec[k], int) or spec[k] < lo:
            raise ConfigError(f"miniworld spec: '{k}' must be an integer >= {lo}, got {spec[k]!r}")
    qs = spec["questions"]
    if not isinstance(qs, dict) or set(map(str, qs)) - {"2", "3", "4"}:
        raise ConfigError("miniworld spec: 'questions' must map hop counts '2', '3', '4' to numbers")
    spec["questions"] = {int(k): v for k, v in qs.items()}
    if any(not isinstance(v, int) or v < 0 for v in spec["questions"].values()):
        raise ConfigError("miniworld spec: 'questions' counts must be integers >= 0")
    share = spec["comparison_share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        raise ConfigError("miniworld spec: 'comparison_share' must be within [0, 1]")
    return spec


def _build_entities(g: _Gen, spec: dict) -> list[Entity]:
    n_countries = max(1, round(spec["n_places"] / 5))
    countries = []
    for _ in range(n_countries):
        name = g.word("country")
        form = g.pick(["Republic", "Kingdom", "Federation", "Commonwealth", "Grand Duchy"])
        long = f"{form} of {name}"
        g.claim(long)
        countries.append(Entity("country", name, year=g.year(1700, 1960), aliases=[name, long], attrs={"long": long}))
    cities = []
    for i in range(spec["n_places"] - n_countries):
        c = Entity("city", g.word("city", (1, 2)))
        c.rel["country"] = countries[i] if i < n_countries else g.pick(countries)
        cities.append(c)
    profs = [list(PROFESSIONS)[i] for i in g.rng.permutation(len(PROFESSIONS))]
    people = [_person(g, profs[i % len(profs)], cities) for i in range(spec["n_people"])]
    orgs = []
    for i in range(spec["n_organisations"]):
        kind = ("company", "university", "company", "orchestra")[i % 4]
        sector = list(SECTORS)[(i // 2) % len(SECTORS)] if kind == "company" else None
        orgs.append(_org(g, kind, sector, people, cities))
    universities = [o for o in orgs if o.kind == "university"]
    for p in people:
        _alma_mater(g, p, universities)
    works = [_work(g, WORKS[i % 3], people, orgs) for i in range(spec["n_works"])]
    distractors = []
    for i in range(spec["n_distractors"]):
        kind = ("person", "novel", "company", "film", "city", "album", "university", "person", "orchestra")[i % 9]
        if kind == "person":
            e = _person(g, g.pick(list(PROFESSIONS)), cities)
            _alma_mater(g, e, universities)
        elif kind == "city":
            e = Entity("city", g.word("city", (1, 2)))
            e.rel["country"] = g.pick(countries)
        elif kind in ORGS:
            e = _org(g, kind, g.pick(list(SECTORS)) if kind == "company" else None, people, cities)
        else:
            e = _work(g, kind, people, orgs)
        e.core = False
        distractors.append(e)
    return countries + cities + people + orgs + works + distractors


def _person(g: _Gen, prof: str, cities: list[Entity]) -> Entity:
    first = g.word("first", (1, 2))
    last = g.word("last", (1, 2))
    full = f"{first} {last}"
    g.claim(full)
    e = Entity("person", full, year=g.year(1925, 1985), aliases=[full, last], attrs={"prof": prof, "surname": last})
    e.rel["born_in"] = g.pick(cities)
    return e


def _alma_mater(g: _Gen, p: Entity, universities: list[Entity]) -> None:
    """A university that already existed when the person was about 20 (else the oldest)."""
    old = [u for u in universities if u.year <= p.year + 20]
    p.rel["studied"] = g.pick(old) if old else min(universities, key=lambda u: u.year)


def _org(g: _Gen, kind: str, sector: str | None, people: list[Entity], cities: list[Entity]) -> Entity:
    stem = g.word("word")
    if kind == "company":
        name = g.unique(lambda: f"{stem} {g.pick(SECTORS[sector][1])}")
    elif kind == "university":
        name = g.unique(lambda: f"{stem} {g.pick(['University', 'Institute of Technology', 'College of Arts'])}")
    else:
        name = g.unique(lambda: f"{stem} {g.pick(['Philharmonic', 'Symphony Orchestra', 'Chamber Orchestra'])}")
    founder = g.pick(people)
    e = Entity(kind, name, year=min(2022, founder.year + g.year(25, 50)), aliases=[name], attrs={"sector": sector})
    e.rel["founder"], e.rel["home"] = founder, g.pick(cities)
    return e


def _work(g: _Gen, kind: str, people: list[Entity], orgs: list[Entity]) -> Entity:
    def title() -> str:
        if g.rng.random() < 0.75:
            return f"The {g.pick(_ADJ)} {g.pick(_NOUN)}"
        noun = g.pick(_NOUN)
        return f"{'An' if noun[0] in 'AEIOU' else 'A'} {noun} for {g.word('word')}"

    name = g.unique(title)
    creators = [p for p in people if p.attrs["prof"] == _CREATOR[kind]] or people
    companies = [o for o in orgs if o.kind == "company"]
    pubs = [o for o in companies if o.attrs["sector"] == _PUBLISHER_SECTOR[kind]] or companies
    creator, pub = g.pick(creators), g.pick(pubs)
    year = min(2024, max(creator.year + g.year(22, 55), pub.year + 1))
    e = Entity(kind, name, year=year, aliases=[name], attrs={"plot": g.pick(_PLOTS)})
    e.rel["creator"], e.rel["publisher"] = creator, pub
    return e


def _flavour(g: _Gen, kind: str, n: int) -> list[str]:
    pool = FLAVOUR[kind]
    return [pool[i] for i in g.rng.permutation(len(pool))[:n]]


def _write_text(g: _Gen, e: Entity) -> str:
    """3-4 sentences (25-60 words: short, since every prompt carries several) stating this
    entity's own facts; never a fact whose
    subject is another entity, so each relation is stated in exactly one passage."""
    r = e.rel
    if e.kind == "country":
        econ = g.pick(["fishing and timber", "farming and tourism", "mining and shipbuilding", "trade and banking"])
        return (f"{e.name}, officially the {e.attrs['long']}, is a small country on the continent of Oresta, "
                f"with a long coastline in the west. "
                f"{e.name} became an independent state in {e.year}. Its economy relies mainly on {econ}, "
                f"and most of its people live near the coast.")
    if e.kind == "city":
        geo = g.pick(["situated on the banks of a wide river", "built around a natural harbour",
                      "lying in a green valley between two mountain ranges", "located on a windy high plateau"])
        pop = int(g.rng.integers(20, 900)) * 1000
        return (f"{e.name} is a city in {r['country'].name}, {geo}. It has a population of about {pop:,} people "
                f"and is an important centre of regional trade and crafts. {_flavour(g, 'city', 1)[0]}")
    if e.kind == "person":
        sur = e.attrs["surname"]
        fl = _flavour(g, "person", 1)
        return (f"{e.name} is a {e.attrs['prof']} who was born in {r['born_in'].name} in {e.year}. "
                f"{sur} studied at {r['studied'].name} before beginning a career in {PROFESSIONS[e.attrs['prof']]}. "
                f"{sur} {fl[0]}")
    if e.kind in ORGS:
        founder, home = r["founder"].name, r["home"].name
        if e.kind == "company":
            desc, _, known = SECTORS[e.attrs["sector"]]
            head = (f"{e.name} is a {desc} that was founded in {e.year} by {founder}. "
                    f"The company is headquartered in {home} and is best known for {known}.")
        elif e.kind == "university":
            head = (f"{e.name} is a public university located in {home}. It was founded in {e.year} by {founder} "
                    f"and today has about {int(g.rng.integers(3, 40)) * 1000:,} students.")
        else:
            head = (f"{e.name} is an orchestra based in {home}. It was founded in {e.year} by {founder} "
                    f"and gives about {int(g.rng.integers(30, 90))} concerts each season.")
        return f"{head} {_flavour(g, 'org', 1)[0]}"
    w = WORK[e.kind]
    made = {"novel": "a novel written by", "film": "a film directed by", "album": "an album recorded by"}[e.kind]
    by = {"novel": "by", "film": "and was produced by", "album": "by the record label"}[e.kind]
    body = (f"The story follows {e.attrs['plot']}." if e.kind != "album"
            else "Its songs were recorded in a single week in a small rented studio.")
    return (f"{e.name} is {made} {r['creator'].name}. It was {w['out']} in {e.year} {by} {r['publisher'].name}. "
            f"{body} {_flavour(g, 'work', 1)[0]}")


# ---- questions -----------------------------------------------------------------------

def _target(e: Entity, rel: str) -> Entity | None:
    if rel in _YEAR_OF:
        return Entity("year", str(e.year), aliases=[str(e.year)])
    return e.rel.get(rel)


def _anchor(e: Entity) -> str:
    return f'the {e.kind} "{e.name}"' if e.kind in WORKS else e.name


def _np(rel: str, e: Entity, x: str) -> str:
    """A noun phrase for the object of ``rel`` applied to ``e``, described as ``x``."""
    w, k = WORK.get(e.kind, {}), e.kind
    return {
        "creator": lambda: f"{w.get('author')} {x}",
        "publisher": lambda: f"the company that {w.get('pub')} {x}",
        "released": lambda: f"the year when {x} was {w.get('out')}",
        "born_in": lambda: f"the city where {x} was born",
        "born_year": lambda: f"the year when {x} was born",
        "studied": lambda: f"the university attended by {x}",
        "founder": lambda: f"the founder of {x}",
        "home": lambda: f"the home city of {x}",
        "founded": lambda: f"the year when {x} was founded",
        "country": lambda: f"the country where {x} is located",
    }[rel]()


def _ask(rel: str, e: Entity, x: str) -> str:
    w, k = WORK.get(e.kind, {}), e.kind
    return {
        "creator": lambda: f"Who {w.get('made')} {x}?",
        "publisher": lambda: f"Which company {w.get('pub')} {x}?",
        "released": lambda: f"In which year was {x} {w.get('out')}?",
        "born_in": lambda: f"In which city was {x} born?",
        "born_year": lambda: f"In which year was {x} born?",
        "studied": lambda: f"Which university did {x} attend?",
        "founder": lambda: f"Who founded {x}?",
        "home": lambda: f"In which city is {x} {BASED.get(k)}?",
        "founded": lambda: f"In which year was {x} founded?",
        "country": lambda: f"In which country is {x}?",
    }[rel]()


def _chains(anchor: Entity, length: int) -> list[tuple[tuple[str, ...], list[Entity]]]:
    """Every relation path of ``length`` hops from ``anchor`` as (relations, entities)."""
    out = []

    def walk(rels: tuple[str, ...], ents: list[Entity]) -> None:
        if len(rels) == length:
            out.append((rels, ents))
            return
        for rel in _RELS.get(ents[-1].kind, ()):
            t = _target(ents[-1], rel)
            if t is not None:
                walk(rels + (rel,), ents + [t])

    walk((), [anchor])
    return out


def _bridge(rels: tuple[str, ...], ents: list[Entity]) -> dict | None:
    """The question for one chain, or None if the chain is unfair (a repeated or distractor
    entity, or an answer that an earlier supporting passage already states)."""
    hop_ents, ans = ents[:-1], ents[-1]
    if any(not e.core for e in ents) or len({id(e) for e in ents}) < len(ents) or len(set(rels)) < len(rels):
        return None
    if any(ans.name in e.text for e in hop_ents[:-1]):
        return None
    x = _anchor(ents[0])
    for rel, e in zip(rels[:-1], hop_ents):
        x = _np(rel, e, x)
    question = _ask(rels[-1], hop_ents[-1], x)
    if ans.name in question:
        return None
    last = hop_ents[-1]
    decomp = [f"I'm looking for {_np(rels[-1], last, 'a certain ' + last.kind)}.",
              f"Start from {_np(rels[0], ents[0], _anchor(ents[0]))}."]
    decomp += [f"Then take {_np(r, e, 'that ' + e.kind)}." for r, e in zip(rels[1:-1], hop_ents[1:])]
    return {"question": question, "answers": ans.aliases, "docs": hop_ents, "type": "bridge",
            "decomposition": decomp, "links": [[a.name, b.name] for a, b in zip(hop_ents, ents[1:])],
            "intermediate": [e.name for e in ents[1:-1]]}


_COMPARE = {  # category -> (kinds, question, goal of the first shard)
    "work": (WORKS, "Which came out first, {a} or {b}?", "whichever of two works came out first"),
    "person": (("person",), "Who was born first, {a} or {b}?", "whichever of two people was born first"),
    "org": (ORGS, "Which was founded first, {a} or {b}?", "whichever of two organisations was founded first"),
}


def _select(g: _Gen, spec: dict, ents: list[Entity]) -> list[dict]:
    core = [e for e in ents if e.core]
    out, used = [], set()
    n_cmp = int(spec["comparison_share"] * spec["questions"].get(2, 0) + 0.5)
    for hops in (2, 3, 4):
        n = spec["questions"].get(hops, 0) - (n_cmp if hops == 2 else 0)
        groups: dict[tuple, list] = {}
        for a in core:
            for rels, chain in _chains(a, hops):
                groups.setdefault(rels, []).append(chain)
        tpls = [sorted(groups)[i] for i in g.rng.permutation(len(groups))]
        picked: list[dict] = []
        while len(picked) < n:
            before = len(picked)
            for t in tpls:
                if len(picked) == n:
                    break
                cands = [c for c in groups[t] if (t, id(c[0])) not in used]
                fresh = [c for c in cands if id(c[0]) not in used]
                for c in [fresh[i] for i in g.rng.permutation(len(fresh))] + cands:
                    used.add((t, id(c[0])))
                    q = _bridge(t, c)
                    if q is not None:
                        used.add(id(c[0]))
                        picked.append(q)
                        break
            if len(picked) == before:
                raise ConfigError(f"miniworld spec: questions['{hops}'] asks for {n} {hops}-hop bridge questions "
                                  f"but only {len(picked)} distinct fair chains exist; enlarge the world")
        out += picked
    pairs: set = set()
    cats = [list(_COMPARE)[i] for i in g.rng.permutation(len(_COMPARE))]
    for i in range(n_cmp):
        kinds, template, goal = _COMPARE[cats[i % len(cats)]]
        pool = [e for e in core if e.kind in kinds]
        for _ in range(1000):
            a, b = g.pick(pool), g.pick(pool)
            if a is not b and a.year != b.year and frozenset((id(a), id(b))) not in pairs:
                break
        else:
            raise ConfigError("miniworld spec: not enough distinct comparison pairs; enlarge the world")
        pairs.add(frozenset((id(a), id(b))))
        first = a if a.year < b.year else b
        out.append({"question": template.format(a=_anchor(a), b=_anchor(b)), "answers": first.aliases,
                    "docs": [a, b], "type": "comparison",
                    "decomposition": [f"I'm looking for {goal}.", f"One is {_anchor(a)}.", f"The other is {_anchor(b)}."],
                    "links": [[a.name, str(a.year)], [b.name, str(b.year)]],
                    "intermediate": [str(a.year), str(b.year)]})
    return out


def build_world(spec: dict | None, seed: int) -> World:
    """Generate the whole world (see ``generate_world``), keeping entities and hop links."""
    spec = check_spec(spec)
    name = spec["name"]
    g = _Gen(seed)
    g.claim("Oresta")
    ents = _build_entities(g, spec)
    for e in ents:
        e.aliases = e.aliases or [e.name]
        e.text = _write_text(g, e)
    chosen = _select(g, spec, ents)
    for i, k in enumerate(g.rng.permutation(len(ents))):  # doc ids reveal no entity kind
        ents[k].doc_id = f"{name}/{i}"
    passages = sorted((Passage(e.doc_id, e.name, e.text, name) for e in ents),
                      key=lambda p: int(p.doc_id.rsplit("/", 1)[1]))
    chosen.sort(key=lambda q: (len(q["docs"]), q["type"] == "comparison"))
    questions, links = [], {}
    for i, q in enumerate(chosen):
        qid = f"{name}-q{i:03d}"
        questions.append(Question(qid=qid, dataset=name, question=q["question"],
                                  answers=list(dict.fromkeys(q["answers"])),
                                  supporting_doc_ids=[e.doc_id for e in q["docs"]], hops=len(q["docs"]),
                                  type=q["type"], decomposition=q["decomposition"],
                                  intermediate_answers=q["intermediate"]))
        links[qid] = q["links"]
    return World(questions, passages, ents, links)


def generate_world(spec: dict | None, seed: int) -> tuple[list[Question], list[Passage]]:
    """(questions, passages) of a fictional world; the same (spec, seed) gives identical
    records, a different seed a different world. Sizes come from ``spec`` (keys of
    DEFAULT_SPEC; missing keys take the defaults)."""
    w = build_world(spec, seed)
    return w.questions, w.passages
