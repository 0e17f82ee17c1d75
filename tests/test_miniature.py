"""Paper configs run for real, in miniature (issue 44): `convrag miniature <study>` lays
config/miniatures/<study>.yaml over config/studies/<study>.yaml, serves the downloads from a
loopback mirror of ../shared/data and the API roles from a loopback OpenAI-compatible endpoint
(SmolLM2), and runs Snakemake; every rule of the paper config's dry-run must execute (E = P) and
the reproduction table must be built. Select with `-m miniature` (minutes each on 2 cores).

Also, without Snakemake: the mirror's cuts and Hugging Face headers, and the rule counts read
from Snakemake's output."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from convrag import miniature as mini
from convrag.data.download import download_url, mirrored

REPO = Path(__file__).resolve().parents[1]

# Rules of a paper plan that the miniature cannot run offline, and why (the test then checks that
# exactly these are missing; `convrag miniature` still exits 1 for them, as E < P).
NOT_OFFLINE: dict[str, dict[str, str]] = {}


def test_rule_counts_from_snakemake_output():
    dry = "Job stats:\njob      count\n-----  -----\ndownload_file  6\nall  1\ntotal  7\n\n[x]\nrule all:\n"
    assert mini.planned_rules(dry) == {"download_file": 6, "all": 1}
    run = "rule a:\n    output: x\nlocalrule download_file:\nlocalrule download_file:\ncheckpoint c:\n"
    assert mini.executed_rules(run) == {"a": 1, "download_file": 2, "c": 1}
    # the workflow's terminal (convrag.terminal): one line per job
    run = "[12:00:05] rule a: job 3, x=1\n[12:00:06] localrule download_file: job 4\n[12:00:09] 2 of 9 steps (22%) done\n"
    assert mini.executed_rules(run) == {"a": 1, "download_file": 1}


def test_json_cuts_fields_and_supporting_passages(tmp_path):
    """``fields`` cuts an object's record lists each by its own cut (MTRAG's human-evaluation file:
    tasks and evaluations to the same ids, documents whole); ``titles_of`` with ``supporting`` keeps
    a corpus's passages that the questions' supporting facts name (the ones the HippoRAG loader
    requires) and the first ``distractors`` other context titles of each question."""
    human = {"name": "x", "documents": [{"document_id": "d1"}, {"document_id": "d2"}],
             "tasks": [{"task_id": "t1"}, {"task_id": "t2"}, {"task_id": "t3"}],
             "evaluations": [{"task_id": t, "model_id": m} for t in ("t1", "t2", "t3") for m in ("a", "b")]}
    (tmp_path / "human.json").write_text(json.dumps(human))
    questions = [{"_id": "q1", "supporting_facts": [["B", 0], ["D", 1], ["B", 2]],
                  "context": [["A", ["a"]], ["B", ["b"]], ["C", ["c"]], ["D", ["d"]], ["E", ["e"]]]}]
    (tmp_path / "q.json").write_text(json.dumps(questions))
    (tmp_path / "c.json").write_text(json.dumps({t: t.lower() for t in "ABCDEF"}))
    served = {"h/human.json": {"path": str(tmp_path / "human.json"), "json": {"fields": {
                  "tasks": {"where": {"task_id": ["t1", "t3"]}}, "evaluations": {"where": {"task_id": ["t1", "t3"]}}}}},
              "h/q.json": {"path": str(tmp_path / "q.json")},
              "h/c.json": {"path": str(tmp_path / "c.json"), "json": {"titles_of": "h/q.json", "supporting": True,
                                                                       "distractors": 1}},
              "h/all.json": {"path": str(tmp_path / "c.json"), "json": {"titles_of": "h/q.json"}},
              "h/bad.json": {"path": str(tmp_path / "human.json"), "json": {"fields": {"nope": {"head": 1}}}}}
    mini._BYTES.clear()
    try:
        cut = json.loads(mini.served_bytes("h/human.json", served))
        assert [t["task_id"] for t in cut["tasks"]] == ["t1", "t3"] and cut["documents"] == human["documents"]
        assert [(e["task_id"], e["model_id"]) for e in cut["evaluations"]] == [("t1", "a"), ("t1", "b"),
                                                                                ("t3", "a"), ("t3", "b")]
        assert json.loads(mini.served_bytes("h/c.json", served)) == {"A": "a", "B": "b", "D": "d"}
        assert json.loads(mini.served_bytes("h/all.json", served)) == {t: t.lower() for t in "ABCDE"}
        with pytest.raises(mini.ConfigError, match="field 'nope' is not in the served object"):
            mini.served_bytes("h/bad.json", served)
    finally:
        mini._BYTES.clear()


def test_mirror_serves_cuts_with_hub_headers(tmp_path, monkeypatch):
    src = tmp_path / "q.jsonl"
    src.write_text('{"id": 1, "d": "a"}\n{"id": 2, "d": "b"}\n{"id": 3, "d": "a"}\n')
    served = {"example.org/x/q.jsonl": {"path": str(src), "lines": {"contains": ['"d": "a"'], "head": 1}},
              "huggingface.co/datasets/o/r/resolve/abc/q.jsonl": {"path": str(src), "zip": "q.jsonl"}}
    mini._BYTES.clear()
    m = mini.Mirror(served)
    base = m.start()
    try:
        monkeypatch.setenv("CONVRAG_DOWNLOAD_MIRROR", base)
        digest = hashlib.sha256(b'{"id": 1, "d": "a"}\n').hexdigest()
        out = tmp_path / "out.jsonl"
        assert mirrored("https://example.org/x/q.jsonl") == f"{base}/example.org/x/q.jsonl"
        download_url("https://example.org/x/q.jsonl", out, sha256=digest, retries=1)
        assert out.read_text() == '{"id": 1, "d": "a"}\n'
        assert json.loads(out.with_name("out.jsonl.sha256").read_text())["url"] == "https://example.org/x/q.jsonl"
        with pytest.raises(Exception, match="sha256 mismatch"):
            download_url("https://example.org/x/q.jsonl", tmp_path / "bad", sha256="0" * 64, retries=1)
        # any revision of a hub resolve path; the commit is a requested commit, else derived from the bytes
        with urllib.request.urlopen(urllib.request.Request(f"{base}/huggingface.co/datasets/o/r/resolve/main/q.jsonl",
                                                           method="HEAD")) as r:
            assert re.fullmatch(r"[0-9a-f]{40}", r.headers["X-Repo-Commit"])
            assert r.headers["ETag"].strip('"') == hashlib.sha256(mini.served_bytes(
                "huggingface.co/datasets/o/r/resolve/abc/q.jsonl", served)).hexdigest()
        import zipfile

        with urllib.request.urlopen(f"{base}/huggingface.co/datasets/o/r/resolve/{'1' * 40}/q.jsonl") as r:
            assert r.headers["X-Repo-Commit"] == "1" * 40
            assert zipfile.ZipFile(io.BytesIO(r.read())).read("q.jsonl") == src.read_bytes()
    finally:
        m.stop()
        mini._BYTES.clear()


def test_coral_stand_ins_read_by_the_project_loaders(tmp_path):
    """The coral miniature's conversions of a CORAL conversation file: the passage-corpus stand-in
    (one {ref_id, ref_string} line per golden or cited id, its text the response text the marker
    closes) passes the strict CORAL loader's corpus checks; the QReCC stand-in (turn objects in
    the release zip's member) is read by the QReCC loader with its rewrites and contexts."""
    from convrag.data.coral import load_coral
    from convrag.data.qrecc import load_qrecc

    convs = [{"conv_id": "Test_a_1", "turns": [
        {"turn_id": 1, "question": "Who is X?", "response": " x is a player.[7] he plays in y.[8][9]",
         "golden_docs_pids": [7, 8, 9]},
        {"turn_id": 2, "question": "Where?", "response": " in z.", "golden_docs_pids": [4]}]}]
    (tmp_path / "c.json").write_text(json.dumps(convs))
    (tmp_path / "r.jsonl").write_text('{"sample_id": "Test_a_1_1", "rewrite": " Who is X?"}\n'
                                      '{"sample_id": "Test_a_1_2", "rewrite": " Where does X play?"}\n')
    served = {"h/passage_corpus.json": {"path": str(tmp_path / "c.json"), "coral_passages": True},
              "h/none.json": {"path": str(tmp_path / "c.json"), "json": {"where": {"conv_id": ["Test_a"]}}},  # a list: exact ids
              "h/qrecc_data.zip": {"path": str(tmp_path / "c.json"), "coral_as_qrecc": {"rewrites": str(tmp_path / "r.jsonl")},
                                   "zip": "qrecc_train.json"}}
    mini._BYTES.clear()
    try:
        assert mini.served_bytes("h/none.json", served) == b"[]"
        corpus = mini.served_bytes("h/passage_corpus.json", served)
        assert [json.loads(ln) for ln in corpus.decode().splitlines()] == [
            {"ref_id": 4, "ref_string": "in z."}, {"ref_id": 7, "ref_string": "x is a player."},
            {"ref_id": 8, "ref_string": "he plays in y."}, {"ref_id": 9, "ref_string": "he plays in y."}]
        (tmp_path / "corpus.jsonl").write_bytes(corpus)
        tasks, report = load_coral(tmp_path / "c.json", corpus=tmp_path / "corpus.jsonl", strict=True)
        assert report["gold_missing_from_corpus"] == 0 and [c["doc_id"] for c in tasks[0].contexts] == ["7", "8", "9"]
        (tmp_path / "q.zip").write_bytes(mini.served_bytes("h/qrecc_data.zip", served))
        qtasks, passages, qreport = load_qrecc(tmp_path / "q.zip", split="train", benchmark="qrecc_train")
        assert [t.task_id for t in qtasks] == ["1_1", "1_2"] and qtasks[1].rewrite == "Where does X play?"
        assert [h["text"] for h in qtasks[1].history] == ["Who is X?", "x is a player. he plays in y."]
        assert qreport["context_length_mismatch"] == 0 and len(passages) == 2
    finally:
        mini._BYTES.clear()


