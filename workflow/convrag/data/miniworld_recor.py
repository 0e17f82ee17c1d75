"""The mini world as a RECOR-like benchmark whose qrels are incomplete by construction.

Why: the "Better Retrievers, Worse Labels" study (``../shared/reference/published/
worse_labels.yaml``) shows that "no gold document in the top k" is a poor label for "the
context cannot answer the turn" once retrievers get good, because unjudged documents also hold
the answer (false misses). The embedded default needs a small benchmark where this happens by
construction and where the truth is known, so every analysis sees both classes (false and true
misses) and detectors and judges can be checked against the plant.

Each domain is its own seeded mini world (``convrag.data.miniworld``; doc ids prefixed with the
domain). A **dialogue** (2-4 turns) is about a topic entity (a person, an organisation or a
work) and, from turn 3, an entity the topic relates to (the hop), named in turn 2's answer:

1. a fact of the topic, named in full (standalone): "In which year was Tolo Vanes born?";
2. the topic's relation to the hop, by reference: "Which university did that person attend?";
3. a fact of the hop: "In which year was that university founded?";
4. another fact of the hop ("In which city is it located?"), or, when the hop has only one
   fact (a city), the topic's third fact ("... the person we started with ...").

Reference answers are exact (one sentence stating the fact; ``labels.answer`` is the bare
value, a name or a year). Every turn's history is the earlier turns with their reference
answers; ``labels.official_history`` renders it as RECOR's ``conversation_history`` does
(``"No previous conversation."`` on turn 1, else ``"Q: <query>\\nA: <answer>"`` per earlier
turn, joined by newlines).

**Documents.** Every fact is a (subject, relation) pair; every document records the facts it
states, and the labels are derived from that record, never from string matching:

- the world's passage of the subject (it states all the subject's facts) and a turn-specific
  note (a page titled ``<subject>: <aspect>``) are the turn's **gold** (qrels, relevance 1);
- planted, unjudged, all about the subject and worded so a good retriever ranks them high:
  (a) ``same_thread_negatives`` per turn: forum replies in the dialogue's thread that discuss
      the asked fact without stating it (true misses; ``labels.unjudged_negative_docs``);
  (b) ``answer_bearing_negatives``: a reply in the same thread that does state the answer
      (class ``same_thread``);
  (c) ``near_duplicates``: a copy of the subject's world passage (a gold document) under
      another id, one or two words swapped for synonyms; it passes the copy detector
      (``convrag.metrics.overlap.is_copy``) against that gold (class ``near_duplicate``);
  (d) ``chunks``: another chunk of the gold passage's page (same title, id
      ``<gold id>#chunk<n>``) that states the answer (class ``other_chunk``);
  (e) ``other_turn_gold``: the gold note of another turn of the dialogue also states this
      turn's fact: the nearest turn about the same subject (a note on a subject naturally
      mentions its other facts), else the turn before, whose answer named this turn's subject
      (a note on "X studied at U" mentioning when U was founded); class ``other_turn_gold``;
- the world's other passages are background; none states a fact of a dialogue (each fact of
  the world is stated in exactly one passage, its subject's), though one may hold an answer's
  string for another reason (a person born in the year an asked university was founded), so a
  string match is not the ground truth.

``labels.unjudged_answer_docs`` = {doc id: class} of every document outside the turn's qrels
that states the turn's fact; the turn's answer-bearing documents are exactly its qrels plus
these. ``labels.unjudged_negative_docs`` = the turn's own same-thread negatives. A near
duplicate of the subject's passage and the other turn's note answer every turn they state a
fact of, so they can appear in several turns' labels. The shares (b), (c), (d), (e) are exact
quotas: ``share * turns of the domain`` (rounded half up) turns, chosen at random, each
receive one such document; ``clean_turns`` (a share, chosen first) receive none, so a context
of theirs without gold is always a true miss. Near duplicates: at most one per subject
passage and none of a clean turn's subject (a copy of that passage answers every turn about
the subject), so fewer than the quota when the domain has too few subjects. Dialogues of a
domain share no subject and no answer, so a plant of one dialogue never answers another. Doc
ids are opaque (planted documents are numbered after the world's passages in random order; a
chunk id names its page): a model must not read the class off an id.

**Tasks** have the shape of ``convrag.data.recor``'s: ``task_id`` ``<domain>/<conv>_turn_<n>``,
``conversation_id`` ``<domain>/<conv>`` (conv ``dlg0``, ``dlg1``, ...), ``history`` as
user/assistant turns, ``rewrite`` None, ``contexts`` empty, ``labels``: ``domain``, ``split``
("dev"), ``turn_id``, ``topic_id``, ``official_history``, ``has_gold``, ``n_turns``, plus the
plant's truth: ``answer``, ``standalone_query`` (the turn with its subject named; for a
retriever that sees the resolved question), ``standalone`` (turn 1), ``subject``, ``fact``,
``unjudged_answer_docs``, ``unjudged_negative_docs``.

**Config** (``render_recor``; loader kind ``miniworld_recor``): ``{<domain>: {seed (13),
dialogues (2), turns (3, or a range [lo, hi] within 2..4), spec: {<miniworld sizes: n_people,
n_places, n_organisations, n_works, n_distractors>, <DEFAULT_PLANT keys>}}}``; an unknown key
is a ConfigError naming it.

Same (domains, seed) -> identical tasks and corpus; ``render_recor`` also returns a counted
report per domain (dialogues, turns, gold, each planted class).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from convrag.data.miniworld import ORGS, WORK, WORKS, Entity, World, check_spec, build_world
from convrag.data.miniworld_turns import _name, _question, _ref
from convrag.data.recor import NO_HISTORY, task_id, topic_id
from convrag.errors import ConfigError
from convrag.metrics.overlap import is_copy
from convrag.records import Passage, TurnTask

WORLD_KEYS = ("n_people", "n_places", "n_organisations", "n_works", "n_distractors")
DEFAULT_PLANT = {
    "same_thread_negatives": 2,  # per turn: on-topic replies without the answer (true misses)
    "answer_bearing_negatives": 0.34,  # share of a domain's turns given a same-thread reply with the answer
    "near_duplicates": 0.34,  # ... given a near-verbatim copy of the subject's (gold) passage
    "chunks": 0.34,  # ... given another chunk of the gold passage's page holding the answer
    "other_turn_gold": 0.34,  # ... whose fact a neighbouring turn's gold note also states
    "clean_turns": 0.25,  # share of a domain's turns kept free of every answer-bearing plant
}
SHARE_KEYS = ("answer_bearing_negatives", "near_duplicates", "chunks", "other_turn_gold", "clean_turns")
DOMAIN_KEYS = ("seed", "spec", "dialogues", "turns")
DEFAULT_DOMAIN = {"seed": 13, "dialogues": 2, "turns": 3}
CLASSES = ("same_thread", "near_duplicate", "other_chunk", "other_turn_gold")
SPLIT = "dev"

_FACTS = {"person": ("born_in", "born_year", "studied"), **{k: ("founder", "home", "founded") for k in ORGS},
          **{k: ("creator", "publisher", "released") for k in WORKS}, "city": ("country",)}
_YEAR_FIRST = ("born_year", "founded", "released", "country", "born_in", "home", "studied", "founder")
_ASPECT = {"born_in": "early life", "born_year": "biography", "studied": "education", "founder": "origins",
           "home": "location", "founded": "history", "creator": "authorship", "publisher": "publication",
           "released": "release", "country": "geography"}


def _say(rel: str, e: Entity, v: str) -> list[str]:
    """Sentences stating the fact (``e``, ``rel``) = ``v``; the first is the reference answer."""
    s, w = e.name, WORK.get(e.kind, {})
    return {
        "born_in": [f"{s} was born in {v}.", f"{s} was born in the city of {v}.",
                    f"The birthplace of {s} is {v}.", f"{v} is the city where {s} was born."],
        "born_year": [f"{s} was born in {v}.", f"{s} was born in the year {v}.",
                      f"The birth year of {s} is {v}.", f"{v} is the year in which {s} was born."],
        "studied": [f"{s} studied at {v}.", f"{s} is a graduate of {v}.",
                    f"{s} attended {v} as a student.", f"{v} is the university that {s} attended."],
        "founder": [f"{s} was founded by {v}.", f"{v} founded {s}.",
                    f"The founder of {s} was {v}.", f"{s} owes its existence to its founder, {v}."],
        "home": [f"{s} is based in {v}.", f"{s} has its seat in {v}.",
                 f"The home city of {s} is {v}.", f"{v} is the home city of {s}."],
        "founded": [f"{s} was founded in {v}.", f"{s} was established in {v}.",
                    f"{s} has existed since its founding in {v}.", f"The founding year of {s} is {v}."],
        "creator": [f"{s} was {w.get('made')} by {v}.", f"{v} {w.get('made')} {s}.",
                    f"{s} is the work of {v}, who {w.get('made')} it.", f"It was {v} who {w.get('made')} {s}."],
        "publisher": [f"{s} was {w.get('pub')} by {v}.", f"{v} {w.get('pub')} {s}.",
                      f"The company that {w.get('pub')} {s} is {v}.", f"It was {v} that {w.get('pub')} {s}."],
        "released": [f"{s} was {w.get('out')} in {v}.", f"{s} came out in {v}.",
                     f"{s} was {w.get('out')} in the year {v}.", f"{v} is the year {s} came out."],
        "country": [f"{s} is a city in {v}.", f"{s} lies in {v}.",
                    f"The country where {s} is located is {v}.", f"{v} is the country where {s} lies."],
    }[rel]


def _about(rel: str, e: Entity) -> str:
    """A clause naming the asked fact without its value ("where Tolo Vanes was born")."""
    s, w = e.name, WORK.get(e.kind, {})
    return {"born_in": f"where {s} was born", "born_year": f"when {s} was born",
            "studied": f"which university {s} attended", "founder": f"who founded {s}",
            "home": f"in which city {s} is based", "founded": f"in which year {s} was founded",
            "creator": f"who {w.get('made')} {s}", "publisher": f"which company {w.get('pub')} {s}",
            "released": f"in which year {s} was {w.get('out')}", "country": f"in which country {s} lies"}[rel]


_NEGATIVE = [
    "I have been trying to find out {about} for a while. The only thing the sources agree on is that this "
    "{kind} {trait}. If anyone has a reliable reference, please share it here.",
    "Good question about {about}. I checked two library catalogues and neither of them says. "
    "What they do say is that this {kind} {trait}.",
    "Not an answer, but related: {s} comes up on this forum a lot, mostly because this {kind} {trait}. "
    "Nobody here has found a clear reply yet.",
    "Same here, I would also like to know {about}. My old reference book only mentions that this {kind} "
    "{trait}, nothing more specific.",
]
_TRAIT = {
    "person": ["is remembered as a patient and methodical worker", "gives very few interviews",
               "is admired by younger colleagues", "has a reputation for long working days"],
    "org": ["has a loyal following among local people", "is often mentioned in regional newspapers",
            "has changed its logo several times", "is a popular subject of school projects"],
    "work": ["still has a devoted audience", "is often discussed in reading groups",
             "divided the critics at first", "is hard to find in shops today"],
    "city": ["is a pleasant place to visit in spring", "has a busy covered market",
             "is known for its stone bridges", "appears in many old travel guides"],
}
_REPLY = [
    "You asked {about}. I looked this up for our reading group: {fact} The rest of this thread is "
    "speculation, but that part is well documented.",
    "Answering for later readers, since people keep asking {about}: {fact} Thanks to everyone who helped.",
    "On the question of {about}, the old brochure I keep on my shelf is clear: {fact} It also has a few "
    "nice pictures.",
    "About {about}: the printed directory in our local library says so plainly. {fact} I hope that settles it.",
]
_NOTE = [
    "This note collects what the published reference works record on this subject. {facts} "
    "Where older sources disagree, the more recent ones are followed.",
    "A short summary, compiled from the standard reference works. {facts} Later accounts repeat "
    "the same details.",
    "Reference entry, checked against two independent printed sources. {facts} Other sources agree "
    "on these points.",
    "From an archive card index kept by a regional historical society. {facts} The card was last "
    "revised a few years ago.",
]
_CHUNK = [
    "{s}: {aspect}. {fact} The section ends with a list of related pages.",
    "{aspect_cap} of {s} (continued). {fact} More information can be found in the sections that follow.",
    "This part of the page covers the {aspect} of {s} in more detail. {fact} See also the notes at the end "
    "of the page.",
]
_SYNONYMS = [  # phrase swaps that keep the world's passages grammatical
    ("city", "town"), ("small", "little"), ("about", "around"), ("important", "major"),
    ("best known", "most famous"), ("public university", "state university"), ("story follows", "plot follows"),
    ("later", "afterwards"), ("several", "various"), ("often", "frequently"), ("main building", "principal building"),
    ("today", "now"), ("careful", "meticulous"), ("patient", "calm"), ("quiet", "calm"), ("mainly", "chiefly"),
    ("before beginning", "prior to beginning"), ("famous for", "renowned for"), ("each season", "every season"),
    ("every spring", "each spring"), ("in a single week", "in just one week"), ("praised", "lauded"),
    ("rarely", "seldom"), ("long walks", "lengthy walks"), ("people", "inhabitants"), ("young", "new"),
    ("large and popular", "big and popular"), ("modestly", "slowly"), ("carefully edited", "thoroughly edited"),
]


def _cat(e: Entity) -> str:
    return "person" if e.kind == "person" else "work" if e.kind in WORKS else "org" if e.kind in ORGS else "city"


def _value(e: Entity, rel: str) -> str:
    return e.rel[rel].name if rel in e.rel else str(e.year)


class _SpecError(ConfigError):
    """A config error at ``key`` (dotted, below the domain), for the loader to place."""

    def __init__(self, domain: str, key: str, why: str):
        self.domain, self.key, self.why = domain, key, why
        super().__init__(f"miniworld_recor, domain {domain}: invalid key '{key}': {why}")


def check_domain(dom: str, d) -> dict:
    """One domain's config, defaults filled in: ``{seed, spec: {<world sizes>, <plant keys>},
    dialogues, turns}``; a ConfigError names the offending key."""
    if d is None:
        d = {}
    if not isinstance(d, dict):
        raise _SpecError(dom, "", "a mapping {seed, spec, dialogues, turns}")
    for k in sorted(d):
        if k not in DOMAIN_KEYS:
            raise _SpecError(dom, k, f"unknown key (known: {', '.join(DOMAIN_KEYS)})")
    out = {**DEFAULT_DOMAIN, **d}
    seed = out["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _SpecError(dom, "seed", f"a non-negative integer, got {seed!r}")
    n = out["dialogues"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise _SpecError(dom, "dialogues", f"an integer >= 1, got {n!r}")
    t = out["turns"]
    lo_hi = [t, t] if isinstance(t, int) and not isinstance(t, bool) else t
    if (not isinstance(lo_hi, list) or len(lo_hi) != 2
            or any(isinstance(x, bool) or not isinstance(x, int) for x in lo_hi)
            or not 2 <= lo_hi[0] <= lo_hi[1] <= 4):
        raise _SpecError(dom, "turns", f"an integer in 2..4 or a range [lo, hi] within 2..4, got {t!r}")
    out["turns"] = list(lo_hi)
    spec = out.get("spec") or {}
    if not isinstance(spec, dict):
        raise _SpecError(dom, "spec", f"a mapping of world sizes and plant shares, got {spec!r:.60}")
    for k in sorted(spec):
        if k not in WORLD_KEYS and k not in DEFAULT_PLANT:
            raise _SpecError(dom, f"spec.{k}", f"unknown key (known: {', '.join(WORLD_KEYS + tuple(DEFAULT_PLANT))})")
    plant = {**DEFAULT_PLANT, **{k: v for k, v in spec.items() if k in DEFAULT_PLANT}}
    for k in SHARE_KEYS:
        v = plant[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise _SpecError(dom, f"spec.{k}", f"a share of the domain's turns within [0, 1], got {v!r}")
    v = plant["same_thread_negatives"]
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= len(_NEGATIVE):
        raise _SpecError(dom, "spec.same_thread_negatives", f"an integer in 0..{len(_NEGATIVE)}, got {v!r}")
    world = {k: v for k, v in spec.items() if k in WORLD_KEYS}
    try:
        check_spec(world)
    except ConfigError as e:
        key = next((k for k in WORLD_KEYS if f"'{k}'" in str(e)), "spec")
        raise _SpecError(dom, key if key == "spec" else f"spec.{key}", str(e)) from None
    out["spec"] = {**world, **plant}
    return out


# ---- one domain -------------------------------------------------------------------------------


@dataclass
class _Doc:
    doc_id: str  # "" until numbered (opaque ids are given at the end)
    title: str
    text: str
    kind: str  # world | gold_note | same_thread | negative | near_duplicate | other_chunk
    facts: set = field(default_factory=set)  # {(id(subject), rel)}
    turn: int = -1  # global index of the turn it was planted for / is the note of
    parts: list = field(default_factory=list)  # a gold note's fact sentences
    tmpl: str = ""


@dataclass
class _Turn:
    subject: Entity
    rel: str
    value: str
    question: str
    standalone: str
    answer: str
    dialogue: int
    index: int  # within the dialogue, from 0
    g: int  # within the domain, from 0
    fact: tuple = ()
    gold: list = field(default_factory=list)  # _Docs
    negatives: list = field(default_factory=list)


def _plan(topic: Entity, n: int, rng: np.random.Generator) -> list[tuple[Entity, str, str]] | None:
    """(subject, relation, question) of each turn of a dialogue about ``topic``, or None when the
    topic has no usable hop."""
    facts = list(_FACTS[topic.kind])
    order = [facts[i] for i in rng.permutation(len(facts))]
    ents = [r for r in order if r in topic.rel]
    if not ents:
        return None
    # the hop is the answer of turn 2, so "that <kind>" in turn 3 names an entity already mentioned
    hop_rel = ents[0]
    order = [r for r in order if r != hop_rel]
    order.insert(1, hop_rel)
    hop = topic.rel[hop_rel]
    hop_facts = [r for r in _YEAR_FIRST if r in _FACTS.get(hop.kind, ()) and hop.rel.get(r) is not topic]
    if not hop_facts:
        return None
    ref = _ref(topic)
    plan = [(topic, order[0], _question(order[0], topic, _name(topic))),
            (topic, order[1], _question(order[1], topic, ref)),
            (hop, hop_facts[0], _question(hop_facts[0], hop, f"that {hop.kind}"))]
    if len(hop_facts) > 1:
        plan.append((hop, hop_facts[1], _question(hop_facts[1], hop, "that person" if hop.kind == "person" else "it")))
    else:
        back = "the person we started with" if topic.kind == "person" else f"the {topic.kind} we started with"
        plan.append((topic, order[2], _question(order[2], topic, back)))
    return plan[:n]


def _fair(plan, used: set[str]) -> bool:
    """Values distinct and not inside one another or a subject's name; nothing shared with
    another dialogue of the domain (subjects and answers)."""
    values = [_value(e, r) for e, r, _ in plan]
    names = {e.name for e, _, _ in plan}
    if len(set(values)) < len(values) or (names | set(values)) & used:
        return False
    return not any(v in w for v in values for w in values + sorted(names) if v != w)


def _near_duplicate(text: str, protect: list[str], rng: np.random.Generator) -> str:
    """``text`` with up to two words swapped for synonyms (never inside a protected string)."""
    cands = [(a, b) for a, b in _SYNONYMS if re.search(rf"\b{a}\b", text)]
    cands = [cands[i] for i in rng.permutation(len(cands))]
    out, done = text, 0
    for a, b in cands:
        new = re.sub(rf"\b{a}\b", b, out, count=1)
        if all(p in new for p in protect) and is_copy(new, [text]).is_copy:
            out, done = new, done + 1
        if done == 2:
            break
    if done == 0:
        out = text + " (Mirror copy.)"
    return out


def _domain(dom: str, d: dict, benchmark: str) -> tuple[list[TurnTask], list[Passage], dict]:
    d = check_domain(dom, d)
    spec = d["spec"]
    world: World = build_world({**{k: spec[k] for k in WORLD_KEYS if k in spec}, "name": dom,
                                "questions": {"2": 0, "3": 0, "4": 0}}, d["seed"])
    rng = np.random.default_rng([d["seed"], 2027])
    core = [e for e in world.entities if e.core]
    topics = [e for e in core if e.kind in ("person", *ORGS, *WORKS)]
    wdoc = {id(e): _Doc(e.doc_id, e.name, e.text, "world", {(id(e), r) for r in _FACTS.get(e.kind, ())})
            for e in world.entities}
    docs: list[_Doc] = []  # planted
    turns: list[_Turn] = []
    used: set[str] = set()
    dialogues: list[list[_Turn]] = []
    # topics of different kinds in turn (people, organisations, works), as the mtrag view
    by_cat = [[e for e in topics if _cat(e) == c] for c in ("person", "org", "work")]
    for c in range(d["dialogues"]):
        n = int(rng.integers(d["turns"][0], d["turns"][1] + 1))
        own = by_cat[c % 3]
        rest = [e for e in topics if e not in own]
        order = [own[i] for i in rng.permutation(len(own))] + [rest[i] for i in rng.permutation(len(rest))]
        for topic in order:
            plan = _plan(topic, n, rng)
            if plan is not None and _fair(plan, used):
                break
        else:
            raise ConfigError(f"miniworld_recor, domain {dom}: only {c} dialogues with distinct subjects and answers "
                              f"fit this world ({d['dialogues']} asked); enlarge the world (spec.n_people, ...)")
        used |= {e.name for e, _, _ in plan} | {_value(e, r) for e, r, _ in plan}
        dia = []
        for i, (e, rel, q) in enumerate(plan):
            v = _value(e, rel)
            t = _Turn(e, rel, v, q, _question(rel, e, _name(e)), _say(rel, e, v)[0], c, i, len(turns), (id(e), rel))
            turns.append(t)
            dia.append(t)
        dialogues.append(dia)

    # clean turns: no answer-bearing document outside their qrels (every "no gold" context of
    # theirs is a true miss)
    clean = {int(i) for i in rng.permutation(len(turns))[:int(spec["clean_turns"] * len(turns) + 0.5)]}

    def plant(doc: _Doc) -> _Doc:
        docs.append(doc)
        return doc

    def pick(share: float, distinct: bool = False) -> list[int]:
        """round(share * turns) turns at random, never a clean turn; ``distinct``: of distinct
        subjects, none the subject of a clean turn (fewer when the domain has too few)."""
        k, out, seen = int(share * len(turns) + 0.5), [], {id(turns[i].subject) for i in clean} if distinct else set()
        for i in rng.permutation(len(turns)):
            if len(out) == k:
                break
            if int(i) not in clean and id(turns[i].subject) not in seen:
                if distinct:
                    seen.add(id(turns[i].subject))
                out.append(int(i))
        return sorted(out)

    # gold: the subject's world passage and the turn's own note (the notes of a dialogue use
    # different templates, so that one is never a near copy of another)
    variant = {}
    for dia in dialogues:
        first = int(rng.integers(len(_NOTE)))
        for t in dia:
            variant[t.g] = int(rng.integers(1, 4))
            note = _Doc("", f"{t.subject.name}: {_ASPECT[t.rel]}", "", "gold_note", {t.fact}, t.g,
                        [_say(t.rel, t.subject, t.value)[variant[t.g]]], _NOTE[(first + t.index) % len(_NOTE)])
            t.gold = [wdoc[id(t.subject)], plant(note)]
    # (e) another turn's note also states this turn's fact (worded unlike its own note): the
    # nearest turn about the same subject, else the turn before (which named this subject)
    for j in pick(spec["other_turn_gold"]):
        t = turns[j]
        dia = dialogues[t.dialogue]
        same = sorted((abs(x.index - t.index), x.index) for x in dia if x is not t and x.subject is t.subject)
        src = dia[same[0][1]] if same else dia[t.index - 1]
        note = src.gold[1]
        note.facts.add(t.fact)
        note.parts.append(_say(t.rel, t.subject, t.value)[1 + (variant[t.g] % 3)])
    for t in turns:
        note = t.gold[1]
        note.text = note.tmpl.format(facts=" ".join(note.parts))
    # (a) same-thread negatives: on the asked fact, without its value
    thread = {c: f"Forum thread: questions about {dia[0].subject.name}" for c, dia in enumerate(dialogues)}
    for g, t in enumerate(turns):
        for k in rng.permutation(len(_NEGATIVE))[:spec["same_thread_negatives"]]:
            trait = _TRAIT[_cat(t.subject)][int(rng.integers(4))]
            text = _NEGATIVE[int(k)].format(about=_about(t.rel, t.subject), s=t.subject.name, trait=trait,
                                            kind=t.subject.kind)
            t.negatives.append(plant(_Doc("", thread[t.dialogue], text, "negative", set(), g)))
    # (b) a same-thread reply stating the answer
    for g in pick(spec["answer_bearing_negatives"]):
        t = turns[g]
        fact = _say(t.rel, t.subject, t.value)[int(rng.integers(4))]
        text = _REPLY[int(rng.integers(len(_REPLY)))].format(about=_about(t.rel, t.subject), fact=fact)
        plant(_Doc("", thread[t.dialogue], text, "same_thread", {t.fact}, g))
    # (c) a near-verbatim copy of the subject's world passage under another id
    for g in pick(spec["near_duplicates"], distinct=True):  # one copy per passage
        t = turns[g]
        src = wdoc[id(t.subject)]
        text = _near_duplicate(src.text, [t.subject.name, *(x.value for x in turns if x.subject is t.subject)], rng)
        plant(_Doc("", src.title, text, "near_duplicate", set(src.facts), g))
    # (d) another chunk of the subject's page, stating the answer
    chunks: Counter = Counter()
    for g in pick(spec["chunks"]):
        t = turns[g]
        src = wdoc[id(t.subject)]
        chunks[src.doc_id] += 1
        fact = _say(t.rel, t.subject, t.value)[int(rng.integers(1, 4))]
        text = _CHUNK[int(rng.integers(len(_CHUNK)))].format(s=t.subject.name, fact=fact, aspect=_ASPECT[t.rel],
                                                             aspect_cap=_ASPECT[t.rel].capitalize())
        plant(_Doc(f"{src.doc_id}#chunk{chunks[src.doc_id]}", src.title, text, "other_chunk", {t.fact}, g))

    # opaque ids: planted documents (except chunks) numbered after the world, in random order
    loose = [x for x in docs if not x.doc_id]
    base = len(world.passages)
    for i, k in enumerate(rng.permutation(len(loose))):
        loose[int(k)].doc_id = f"{dom}/{base + i}"

    def key(doc_id: str):
        page_, _, chunk = doc_id.split("/", 1)[1].partition("#chunk")
        return int(page_), int(chunk or 0)

    passages = [Passage(p.doc_id, p.title, p.text, dom) for p in world.passages]
    passages += [Passage(x.doc_id, x.title, x.text, dom) for x in docs]
    passages.sort(key=lambda p: key(p.doc_id))
    cls = {"same_thread": "same_thread", "near_duplicate": "near_duplicate", "other_chunk": "other_chunk",
           "gold_note": "other_turn_gold"}

    tasks = []
    for c, dia in enumerate(dialogues):
        conv = f"dlg{c}"
        history: list[dict] = []
        for t in dia:
            tid = t.index + 1
            gold = {x.doc_id for x in t.gold}
            unjudged = {x.doc_id: cls[x.kind] for x in docs if t.fact in x.facts and x.doc_id not in gold}
            for x in t.negatives:  # the plant's own promise, checked on every build
                if t.value in x.text:
                    raise RuntimeError(f"miniworld_recor: negative {x.doc_id} names the answer '{t.value}'")
            official = (NO_HISTORY if not history else
                        "\n".join(f"Q: {history[i]['text']}\nA: {history[i + 1]['text']}"
                                  for i in range(0, len(history), 2)))
            tasks.append(TurnTask(
                task_id=task_id(dom, conv, tid), benchmark=benchmark, conversation_id=f"{dom}/{conv}", turn=tid,
                history=list(history), question=t.question, reference_answers=[t.answer],
                gold_docs={x: 1 for x in sorted(gold, key=key)}, rewrite=None, contexts=[],
                labels={"domain": dom, "split": SPLIT, "turn_id": tid, "topic_id": topic_id(conv, tid),
                        "official_history": official, "has_gold": True, "n_turns": len(dia),
                        "answer": t.value, "standalone_query": t.standalone, "standalone": t.index == 0,
                        "subject": t.subject.name, "fact": t.rel,
                        "unjudged_answer_docs": dict(sorted(unjudged.items(), key=lambda kv: key(kv[0]))),
                        "unjudged_negative_docs": sorted((x.doc_id for x in t.negatives), key=key)}))
            history += [{"role": "user", "text": t.question}, {"role": "assistant", "text": t.answer}]
    return tasks, passages, _count(tasks, docs, len(world.passages))


def _count(tasks: list[TurnTask], docs: list[_Doc], n_world: int) -> dict:
    kinds = Counter(x.kind for x in docs)
    with_class = {c: sum(c in t.labels["unjudged_answer_docs"].values() for t in tasks) for c in CLASSES}
    return {
        "dialogues": len({t.conversation_id for t in tasks}), "turns": len(tasks),
        "turns_by_position": {str(k): v for k, v in sorted(Counter(t.turn for t in tasks).items())},
        "gold_qrels": sum(len(t.gold_docs) for t in tasks),
        "gold_documents": len({d for t in tasks for d in t.gold_docs}),
        "documents": n_world + len(docs), "world_passages": n_world,
        "planted": {"same_thread": kinds["same_thread"], "near_duplicate": kinds["near_duplicate"],
                    "other_chunk": kinds["other_chunk"], "negative": kinds["negative"],
                    "gold_note": kinds["gold_note"],
                    "gold_note_answering_another_turn": sum(len(x.facts) > 1 for x in docs if x.kind == "gold_note")},
        "turns_with": with_class,
        "turns_with_unjudged_answer": sum(bool(t.labels["unjudged_answer_docs"]) for t in tasks),
        "turns_without_unjudged_answer": sum(not t.labels["unjudged_answer_docs"] for t in tasks),
        "unjudged_answer_labels": sum(len(t.labels["unjudged_answer_docs"]) for t in tasks),
        "unjudged_negative_labels": sum(len(t.labels["unjudged_negative_docs"]) for t in tasks),
    }


def render_recor(domains: dict[str, dict], benchmark: str) -> tuple[list[TurnTask], list[Passage], dict]:
    """``domains``: name -> {seed, spec (world sizes and plant shares), dialogues, turns}.
    Returns (tasks of every domain, passages of every domain, report with ``per_domain``
    counts); doc ids are prefixed with the domain and ``Passage.source`` is the domain."""
    if not isinstance(domains, dict) or not domains:
        raise ConfigError("miniworld_recor: 'domains' must be a mapping of domain name -> "
                          "{seed, spec, dialogues, turns}")
    tasks, passages, per = [], [], {}
    for dom, d in domains.items():
        if not isinstance(dom, str) or not re.fullmatch(r"[\w.-]+", dom):
            raise ConfigError(f"miniworld_recor: domain name {dom!r} must be a word (letters, digits, . _ -)")
        t, p, r = _domain(dom, d, benchmark)
        tasks += t
        passages += p
        per[dom] = r
    total = {k: sum(r[k] for r in per.values()) for k in
             ("dialogues", "turns", "gold_qrels", "gold_documents", "documents", "turns_with_unjudged_answer",
              "turns_without_unjudged_answer", "unjudged_answer_labels", "unjudged_negative_labels")}
    total["planted"] = dict(sum((Counter(r["planted"]) for r in per.values()), Counter()))
    total["turns_with"] = {c: sum(r["turns_with"][c] for r in per.values()) for c in CLASSES}
    report = {"tasks": len(tasks), "conversations": total["dialogues"], **total, "domains": list(per),
              "per_domain": per}
    return tasks, passages, report
