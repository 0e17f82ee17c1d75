"""The mini world as human-conversation benchmarks: MTRAG-UN-like conversations whose turns are
answerable, partially answerable, unanswerable or underspecified, standalone or not.

Why generated: the embedded default must run every study offline on data the project makes
itself, and a tiny model must not answer from memory. Each domain is its own seeded mini
world (``convrag.data.miniworld``), so a domain is a separate corpus, as in MTRAG-UN. Every
fact a turn asks for is stated in exactly one passage of that world, so gold passages and
reference answers are exact.

One conversation per topic entity (a person, an organisation or a work), in this order:
1. ANSWERABLE, standalone: a fact of the topic, named in full ("In which city was Tolo Vanes
   born?"); gold: the topic's passage.
2. ANSWERABLE, non-standalone follow-up: another fact of the topic, by reference ("In which
   year was that person born?").
3. ANSWERABLE, non-standalone follow-up that moves to a related entity ("In which year was
   that university founded?"); gold: the related entity's passage.
4. UNANSWERABLE follow-up: a fact no passage states ("What is that person's favourite food?");
   no gold; the reference says the documents do not tell.
5. PARTIAL: one answerable and one unanswerable part; gold: the topic's passage.
6. UNDERSPECIFIED: a question about "the <kind>" when several entities of that kind exist and
   none was named; no gold; the reference asks which one is meant.
7. ANSWERABLE, multi-turn type Clarification: the user names the entity the previous turn
   asked about; gold: its passage.
Every turn is one task (its history: the earlier turns with their reference answers); each
carries the standalone rewrite a benchmark ships, its labels (answerability, multi_turn,
question_type, standalone, domain) and graded qrels (relevance 1).
"""

from __future__ import annotations

import numpy as np

from convrag.data.miniworld import ORGS, WORK, WORKS, Entity, build_world
from convrag.errors import ConfigError
from convrag.records import Passage, TurnTask

DEFAULT_TURNS_SPEC = {"conversations": 3}
_TOPIC_KINDS = ("person", *ORGS, *WORKS)
_FACTS = {"person": ("born_in", "born_year", "studied"), **{k: ("founder", "home", "founded") for k in ORGS},
          **{k: ("creator", "publisher", "released") for k in WORKS}}
_ENTITY_RELS = {"born_in", "studied", "founder", "home", "creator", "publisher"}
_UNKNOWN = {"person": ("favourite food", "What is {ref}'s favourite food?"),
            "org": ("number of employees", "How many employees does {ref} have?"),
            "work": ("running time", "How long is {ref}?")}


def _ref(e: Entity) -> str:
    return "that person" if e.kind == "person" else f"that {e.kind}"


def _name(e: Entity) -> str:
    return f'the {e.kind} "{e.name}"' if e.kind in WORKS else e.name


def _question(rel: str, e: Entity, x: str) -> str:
    w = WORK.get(e.kind, {})
    based = {"company": "headquartered", "university": "located", "orchestra": "based"}.get(e.kind, "based")
    return {
        "creator": f"Who {w.get('made')} {x}?", "publisher": f"Which company {w.get('pub')} {x}?",
        "released": f"In which year was {x} {w.get('out')}?", "born_in": f"In which city was {x} born?",
        "born_year": f"In which year was {x} born?", "studied": f"Which university did {x} attend?",
        "founder": f"Who founded {x}?", "home": f"In which city is {x} {based}?",
        "founded": f"In which year was {x} founded?", "country": f"In which country is {x}?",
    }[rel]


def _fact(rel: str, e: Entity) -> str:
    """The value of a fact and a one-sentence answer stating it."""
    w = WORK.get(e.kind, {})
    v = e.rel[rel].name if rel in _ENTITY_RELS else str(e.year)
    return v, {
        "creator": f"{e.name} was {w.get('made')} by {v}.", "publisher": f"{e.name} was {w.get('pub')} by {v}.",
        "released": f"{e.name} was {w.get('out')} in {v}.", "born_in": f"{e.name} was born in {v}.",
        "born_year": f"{e.name} was born in {v}.", "studied": f"{e.name} studied at {v}.",
        "founder": f"{e.name} was founded by {v}.", "home": f"{e.name} is based in {v}.",
        "founded": f"{e.name} was founded in {v}.",
    }[rel]


def _unknown(e: Entity) -> tuple[str, str]:
    what, q = _UNKNOWN["person" if e.kind == "person" else "org" if e.kind in ORGS else "work"]
    return what, q


