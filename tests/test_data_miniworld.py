"""The fictional mini world: determinism, sizes, and that every question is fair and unique."""

import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from convrag.data.hipporag import write_dataset
from convrag.data.miniworld import DEFAULT_SPEC, build_world, generate_world
from convrag.errors import ConfigError
from convrag.sharding import check_shards

SMALL = {"n_people": 36, "n_places": 14, "n_organisations": 12, "n_works": 14, "n_distractors": 20,
         "questions": {"2": 2, "3": 2, "4": 2}, "comparison_share": 0.25}
YEAR = re.compile(r"\b(1[6-9]\d\d|20\d\d)\b")


def _has(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def test_same_seed_byte_identical_other_seed_different(tmp_path):
    for d, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_dataset(*generate_world(DEFAULT_SPEC, seed), tmp_path / d)
    for f in ("questions.jsonl", "corpus.jsonl"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
        assert (tmp_path / "a" / f).read_bytes() != (tmp_path / "c" / f).read_bytes()


def test_default_spec_sizes_and_speed():
    t = time.perf_counter()
    qs, ps = generate_world(DEFAULT_SPEC, 0)
    assert time.perf_counter() - t < 1.0
    sizes = sum(DEFAULT_SPEC[k] for k in ("n_people", "n_places", "n_organisations", "n_works", "n_distractors"))
    assert len(ps) == sizes == 200 and len(qs) == 30
    assert Counter(q.hops for q in qs) == {2: 12, 3: 10, 4: 8}
    assert Counter(q.type for q in qs) == {"bridge": 24, "comparison": 6}  # half of the 2-hop questions
    assert all(q.dataset == "miniworld" and q.qid.startswith("miniworld-") for q in qs)


@pytest.mark.parametrize("seed", [0, 1, 13, 99])
@pytest.mark.parametrize("spec", [DEFAULT_SPEC, SMALL], ids=["default", "small"])
def test_every_question_is_fair(spec, seed):
    w = build_world(spec, seed)
    docs = {p.doc_id: p for p in w.passages}
    assert len(docs) == len(w.passages) and len({p.title for p in w.passages}) == len(w.passages)
    assert len({q.qid for q in w.questions}) == len({q.question for q in w.questions}) == len(w.questions)
    kind_of = {e.name: e.kind for e in w.entities}
    for q in w.questions:
        texts = [docs[d].text for d in q.supporting_doc_ids]
        assert len(texts) == q.hops == len(set(q.supporting_doc_ids)) and q.hops >= 2
        links = w.links[q.qid]
        for text, needed in zip(texts, links):  # each passage states the hop's entity and the link
            assert all(_has(text, s) for s in needed), (q.question, needed, text)
        ans = q.answers[0]
        if q.type == "bridge":
            assert links[-1][1] == ans and _has(texts[-1], ans)
            assert not any(_has(t, ans) for t in texts[:-1]) and not _has(q.question, ans)
            for text, (_, nxt) in zip(texts, links):  # exactly one candidate of the right kind
                if YEAR.fullmatch(nxt):
                    assert YEAR.findall(text) == [nxt]
                else:
                    same_kind = [n for n, k in kind_of.items() if k == kind_of[nxt] and _has(text, n)]
                    assert same_kind == [nxt], (q.question, text)
        else:
            (a, ya), (b, yb) = links
            assert ya != yb and ans == (a if int(ya) < int(yb) else b) and _has(q.question, ans)
        assert 30 <= min(len(t.split()) for t in texts) and max(len(t.split()) for t in texts) <= 60


def test_names_and_answers_are_unambiguous():
    w = build_world(DEFAULT_SPEC, 5)
    norm = [re.sub(r"^(the|a|an) ", "", e.name.lower()) for e in w.entities]
    assert len(set(norm)) == len(norm)
    surnames = [e.name.split()[-1] for e in w.entities if e.kind == "person"]
    assert len(set(surnames)) == len(surnames)
    names = Counter(e.name for e in w.entities)
    for q in w.questions:
        assert len(q.answers) == len(set(q.answers))
        assert YEAR.fullmatch(q.answers[0]) or names[q.answers[0]] == 1
        if q.answers[0] in names and any(e.kind == "person" and e.name == q.answers[0] for e in w.entities):
            assert q.answers == [q.answers[0], q.answers[0].split()[-1]]  # full name + surname
        if any(e.kind == "country" and e.name == q.answers[0] for e in w.entities):
            assert len(q.answers) == 2 and q.answers[1].endswith(" of " + q.answers[0])


def test_passage_lengths_across_seeds():
    for seed in range(10):
        _, ps = generate_world(SMALL, seed)
        counts = [len(p.text.split()) for p in ps]
        assert 30 <= min(counts) and max(counts) <= 60


def test_decomposition_is_a_fair_shard_set():
    qs, _ = generate_world(DEFAULT_SPEC, 2)
    for q in qs:
        assert len(q.decomposition) == (q.hops if q.type == "bridge" else 3)
        assert check_shards(q, q.decomposition)["passed"], q


def test_default_config_spec_is_feasible():
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    c = cfg["corpora"]["miniworld"]
    qs, ps = generate_world(c["spec"], c["seed"])
    want = {int(k): v for k, v in c["spec"]["questions"].items()}
    assert Counter(q.hops for q in qs) == {k: v for k, v in want.items() if v}
    assert len(ps) == sum(c["spec"][k] for k in ("n_people", "n_places", "n_organisations", "n_works", "n_distractors"))


def test_bad_specs_rejected():
    with pytest.raises(ConfigError, match="unknown key"):
        generate_world({"n_persons": 3}, 0)
    with pytest.raises(ConfigError, match="'n_people' must be an integer >= 3"):
        generate_world({"n_people": -1}, 0)
    with pytest.raises(ConfigError, match=r"questions\['4'\] asks for 500"):
        generate_world({**SMALL, "questions": {"4": 500}}, 0)
    with pytest.raises(ConfigError, match="comparison_share"):
        generate_world({**SMALL, "comparison_share": 2}, 0)
    assert generate_world({**SMALL, "name": "tiny"}, 0)[1][0].doc_id == "tiny/0"