def test_recor_cut_makes_release_files_the_loader_reads(tmp_path):
    """The `recor` cut turns the organisers' pilot sample (one benchmark.jsonl, space-separated
    qrels with ids `<conv>#turn<n>`) into a domain's release files (benchmark_<split>.json: a JSON
    array of the named conversations; qrels_<split>.txt: tab-separated `<conv>_turn_<n>`; every
    document), which convrag.data.recor.load_recor reads: dev and train disjoint by conversation."""
    from convrag.data.recor import load_recor

    pilot = tmp_path / "pilot"
    pilot.mkdir()
    convs = [{"id": "ex_1", "task": "Drones", "turns": [
        {"turn_id": 1, "query": "q1", "answer": "a1", "conversation_history": "No previous conversation.",
         "gold_doc_ids": ["drones_ex_1_doc_0"]},
        {"turn_id": 2, "query": "q2", "answer": "a2", "conversation_history": "Q: q1 A: a1",
         "gold_doc_ids": ["drones_ex_1_doc_0", "drones_ex_1_doc_1"]}]},
        {"id": "2", "task": "biology", "turns": [
            {"turn_id": 1, "query": "q3", "answer": "a3", "conversation_history": "No previous conversation.",
             "gold_doc_ids": ["x/y_1.txt"]}]}]
    (pilot / "benchmark.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    (pilot / "documents.jsonl").write_text("".join(json.dumps({"content": f"text {d}", "doc_id": d}) + "\n" for d in
                                                   ["drones_ex_1_doc_0", "drones_ex_1_doc_1", "x/y_1.txt"]))
    (pilot / "qrels.txt").write_text("ex_1#turn1 0 drones_ex_1_doc_0 1\nex_1#turn2 0 drones_ex_1_doc_0 1\n"
                                     "ex_1#turn2 0 drones_ex_1_doc_1 1\n2#turn1 0 x/y_1.txt 1\n")
    base = "h/track2_recor/drones/"
    served = {base + "documents.jsonl": {"path": str(pilot), "recor": {"file": "documents.jsonl"}},
              base + "benchmark_dev.json": {"path": str(pilot), "recor": {"file": "benchmark_dev.json",
                                                                          "conversations": ["ex_1"]}},
              base + "qrels_dev.txt": {"path": str(pilot), "recor": {"file": "qrels_dev.txt", "conversations": ["ex_1"]}},
              base + "benchmark_train.json": {"path": str(pilot), "recor": {"file": "benchmark_train.json",
                                                                            "conversations": ["2"]}},
              base + "qrels_train.txt": {"path": str(pilot), "recor": {"file": "qrels_train.txt", "conversations": ["2"]}},
              base + "bad.json": {"path": str(pilot), "recor": {"file": "benchmark_dev.json", "conversations": ["9"]}},
              base + "named.jsonl": {"path": str(pilot), "recor": {"file": "documents.jsonl", "conversations": ["2"]}},
              base + "one_turn.json": {"path": str(pilot), "recor": {"file": "benchmark_dev.json", "conversations": ["ex_1"],
                                                                     "turns": 1}},
              base + "one_turn.txt": {"path": str(pilot), "recor": {"file": "qrels_dev.txt", "conversations": ["ex_1"],
                                                                    "turns": 1}}}
    mini._BYTES.clear()
    try:
        assert mini.served_bytes(base + "qrels_dev.txt", served) == (
            b"ex_1_turn_1\t0\tdrones_ex_1_doc_0\t1\nex_1_turn_2\t0\tdrones_ex_1_doc_0\t1\n"
            b"ex_1_turn_2\t0\tdrones_ex_1_doc_1\t1\n")
        assert json.loads(mini.served_bytes(base + "benchmark_dev.json", served)) == convs[:1]
        with pytest.raises(Exception, match="conversation"):
            mini.served_bytes(base + "bad.json", served)
        assert [json.loads(ln)["doc_id"] for ln in mini.served_bytes(base + "named.jsonl", served).splitlines()] == [
            "x/y_1.txt"]
        assert json.loads(mini.served_bytes(base + "one_turn.json", served))[0]["turns"] == convs[0]["turns"][:1]
        assert mini.served_bytes(base + "one_turn.txt", served) == b"ex_1_turn_1\t0\tdrones_ex_1_doc_0\t1\n"
        for name in served:
            if "/bad." not in name and "/named." not in name and "/one_turn." not in name:
                (tmp_path / name.rsplit("/", 1)[1]).write_bytes(mini.served_bytes(name, served))
        files = {split: {"drones": {"benchmark": tmp_path / f"benchmark_{split}.json",
                                    "qrels": tmp_path / f"qrels_{split}.txt", "documents": tmp_path / "documents.jsonl"}}
                 for split in ("dev", "train")}
        dev, report = load_recor(files["dev"], split="dev")
        assert [t.task_id for t in dev] == ["drones/ex_1_turn_1", "drones/ex_1_turn_2"]
        assert dev[1].gold_docs == {"drones_ex_1_doc_0": 1, "drones_ex_1_doc_1": 1} and report["documents"] == 3
        train, report = load_recor(files["train"], split="train")
        assert [t.task_id for t in train] == ["drones/2_turn_1"] and report["task_differs_from_domain"] == 1
    finally:
        mini._BYTES.clear()