def _conversation(topic: Entity, others: list[Entity], rng: np.random.Generator) -> list[dict]:
    facts = list(_FACTS[topic.kind])
    order = [facts[i] for i in rng.permutation(len(facts))]
    ent_facts = [r for r in order if r in _ENTITY_RELS and topic.rel.get(r) is not None]
    first, second = order[0], order[1]
    hop_rel = next((r for r in ent_facts if r not in (first,)), ent_facts[0])
    hop = topic.rel[hop_rel]
    hop_fact = next(r for r in _FACTS.get(hop.kind, ("founded",)) if r == "founded" or r in ("born_year", "released"))
    what, unknown_q = _unknown(topic)
    v1, a1 = _fact(first, topic)
    v2, a2 = _fact(second, topic)
    v3, a3 = _fact(hop_fact, hop)
    ref = _ref(topic)
    turns = [
        dict(q=_question(first, topic, _name(topic)), a=a1, rewrite=_question(first, topic, _name(topic)),
             answerability="ANSWERABLE", multi_turn="N/A", standalone=True, gold=[topic], value=v1),
        dict(q=_question(second, topic, ref), a=a2, rewrite=_question(second, topic, _name(topic)),
             answerability="ANSWERABLE", multi_turn="Follow-up", standalone=False, gold=[topic], value=v2),
        dict(q=_question(hop_fact, hop, f"that {hop.kind}"), a=a3, rewrite=_question(hop_fact, hop, _name(hop)),
             answerability="ANSWERABLE", multi_turn="Follow-up", standalone=False, gold=[hop], value=v3),
        dict(q=unknown_q.format(ref=ref), a=f"I'm sorry, the documents do not say anything about the {what} of "
                                            f"{topic.name}.",
             rewrite=unknown_q.format(ref=_name(topic)), answerability="UNANSWERABLE", multi_turn="Follow-up",
             standalone=False, gold=[], value=None),
    ]
    # underspecified: a kind with several entities, none of them named so far
    named = {id(topic), id(hop)}
    kinds = [k for k in ("orchestra", "university", "company", "novel", "film", "album")
             if len([o for o in others if o.kind == k and id(o) not in named]) >= 2]
    if kinds:
        kind = kinds[int(rng.integers(len(kinds)))]
        cands = [o for o in others if o.kind == kind and id(o) not in named]
        a, b = cands[int(rng.integers(len(cands)))], None
        b = next(o for o in cands if o is not a)
        fact = "founded" if kind in ORGS else "released"
        under_q = _question(fact, a, f"the {kind}")
        turns.append(dict(q=under_q, a=f"There are several {kind}s in the documents, for example {a.name} and "
                                         f"{b.name}. Which {kind} do you mean?",
                          rewrite=under_q, answerability="UNDERSPECIFIED", multi_turn="Follow-up", standalone=False,
                          gold=[], value=None))
        vc, ac = _fact(fact, a)
        turns.append(dict(q=f"I mean {_name(a)}.", a=ac, rewrite=_question(fact, a, _name(a)),
                          answerability="ANSWERABLE", multi_turn="Clarification", standalone=False, gold=[a], value=vc))
    v5, a5 = _fact(first, topic)
    part_q = _question(first, topic, _name(topic)).rstrip("?") + f", and what is its {what}?"
    turns.append(dict(q=part_q, a=f"{a5} The documents do not mention the {what}.", rewrite=part_q,
                      answerability="PARTIAL", multi_turn="N/A", standalone=True, gold=[topic], value=v5))
    return turns


def render_mtrag(domains: dict[str, dict], benchmark: str) -> tuple[list[TurnTask], list[Passage]]:
    """``domains``: name -> {seed, spec (miniworld sizes), conversations}. Returns the tasks of
    every domain and the passages of every domain's world (``Passage.source`` = the domain;
    doc ids prefixed with the domain, so the corpora never collide)."""
    tasks, passages = [], []
    for dom, d in domains.items():
        unknown = set(d) - {"seed", "spec", "conversations"}
        if unknown:
            raise ConfigError(f"mtrag view, domain {dom}: unknown key(s) {sorted(unknown)}")
        world = build_world({**(d.get("spec") or {}), "name": dom, "questions": {"2": 0, "3": 0, "4": 0}},
                            d.get("seed", 13))
        passages += [Passage(p.doc_id, p.title, p.text, dom) for p in world.passages]
        text_of = {p.doc_id: p for p in world.passages}
        rng = np.random.default_rng(d.get("seed", 13) + 1)
        core = [e for e in world.entities if e.core]
        topics = [e for e in core if e.kind in _TOPIC_KINDS]
        n = d.get("conversations", DEFAULT_TURNS_SPEC["conversations"])
        if n > len(topics):
            raise ConfigError(f"mtrag view, domain {dom}: {n} conversations but only {len(topics)} topic entities")
        # topics of different kinds in turn: people, organisations, works
        by_kind = [[e for e in topics if (e.kind == "person") == (k == 0) and (e.kind in WORKS) == (k == 2)]
                   for k in range(3)]
        picked = []
        for i in range(n):
            pool = [e for e in by_kind[i % 3] if e not in picked] or [e for e in topics if e not in picked]
            picked.append(pool[int(rng.integers(len(pool)))])
        for c, topic in enumerate(picked):
            conv_id = f"{dom}-c{c}"
            history: list[dict] = []
            for t, turn in enumerate(_conversation(topic, core, rng), start=1):
                tasks.append(TurnTask(
                    task_id=f"{conv_id}<::>{t}", benchmark=benchmark, conversation_id=conv_id, turn=t,
                    history=list(history), question=turn["q"], reference_answers=[turn["a"]],
                    gold_docs={e.doc_id: 1 for e in turn["gold"]}, rewrite=turn["rewrite"],
                    # the reference setting's passages: the gold ones, else the topic's own
                    # passage (on topic, without the answer), as MTRAG-UN ships for its
                    # unanswerable and underspecified tasks
                    contexts=[{"doc_id": x.doc_id, "title": text_of[x.doc_id].title, "text": text_of[x.doc_id].text}
                              for x in (turn["gold"] or [topic])],
                    labels={"answerability": turn["answerability"], "multi_turn": turn["multi_turn"],
                            "question_type": "Factoid", "standalone": turn["standalone"], "domain": dom,
                            "first_turn": t == 1}))
                history += [{"role": "user", "text": turn["q"]}, {"role": "assistant", "text": turn["a"]}]
    return tasks, passages
