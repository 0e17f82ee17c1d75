"""RECOR / RETECO track 2 loader (convrag.data.recor): the organisers' pilot sample in
../shared/data/recor_pilot (counts from SOURCE.md and recomputed here from the raw files, history,
official_history, gold), the official release format on small hand-made
``track2_recor/<domain>/`` folders (two domains sharing a conversation id), malformed input naming
file and line, ``official_query`` and the registered ``recor`` benchmark loader's config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from convrag.data.benchmarks import benchmark_loader
from convrag.data.recor import (
    DOMAINS,
    load_recor,
    load_recor_pilot,
    official_query,
    pilot_corpus,
    read_documents,
)
from convrag.errors import ConfigError, DataError
from convrag.records import TurnTask


@pytest.fixture
def pilot(shared_data) -> Path:
    return shared_data / "recor_pilot"


def _pilot_files(d: Path) -> tuple[Path, Path, Path]:
    return d / "benchmark.jsonl", d / "documents.jsonl", d / "qrels.txt"


def _raw(d: Path):
    """The pilot read independently of the loader: conversations, qrels {(conv, turn): {doc}}, doc ids."""
    convs = [json.loads(x) for x in (d / "benchmark.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    qrels: dict[tuple[str, int], set[str]] = {}
    for line in (d / "qrels.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            topic, _, doc, rel = line.split()
            conv, turn = topic.split("#turn")
            assert rel == "1"
            qrels.setdefault((conv, int(turn)), set()).add(doc)
    docs = [json.loads(x)["doc_id"] for x in (d / "documents.jsonl").read_text(encoding="utf-8").splitlines() if x]
    return convs, qrels, docs


# ---- the pilot sample --------------------------------------------------------------------------


@pytest.mark.realdata
def test_pilot_counts_match_source_md_and_raw_files(pilot):
    tasks, report = load_recor_pilot(*_pilot_files(pilot))
    convs, qrels, docs = _raw(pilot)
    # SOURCE.md: 4 conversations, 13 turns, 15 documents, 32 positive qrels
    assert (report["conversations"], report["turns"], report["documents"], report["positive_qrels"]) == (4, 13, 15, 32)
    raw_counts = (len(convs), sum(len(c["turns"]) for c in convs), len(docs), sum(map(len, qrels.values())))
    assert raw_counts == (4, 13, 15, 32)
    assert len(tasks) == 13 and report["turns_with_gold"] == 13 and report["turns_without_gold"] == 0
    assert report["qrels_rows"] == 32 and report["qrels_relevance"] == {"1": 32}
    assert report["gold_doc_ids_differ_from_qrels"] == 0  # the sample's gold_doc_ids equal its qrels
    assert report["first_turn_history_not_default"] == 0 and report["later_turn_without_history"] == 0
    assert report["documents_named_by_no_turn"] == 0 and report["skipped_conversations"] == {}
    per = report["per_domain"]
    assert {d: (r["conversations"], r["turns"], r["positive_qrels"], r["documents"]) for d, r in per.items()} == {
        "law": (1, 3, 11, 4), "drones": (1, 4, 11, 4), "biology": (1, 3, 4, 3), "earth_science": (1, 3, 6, 4)}
    assert report["gold_per_turn"]["min"] == 1 and report["gold_per_turn"]["max"] == 4
    assert report["gold_per_turn"]["mean"] == round(32 / 13, 4)


@pytest.mark.realdata
def test_pilot_tasks_ids_history_gold(pilot):
    tasks, _ = load_recor_pilot(*_pilot_files(pilot), benchmark="recor_pilot")
    convs, qrels, _ = _raw(pilot)
    ids = [t.task_id for t in tasks]
    assert len(set(ids)) == len(ids) == 13
    assert ids[:3] == ["law/ex_111149_turn_1", "law/ex_111149_turn_2", "law/ex_111149_turn_3"]
    assert "biology/2_turn_1" in ids and "earth_science/5_turn_3" in ids
    by_id = {t.task_id: t for t in tasks}
    for c in convs:
        domain = c["task"]
        for i, turn in enumerate(c["turns"]):
            t = by_id[f"{domain}/{c['id']}_turn_{turn['turn_id']}"]
            assert isinstance(t, TurnTask) and t.benchmark == "recor_pilot"
            assert t.conversation_id == f"{domain}/{c['id']}" and t.turn == turn["turn_id"]
            assert t.question == turn["query"] and t.reference_answers == [turn["answer"]]
            assert t.labels["official_history"] == turn["conversation_history"]  # verbatim
            assert t.labels["domain"] == domain and t.labels["split"] == "pilot"
            assert t.labels["turn_id"] == turn["turn_id"]
            assert t.labels["topic_id"] == f"{c['id']}_turn_{turn['turn_id']}"
            assert t.labels["has_gold"] is True and t.labels["n_turns"] == len(c["turns"])
            assert t.gold_docs == {d: 1 for d in qrels[(c["id"], turn["turn_id"])]}
            expected = []
            for earlier in c["turns"][:i]:
                expected += [{"role": "user", "text": earlier["query"]},
                             {"role": "assistant", "text": earlier["answer"]}]
            assert t.history == expected
    # turn 2's history is turn 1's query and answer
    law = [json.loads(x) for x in (pilot / "benchmark.jsonl").read_text(encoding="utf-8").splitlines()][0]
    t2 = by_id["law/ex_111149_turn_2"]
    assert t2.history == [{"role": "user", "text": law["turns"][0]["query"]},
                          {"role": "assistant", "text": law["turns"][0]["answer"]}]
    assert by_id["law/ex_111149_turn_1"].labels["official_history"] == "No previous conversation."
    assert law["turns"][1]["conversation_history"].startswith("Q: ")


@pytest.mark.realdata
def test_official_query_on_pilot(pilot):
    tasks, _ = load_recor_pilot(*_pilot_files(pilot))
    convs, _, _ = _raw(pilot)
    raw = {f"{c['task']}/{c['id']}_turn_{t['turn_id']}": t for c in convs for t in c["turns"]}
    for task in tasks:
        turn = raw[task.task_id]
        assert official_query(task, with_history=False) == turn["query"]
        h = turn["conversation_history"]
        want = turn["query"] if h == "No previous conversation." else turn["query"] + "\n\nConversation History:\n" + h
        assert official_query(task, with_history=True) == want
        assert official_query(task.to_dict(), with_history=True) == want  # the JSON form of a task too
    first = [t for t in tasks if t.turn == 1]
    later = [t for t in tasks if t.turn > 1]
    assert len(first) == 4 and len(later) == 9
    assert all(official_query(t, True) == t.question for t in first)
    assert all(official_query(t, True) != t.question for t in later)


def test_official_query_string_handling():
    base = {"task_id": "x/1_turn_2", "benchmark": "b", "conversation_id": "x/1", "turn": 2, "history": [],
            "question": "Why?"}
    for hist, want in [("No previous conversation.", "Why?"), ("", "Why?"),
                       ("No previous conversation. ", "Why?\n\nConversation History:\nNo previous conversation. "),
                       ("Q: a A: b", "Why?\n\nConversation History:\nQ: a A: b")]:
        t = TurnTask(**base, labels={"official_history": hist})
        assert official_query(t, True) == want
        assert official_query(t, False) == "Why?"
    assert official_query(TurnTask(**base), True) == "Why?"  # no history label at all


@pytest.mark.realdata
def test_pilot_corpus_per_domain(pilot):
    b, d, q = _pilot_files(pilot)
    corpora = {dom: pilot_corpus(b, d, q, dom) for dom in ("law", "drones", "biology", "earth_science")}
    assert {k: len(v) for k, v in corpora.items()} == {"law": 4, "drones": 4, "biology": 3, "earth_science": 4}
    all_docs = read_documents(d)
    assert len(all_docs) == 15
    assert sorted(p.doc_id for v in corpora.values() for p in v) == sorted(p.doc_id for p in all_docs)
    raw = {json.loads(x)["doc_id"]: json.loads(x)["content"] for x in d.read_text(encoding="utf-8").splitlines() if x}
    for p in all_docs:
        assert p.title == "" and p.text == raw[p.doc_id]
    assert [p.doc_id for p in corpora["biology"]] == [
        "RGB_equivalent_for_smells/Olfactory_receptor_3.txt", "RGB_equivalent_for_smells/Sense_of_smell_5.txt",
        "RGB_equivalent_for_smells/Sense_of_smell_8.txt"]


@pytest.mark.realdata
def test_registered_loader_pilot(pilot):
    loader = benchmark_loader("recor")
    spec = {"kind": "recor", "format": "pilot",
            "local": {"benchmark": str(pilot / "benchmark.jsonl"), "documents": str(pilot / "documents.jsonl"),
                      "qrels": str(pilot / "qrels.txt")}}
    loader.check("rp", spec, "cfg.yaml")
    assert loader.domains(spec) == ["law", "drones", "biology", "earth_science"]
    raw = loader.raw_files(spec)
    assert raw == {"benchmark.jsonl": {"local": str(pilot / "benchmark.jsonl")},
                   "documents.jsonl": {"local": str(pilot / "documents.jsonl")},
                   "qrels.txt": {"local": str(pilot / "qrels.txt")}}
    files = {n: f["local"] for n, f in raw.items()}
    tasks, report = loader.tasks("rp", spec, {n: files[n] for n in loader.task_inputs(spec)})
    assert len(tasks) == 13 and report["format"] == "pilot"
    assert sum(len(loader.corpus("rp", spec, dom, files)) for dom in loader.domains(spec)) == 15
    # a domain subset keeps only its conversations; the others are counted
    sub = {**spec, "domains": ["biology"]}
    loader.check("rp", sub, "cfg.yaml")
    tasks, report = loader.tasks("rp", sub, files)
    assert [t.task_id for t in tasks] == ["biology/2_turn_1", "biology/2_turn_2", "biology/2_turn_3"]
    assert report["skipped_conversations"] == {"law": 1, "drones": 1, "earth_science": 1}


# ---- malformed pilot files -------------------------------------------------------------------


@pytest.fixture
def broken(pilot, tmp_path) -> Path:
    for name in ("benchmark.jsonl", "documents.jsonl", "qrels.txt"):
        shutil.copyfile(pilot / name, tmp_path / name)
    return tmp_path


def _replace_line(path: Path, lineno: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[lineno - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.realdata
def test_bad_json_line_names_file_and_line(broken):
    _replace_line(broken / "benchmark.jsonl", 3, '{"id": "2", "turns": [')
    with pytest.raises(DataError, match=rf"^{broken / 'benchmark.jsonl'}:3: malformed JSON line"):
        load_recor_pilot(*_pilot_files(broken))


@pytest.mark.realdata
def test_qrels_unknown_doc_names_file_and_line(broken):
    _replace_line(broken / "qrels.txt", 5, "ex_111149#turn2 0 law_ex_111149_doc_99 1")
    with pytest.raises(DataError, match=rf"^{broken / 'qrels.txt'}:5: field 'doc_id' 'law_ex_111149_doc_99'"):
        load_recor_pilot(*_pilot_files(broken))


@pytest.mark.realdata
def test_qrels_unknown_turn_names_file_and_line(broken):
    _replace_line(broken / "qrels.txt", 7, "ex_111149#turn9 0 law_ex_111149_doc_3 1")
    q = broken / "qrels.txt"
    with pytest.raises(DataError, match=rf"^{q}:7: field 'topic_id' 'ex_111149#turn9' is not a turn"):
        load_recor_pilot(*_pilot_files(broken))


@pytest.mark.realdata
def test_qrels_malformed_and_repeated_rows(broken):
    q = broken / "qrels.txt"
    _replace_line(q, 2, "ex_111149#turn1 0 law_ex_111149_doc_0")
    with pytest.raises(DataError, match=rf"^{q}:2: expected 4 columns"):
        load_recor_pilot(*_pilot_files(broken))
    _replace_line(q, 2, "ex_111149#turn1 0 law_ex_111149_doc_2 1")  # line 1's pair again
    with pytest.raises(DataError, match=rf"^{q}:2: topic 'ex_111149#turn1' and doc 'law_ex_111149_doc_2' "
                                        r"repeat line 1"):
        load_recor_pilot(*_pilot_files(broken))
    _replace_line(q, 2, "ex_111149#turn1 0 law_ex_111149_doc_0 yes")
    with pytest.raises(DataError, match=rf"^{q}:2: field 'relevance' 'yes'"):
        load_recor_pilot(*_pilot_files(broken))


@pytest.mark.realdata
def test_missing_fields_name_file_line_and_field(broken):
    b = broken / "benchmark.jsonl"
    lines = b.read_text(encoding="utf-8").splitlines()
    conv = json.loads(lines[1])
    del conv["turns"][2]["query"]
    _replace_line(b, 2, json.dumps(conv))
    with pytest.raises(DataError, match=rf"^{b}:2: conversation 'ex_3025', turn 3: field 'query' is missing"):
        load_recor_pilot(*_pilot_files(broken))
    conv = json.loads(lines[1])
    conv["turns"][1]["turn_id"] = 1
    _replace_line(b, 2, json.dumps(conv))
    with pytest.raises(DataError, match=rf"^{b}:2: conversation 'ex_3025', turn 2: field 'turn_id' 1 does not follow"):
        load_recor_pilot(*_pilot_files(broken))
    _replace_line(b, 2, lines[1])
    conv = json.loads(lines[3])
    conv["task"] = "astrology"
    _replace_line(b, 4, json.dumps(conv))
    with pytest.raises(DataError, match=rf"^{b}:4: conversation '5': field 'task' 'astrology' is not a RECOR domain"):
        load_recor_pilot(*_pilot_files(broken))
    _replace_line(b, 4, lines[3])
    d = broken / "documents.jsonl"
    _replace_line(d, 6, json.dumps({"doc_id": "x"}))
    with pytest.raises(DataError, match=rf"^{d}:6: field 'content' is missing"):
        load_recor_pilot(*_pilot_files(broken))


# ---- the official release format (hand-made) ---------------------------------------------------


def _turn(tid: int, q: str, a: str, hist: str, gold: list[str]) -> dict:
    return {"turn_id": tid, "query": q, "answer": a, "conversation_history": hist, "gold_doc_ids": gold,
            "subquestion_reasoning": "r", "subquestion_reasoning_metadata": {}}


def _official(root: Path) -> Path:
    """track2_recor/{biology,economics}/ with conversation id "2" in both (topic "2_turn_1" repeats)."""
    data = {
        "biology": {
            "convs": [{"id": "2", "task": "biology", "metadata": {}, "original_query": "oq", "original_answer": "oa",
                       "turns": [_turn(1, "What is smell?", "Chemistry.", "No previous conversation.",
                                       ["b/smell_1.txt"]),
                                 _turn(2, "And colour?", "Light.", "Q: What is smell? A: Chemistry.",
                                       ["b/colour_1.txt", "b/smell_1.txt"])]},
                      {"id": "7", "task": "biology", "metadata": {}, "original_query": "oq", "original_answer": "oa",
                       "turns": [_turn(1, "Why do cats purr?", "Comfort.", "No previous conversation.", [])]}],
            "docs": [("b/smell_1.txt", "Smell is chemistry."), ("b/colour_1.txt", "Colour is light."),
                     ("b/neg.txt", "Unrelated.")],
            "qrels": [("2_turn_1", "b/smell_1.txt"), ("2_turn_2", "b/colour_1.txt"), ("2_turn_2", "b/smell_1.txt")],
        },
        "economics": {
            "convs": [{"id": "2", "task": "economics", "metadata": {}, "original_query": "oq", "original_answer": "oa",
                       "turns": [_turn(1, "What is inflation?", "Rising prices.", "No previous conversation.",
                                       ["e/inflation.txt"])]}],
            "docs": [("e/inflation.txt", "Inflation is rising prices."), ("e/neg.txt", "Other.")],
            "qrels": [("2_turn_1", "e/inflation.txt")],
        },
    }
    for dom, v in data.items():
        folder = root / "track2_recor" / dom
        folder.mkdir(parents=True)
        (folder / "benchmark_dev.json").write_text(json.dumps(v["convs"], indent=2), encoding="utf-8")
        (folder / "documents.jsonl").write_text(
            "".join(json.dumps({"doc_id": i, "content": c}) + "\n" for i, c in v["docs"]), encoding="utf-8")
        (folder / "qrels_dev.txt").write_text("".join(f"{t}\t0\t{d}\t1\n" for t, d in v["qrels"]), encoding="utf-8")
    return root / "track2_recor"


def _spec(folder: Path, **kw) -> dict:
    return {"kind": "recor", "split": "dev", "domains": ["biology", "economics"], "local": str(folder), **kw}


def _files(loader, spec) -> dict[str, str]:
    return {n: f["local"] for n, f in loader.raw_files(spec).items()}


def test_official_format_keys_domains_apart(tmp_path):
    folder = _official(tmp_path)
    loader = benchmark_loader("recor")
    spec = _spec(folder)
    loader.check("rc", spec, "cfg.yaml")
    files = _files(loader, spec)
    assert sorted(files) == ["biology.benchmark_dev.json", "biology.documents.jsonl", "biology.qrels_dev.txt",
                             "economics.benchmark_dev.json", "economics.documents.jsonl", "economics.qrels_dev.txt"]
    assert files["economics.qrels_dev.txt"] == f"{folder}/economics/qrels_dev.txt"
    tasks, report = loader.tasks("rc", spec, files)
    by_id = {t.task_id: t for t in tasks}
    assert list(by_id) == ["biology/2_turn_1", "biology/2_turn_2", "biology/7_turn_1", "economics/2_turn_1"]
    bio, eco = by_id["biology/2_turn_1"], by_id["economics/2_turn_1"]
    assert bio.conversation_id == "biology/2" and eco.conversation_id == "economics/2"
    assert bio.labels["topic_id"] == eco.labels["topic_id"] == "2_turn_1"  # the official id repeats
    assert bio.gold_docs == {"b/smell_1.txt": 1} and eco.gold_docs == {"e/inflation.txt": 1}
    assert by_id["biology/2_turn_2"].gold_docs == {"b/colour_1.txt": 1, "b/smell_1.txt": 1}
    assert by_id["biology/2_turn_2"].history == [{"role": "user", "text": "What is smell?"},
                                                 {"role": "assistant", "text": "Chemistry."}]
    assert by_id["biology/7_turn_1"].gold_docs == {} and by_id["biology/7_turn_1"].labels["has_gold"] is False
    assert eco.labels == {"domain": "economics", "split": "dev", "turn_id": 1, "topic_id": "2_turn_1",
                          "official_history": "No previous conversation.", "has_gold": True, "n_turns": 1}
    assert official_query(by_id["biology/2_turn_2"], True) == \
        "And colour?\n\nConversation History:\nQ: What is smell? A: Chemistry."
    counts = (report["conversations"], report["turns"], report["turns_with_gold"], report["positive_qrels"])
    assert counts == (3, 4, 3, 4)
    assert report["documents"] == 5 and report["format"] == "official" and report["split"] == "dev"
    assert report["per_domain"]["biology"]["conversations"] == 2 and report["per_domain"]["economics"]["turns"] == 1
    assert report["per_domain"]["biology"]["gold_per_turn"]["turns_by_count"] == {"0": 1, "1": 1, "2": 1}
    assert report["gold_doc_ids_differ_from_qrels"] == 0 and report["task_differs_from_domain"] == 0
    # corpora, per domain
    assert [p.doc_id for p in loader.corpus("rc", spec, "economics", files)] == ["e/inflation.txt", "e/neg.txt"]
    assert len(loader.corpus("rc", spec, "biology", {"biology.documents.jsonl": files["biology.documents.jsonl"]})) == 3


def test_official_format_errors_name_file_and_line(tmp_path):
    folder = _official(tmp_path)
    q = folder / "economics" / "qrels_dev.txt"
    q.write_text("2_turn_1\t0\te/inflation.txt\t1\n2_turn_1\t0\tb/smell_1.txt\t1\n", encoding="utf-8")
    per = {d: {"benchmark": folder / d / "benchmark_dev.json", "qrels": folder / d / "qrels_dev.txt",
               "documents": folder / d / "documents.jsonl"} for d in ("biology", "economics")}
    with pytest.raises(DataError, match=rf"^{q}:2: field 'doc_id' 'b/smell_1.txt' \(topic '2_turn_1'\) is not a "
                                        rf"document of {folder / 'economics' / 'documents.jsonl'}"):
        load_recor(per)
    q.write_text("2_turn_1\t0\te/inflation.txt\t1\n\n7_turn_1\t0\te/neg.txt\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{q}:3: field 'topic_id' '7_turn_1' is not a turn of "):
        load_recor(per)  # conversation 7 is a biology conversation, not an economics one
    q.write_text("2_turn_1\t0\te/inflation.txt\t1\n", encoding="utf-8")
    # a JSON array: the error names the line where the broken turn object starts
    b = folder / "biology" / "benchmark_dev.json"
    convs = json.loads(b.read_text(encoding="utf-8"))
    del convs[0]["turns"][1]["answer"]
    text = json.dumps(convs, indent=2)
    b.write_text(text, encoding="utf-8")
    at = text.index('"turn_id": 2')
    line = text.count("\n", 0, at)  # the turn's '{' is on the line above its first key
    with pytest.raises(DataError, match=rf"^{b}:{line}: conversation '2', turn 2: field 'answer' is missing"):
        load_recor(per)
    convs[0]["turns"][1]["answer"] = "Light."
    cut = json.dumps(convs, indent=2)[:-5]  # valid conversations, then the array is cut off
    b.write_text(cut, encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{b}:{cut.count(chr(10)) + 1}: invalid JSON"):
        load_recor(per)


def test_config_checks_and_download_urls(tmp_path):
    loader = benchmark_loader("recor")
    spec = {"kind": "recor"}
    loader.check("r", spec, "cfg.yaml")
    assert loader.domains(spec) == list(DOMAINS) and len(DOMAINS) == 11
    raw = loader.raw_files(spec)
    assert len(raw) == 33
    assert raw["biology.documents.jsonl"] == {
        "url": "https://huggingface.co/datasets/DataScience-UIBK/RETECO-SemEval2027/resolve/lock/track2_recor/biology/"
               "documents.jsonl", "sha256": None}
    pinned = loader.raw_files({"kind": "recor", "split": "train", "revision": "abc123", "domains": ["law"]})
    assert pinned == {f"law.{f}": {"url": "https://huggingface.co/datasets/DataScience-UIBK/RETECO-SemEval2027/resolve/"
                                          f"abc123/track2_recor/law/{f}", "sha256": None}
                      for f in ("documents.jsonl", "benchmark_train.json", "qrels_train.txt")}
    assert loader.corpus_inputs(spec, "law") == ["law.documents.jsonl"]
    assert set(loader.task_inputs({"kind": "recor", "domains": ["law"]})) == {
        "law.documents.jsonl", "law.benchmark_dev.json", "law.qrels_dev.txt"}
    bad = [({"kind": "recor", "spilt": "dev"}, r"benchmarks\.r\.spilt': unknown key"),
           ({"kind": "recor", "split": "test"}, r"benchmarks\.r\.split': 'test' is not one of dev, train"),
           ({"kind": "recor", "domains": ["law", "cooking"]},
            r"benchmarks\.r\.domains\[1\]': unknown domain 'cooking'"),
           ({"kind": "recor", "domains": []}, r"benchmarks\.r\.domains'"),
           ({"kind": "recor", "format": "beir"}, r"benchmarks\.r\.format'"),
           ({"kind": "recor", "format": "pilot"}, r"benchmarks\.r\.local': format pilot needs"),
           ({"kind": "recor", "format": "pilot", "split": "dev",
             "local": {"benchmark": "a", "documents": "b", "qrels": "c"}}, r"benchmarks\.r\.split': not used"),
           ({"kind": "recor", "revision": ""}, r"benchmarks\.r\.revision'")]
    for s, msg in bad:
        with pytest.raises(ConfigError, match=msg):
            loader.check("r", s, "cfg.yaml")
    with pytest.raises(DataError, match="raw file 'law.qrels_dev.txt' not given"):
        loader.tasks("r", {"kind": "recor", "domains": ["law"]},
                     {"law.documents.jsonl": "x", "law.benchmark_dev.json": "y"})