def test_official_prompt_stand_ins_download_pin_and_adapt(tmp_path, monkeypatch):
    """The mtrag_un miniature's stand-ins of IBM's scorer files (the project's own wording in the
    official layout) go through `convrag mtrag-un official-prompt` as the rule runs it: served at
    the official URL, checked against --sha256 (the config's evaluation.official_sha256) instead of
    the resources/sources.yaml pin, adapted, and the written file says it is a stand-in; a wrong
    sha256 stops it."""
    import argparse

    import yaml

    from convrag.studies.mtrag_un.cli import add_cli
    from convrag.studies.mtrag_un.judges import OFFICIAL, OFFICIAL_REPO
    from convrag.studies.mtrag_un.wiring import official_sha256_arg, prompt_sources

    rev = "cc5b1d481b391181b89f7ced860308482e785463"
    folder = REPO / "config/miniatures/stand-ins/mtrag_un"
    served = {f"raw.githubusercontent.com/{OFFICIAL_REPO}/{rev}/{spec.file}":
              {"path": str(folder / spec.file.rsplit("/", 1)[-1])} for spec in OFFICIAL.values()}
    digests = {spec.file: hashlib.sha256((folder / spec.file.rsplit("/", 1)[-1]).read_bytes()).hexdigest()
               for spec in OFFICIAL.values()}
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers())
    mini._BYTES.clear()
    m = mini.Mirror(served)
    monkeypatch.setenv("CONVRAG_DOWNLOAD_MIRROR", m.start())
    try:
        for judge, spec in OFFICIAL.items():
            out = tmp_path / f"{judge}.yaml"
            a = parser.parse_args(["official-prompt", "--judge", judge, "--revision", rev,
                                   "--sha256", digests[spec.file], "--out", str(out)])
            a.fn(a)
            text = out.read_text()
            assert text.startswith(f"# {judge} judge: adapted from a STAND-IN for ") and "not IBM's prompt" in text
            prompts = yaml.safe_load(text)
            assert prompts["official"]["stand_in_sha256"] == digests[spec.file] and "{response}" in prompts["user"]
        a = parser.parse_args(["official-prompt", "--judge", "idk", "--revision", rev, "--sha256", "0" * 64,
                               "--out", str(tmp_path / "bad.yaml")])
        with pytest.raises(Exception, match="sha256 mismatch"):
            a.fn(a)
    finally:
        m.stop()
        mini._BYTES.clear()
    config = {"mtrag_un": {"generation": {"prompt": "mtrag_un/reader.yaml"}, "rewrite": {},
                           "evaluation": {"prompts": {"idk": "official", "rb_llm": "official", "clarification": "official"},
                                          "official_sha256": {OFFICIAL["idk"].file: digests[OFFICIAL["idk"].file]}}}}
    assert official_sha256_arg(config, "rb_llm") == f"--sha256 {digests[OFFICIAL['rb_llm'].file]}"
    assert official_sha256_arg(config, "clarification") == ""
    # a stand-in holds the project's wording: the reproduction table counts it as such
    assert prompt_sources(config) == {"generation": "own", "rewrite": "own", "idk": "own", "rb_llm": "own",
                                      "clarification": "official"}


def test_miniature_overlays_name_the_checksums_of_what_they_serve():
    """Each overlay's sha256 values are those of the bytes its mirror serves (a changed cut or
    sample is caught here, before a run), and each served file backs a download of the config."""
    import yaml

    if not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("the shared samples are not beside the repository")
    for overlay in sorted((REPO / "config" / "miniatures").glob("*.yaml")):
        if overlay.name == "models.yaml":
            continue
        cfg = yaml.safe_load(overlay.read_text())
        served = cfg["miniature"]["serve"]
        mini._BYTES.clear()
        digests = mini.checksums(served)
        text = overlay.read_text()
        for key, digest in digests.items():
            url = "https://" + key
            if url in text:  # named under benchmarks.<b>.files: the sha256 right after it
                after = text[text.index(url):]
                named = re.search(r"sha256: ([0-9a-f]{64})", after)
                assert named and named.group(1) == digest, (overlay.name, key)
        # the mtrag_un stand-ins of IBM's scorer files: named by their repository path
        official = ((cfg.get("mtrag_un") or {}).get("evaluation") or {}).get("official_sha256") or {}
        for path, named in official.items():
            keys = [k for k in served if k.startswith("raw.githubusercontent.com/IBM/mt-rag-benchmark/")
                    and k.endswith("/" + path)]
            assert len(keys) == 1 and digests[keys[0]] == named, (overlay.name, path)
    mini._BYTES.clear()


def _run(study, tmp_path):
    out = io.StringIO()
    code = mini.run(study, cores=2, directory=tmp_path, out=out)
    text = out.getvalue()
    last = text.strip().splitlines()[-1]
    m = re.fullmatch(rf"miniature {study}: executed (\d+) of (\d+) rules", last)
    assert m, text[-3000:]
    return code, int(m.group(1)), int(m.group(2)), text


@pytest.mark.miniature
@pytest.mark.workflow
@pytest.mark.tinymodel
@pytest.mark.realdata
@pytest.mark.skipif(not os.environ.get("CONVRAG_MINIATURE_TESTS"),
                    reason="the miniature runs are not yet within the CI budget (issue 44): set "
                           "CONVRAG_MINIATURE_TESTS=1 and select with -m miniature")
@pytest.mark.parametrize("study", ["mtrag_un", "lic_rag", "coral", "worse_labels", "cross"])
def test_miniature_runs_every_rule_of_the_paper_plan(study, tmp_path, shared_data):
    code, executed, planned, text = _run(study, tmp_path)
    not_offline = NOT_OFFLINE.get(study, {})
    missing = re.search(rf"miniature {study}: not executed: (.*)", text)
    assert set(missing.group(1).split(", ") if missing else []) == set(not_offline), text[-3000:]
    assert executed == planned - len(not_offline)
    assert code == (0 if not not_offline else 1)
    results = tmp_path / f"results/miniature_{study}" / study / "tables"
    if study == "cross":  # the project's own grid: no paper's numbers (resources/published) to reproduce
        assert (results / "results_long.csv").is_file() and (results / "plan.csv").is_file(), sorted(results.iterdir())
    else:
        assert (results / "reproduction.csv").is_file() or any(results.glob("reproduction*")), sorted(results.iterdir())


@pytest.mark.parametrize("study", ["mtrag_un", "lic_rag", "coral", "worse_labels", "cross"])
def test_miniature_overlay_laid_over_its_paper_config_is_valid_and_pinned(study, monkeypatch):
    """The overlay merged as Snakemake merges --configfile files (dicts deep, lists replaced)
    validates, and every download it leaves is pinned (convrag sources' check)."""
    import yaml

    from convrag.config import ConfigOrigin, validate_config
    from convrag.downloads import config_downloads, problems

    def merge(a, b):
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    monkeypatch.chdir(REPO)
    paper, overlay = REPO / "config/studies" / f"{study}.yaml", REPO / "config/miniatures" / f"{study}.yaml"
    cfg = validate_config(merge(yaml.safe_load(paper.read_text()), yaml.safe_load(overlay.read_text())),
                          source=ConfigOrigin([paper, overlay]))
    assert cfg["results_dir"] == f"results/miniature_{study}"
    if study == "coral":  # an -SFT entry set to null by the overlay is removed, the others kept
        assert sorted(cfg["coral"]["sft"]) == ["qwen2.5-1.5b-sft-rewrite", "qwen2.5-7b-instruct-sft-last-response",
                                               "qwen2.5-7b-instruct-sft-raw-context", "qwen2.5-7b-instruct-sft-rewrite"]
    assert problems(list(config_downloads(cfg))) == []
