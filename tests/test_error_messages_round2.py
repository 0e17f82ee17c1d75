"""Errors that name the field, the file and the line, and say what to do (issue 39, item 3): each
test makes the fault by hand and asserts the message text."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT, ConfigOrigin, load_config, validate_config
from convrag.errors import ConfigError
from convrag.llm.registry import load_registry

DEFAULT = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


def _line_of(path: Path, text: str) -> int:
    """The 1-based line of the only line of ``path`` that is ``text`` (indentation aside)."""
    hits = [i for i, ln in enumerate(path.read_text().splitlines(), start=1) if ln.strip() == text]
    assert len(hits) == 1, hits
    return hits[0]


def _shown(path: Path) -> str:
    """A file as messages name it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _write_default(tmp_path: Path, keys: tuple, value, name: str = "cfg.yaml") -> Path:
    """The embedded default config with one value set, as a --configfile would give it."""
    cfg = copy.deepcopy(DEFAULT)
    node = cfg
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False))
    return p


def _dry_run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           "--directory", str(cwd), *args], capture_output=True, text=True, env=env, timeout=300)


# ---- 1. a decoding setting out of range names itself and its range ----------------------------


@pytest.mark.parametrize("keys, value, why", [
    (("lic_rag", "assistant", "temperature"), -0.5, "-0.5 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("lic_rag", "assistant", "top_p"), 1.5, "1.5 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("lic_rag", "assistant", "max_tokens"), 0, "0 is less than the minimum of 1 (allowed: an integer >= 1)"),
    (("lic_rag", "assistant_by_model", "smollm2-135m"), {"temperature": -0.25},
     "-0.25 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("lic_rag", "user_simulator", "top_p"), 1.25, "1.25 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("cross", "sampling", "top_p"), 0, "0 is less than or equal to the minimum of 0 (allowed: a number > 0 and <= 1)"),
    (("mtrag_un", "generation", "sampling"), {"temperature": -1.5},
     "-1.5 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("coral", "generation", "sampling"), {"top_p": 2.5},
     "2.5 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("worse_labels", "bootstrap", "n_resamples"), 5, "5 is less than the minimum of 10 (allowed: an integer >= 10)"),
])
def test_a_decoding_setting_out_of_range_names_the_key_and_the_range(tmp_path, keys, value, why):
    """The sampling blocks are `unevaluatedProperties: false` over an `allOf`/`$ref`: a failing value
    used to be reported as `Unevaluated properties are not allowed ('stop' was unexpected)`."""
    p = _write_default(tmp_path, keys, value)
    leaf = keys if not isinstance(value, dict) else (*keys, *value)
    shown = value if not isinstance(value, dict) else next(iter(value.values()))
    line = _line_of(p, f"{leaf[-1]}: {shown}")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{_shown(p)}:{line}: invalid config key '{'.'.join(leaf)}': {why}"
    assert "Unevaluated" not in str(e.value)


def test_an_unknown_key_in_a_sampling_block_is_still_named(tmp_path):
    p = _write_default(tmp_path, ("lic_rag", "assistant", "temprature"), 0.5)
    with pytest.raises(ConfigError, match=r"cfg\.yaml:\d+: invalid config key 'lic_rag\.assistant\.temprature': "
                                          r"unknown key$"):
        load_config(p)


# ---- 2. the config file and line, not "config (config/config.yaml + ...)" and common.smk ---------


LIC_K3 = """\
studies: [lic_rag]
corpora:
  miniworld: {kind: miniworld}
datasets:
  miniworld: {corpus: miniworld, n_questions: 3}
retrievers:
  bm25:
    kind: bm25
    params: {backend: bm25s, k3: 1.5, b: 0.75}
lic_rag:
  datasets: [miniworld]
  models: [smollm2-135m]
  retrievers: [bm25]
"""


def test_the_dry_run_names_the_configfile_and_line_and_not_common_smk(tmp_path):
    """The issue's two faults through Snakemake itself: a --configfile that replaces the default,
    with an unknown retriever param (item 3: it used to pass the dry run) and, in a second file,
    an out-of-range temperature (item 1)."""
    k3 = tmp_path / "k3.yaml"
    k3.write_text(LIC_K3)
    proc = _dry_run("--configfile", str(k3), cwd=tmp_path)
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert ("Config error: k3.yaml:9: invalid config key 'retrievers.bm25.params.k3': not a param of retriever kind "
            "'bm25' (known: b, backend, k1, stemmer, stopwords, threads)") in out, out[-2000:]
    assert "common.smk" not in out and "config/config.yaml" not in out and "Traceback" not in out, out[-2000:]

    hot = tmp_path / "hot.yaml"
    hot.write_text("lic_rag:\n  assistant:\n    temperature: -0.5\n")
    k3.write_text(LIC_K3.replace("k3:", "k1:"))
    proc = _dry_run("--configfile", str(k3), str(hot), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert ("Config error: hot.yaml:3: invalid config key 'lic_rag.assistant.temperature': -0.5 is less than the "
            "minimum of 0 (allowed: a number >= 0)") in out, out[-2000:]
    assert "common.smk" not in out, out[-2000:]


def test_an_error_names_the_file_that_set_the_key_among_several(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(LIC_K3.replace("k3:", "k1:"))
    b.write_text("# the second file\nlic_rag:\n  runs: 0\n")
    cfg = {**yaml.safe_load(a.read_text()), "lic_rag": {**yaml.safe_load(a.read_text())["lic_rag"], "runs": 0}}
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, source=ConfigOrigin([a, b]))
    assert str(e.value) == (f"{_shown(b)}:3: invalid config key 'lic_rag.runs': 0 is less than the minimum "
                            "of 1 (allowed: an integer >= 1)")
    # set by --config: that is where it came from
    with pytest.raises(ConfigError) as e:
        validate_config(copy.deepcopy(cfg), source=ConfigOrigin([a], {"lic_rag": {"runs": "0"}}))
    assert str(e.value).startswith("--config lic_rag=...: invalid config key 'lic_rag.runs': 0 is less than")
    # a key the file does not write (a required one) is placed at its block
    cfg = yaml.safe_load(a.read_text())
    del cfg["datasets"]["miniworld"]["n_questions"]
    a.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, source=ConfigOrigin([a]))
    line = a.read_text().splitlines().index("datasets:") + 2  # its "  miniworld:"
    assert str(e.value) == (f"{_shown(a)}:{line} (under 'datasets.miniworld'): invalid config key "
                            "'datasets.miniworld.n_questions': required, not set")


# ---- 3. an unknown retriever param fails at config time, for every kind ----------------------------


@pytest.mark.parametrize("kind, params, bad, known", [
    ("bm25", {"k3": 1.2}, "k3", "b, backend, k1, stemmer, stopwords, threads"),
    ("dense", {"batchsize": 8}, "batchsize", None),
    ("hipporag2", {"dampning": 0.5}, "dampning", None),
    ("pog", {"depth": 2}, "depth", None),
    ("closed_book", {"k1": 1}, "k1", "none"),
])
def test_an_unknown_retriever_param_is_a_config_error_naming_the_known_ones(tmp_path, kind, params, bad, known):
    from convrag.retrieval import KINDS

    known = known or ", ".join(sorted(KINDS.get(kind).DEFAULTS))
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("    kind: bm25\n    params: {backend: bm25s, k3: 1.5, b: 0.75}\n",
                                f"    kind: {kind}\n    params:\n      {bad}: {params[bad]}\n"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value).startswith(f"{_shown(p)}:10: invalid config key 'retrievers.bm25.params.{bad}': "
                                   f"not a param of retriever kind '{kind}' (known: {known})")


def test_a_near_miss_param_gets_a_suggestion(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("k3:", "k_1:"))
    with pytest.raises(ConfigError, match=r"'retrievers\.bm25\.params\.k_1': not a param .*; did you mean 'k1'\?$"):
        load_config(p)


# ---- 7. duplicate keys in the model registry and in config files ----------------------------------


def test_a_model_named_twice_in_the_registry_is_an_error(tmp_path):
    text = (REPO_ROOT / "config" / "models.yaml").read_text()
    first = next(ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#")))
    reg = tmp_path / "models.yaml"
    reg.write_text(text + "\n" + first + "\n  backend: openai\n  api_model: x\n  api_key_env: X\n")
    n_first = text.splitlines().index(first) + 1
    n_again = len(text.splitlines()) + 2
    with pytest.raises(ConfigError) as e:
        load_registry(reg)
    assert str(e.value) == (f"{reg}:{n_again}: duplicate key '{first.rstrip(':')}' (first at line {n_first}): YAML keeps "
                            "only the last value, so one of them would be lost silently; remove or rename one")


def test_a_key_twice_in_a_config_file_is_an_error_in_load_config_and_the_workflow(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("k3:", "k1:") + "  runs: 2\n  runs: 3\n")
    want = (f"{p}:15: duplicate key 'runs' (first at line 14): YAML keeps only the last value, so one of them would be "
            "lost silently; remove or rename one")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == want
    # what Snakemake read (last one wins) is checked again from the files themselves
    with pytest.raises(ConfigError) as e:
        validate_config(yaml.safe_load(p.read_text()), source=ConfigOrigin([p]))
    assert str(e.value) == want


# ---- 4. a corrupt LLM cache names its path and what to do ------------------------------------------


def test_a_cache_file_that_is_not_a_database_names_the_path_and_the_remedy(tmp_path):
    from convrag.errors import DataError
    from convrag.llm.cache import LLMCache

    db = tmp_path / "cache" / "llm.sqlite"
    db.parent.mkdir()
    db.write_bytes(b"not a database: a text file copied over the cache " * 100)
    with pytest.raises(DataError) as e:
        LLMCache(db)
    assert str(e.value) == (
        f"{db}: the LLM cache is not a readable SQLite database (file is not a database). It only holds cached model "
        f"answers: move it aside (mv {db} {db}.broken) or delete it, together with any llm.sqlite-wal and "
        "llm.sqlite-shm beside it, and rerun; the answers are then asked again (or restore it from a bundle: "
        "convrag cache import)")


def test_a_damaged_cache_database_names_the_path(tmp_path):
    from convrag.errors import DataError
    from convrag.llm.cache import LLMCache

    db = tmp_path / "llm.sqlite"
    with LLMCache(db) as cache:
        cache.put_many({f"k{i}": "an answer " * 50 for i in range(200)})
    for side in ("llm.sqlite-wal", "llm.sqlite-shm"):
        (tmp_path / side).unlink(missing_ok=True)
    raw = bytearray(db.read_bytes())
    raw[8192:-64] = bytes([0xAB]) * (len(raw) - 8192 - 64)  # the header page kept, the data pages overwritten
    db.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"llm\.sqlite: the LLM cache is not a readable SQLite database \(database "
                                        r"disk image is malformed\)\. It only holds cached model answers: move it aside"):
        with LLMCache(db) as cache:
            cache.get_many([f"k{i}" for i in range(200)])


# ---- 5. bytes that are not UTF-8 name the file, line and byte offset -------------------------------


LATIN1 = "Caf\xe9 au lait".encode("latin-1")  # \xe9 alone is not UTF-8


def _not_utf8(label: str, line: int, offset: int, what: str = "invalid continuation byte 0xe9") -> str:
    return (f"{label}:{line}: not UTF-8 text at byte offset {offset} ({what}); every input file must be UTF-8 text: "
            "convert it (e.g. `iconv -f latin1 -t utf-8 IN > OUT`) or fix the bytes at that offset")


def test_a_jsonl_line_that_is_not_utf8_names_file_line_and_offset(tmp_path):
    from convrag.errors import DataError
    from convrag.io import iter_jsonl
    from convrag.metrics.retrieval import read_qrels

    p = tmp_path / "questions.jsonl"
    good = b'{"_id": "q1", "text": "fine"}\n'
    p.write_bytes(good * 2 + b'{"_id": "q3", "text": "' + LATIN1 + b'"}\n')
    offset = 2 * len(good) + len(b'{"_id": "q3", "text": "Caf')
    with pytest.raises(DataError) as e:
        list(iter_jsonl(p))
    assert str(e.value) == _not_utf8(str(p), 3, offset)
    q = tmp_path / "qrels.tsv"
    q.write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t" + LATIN1 + b"\t1\n")
    with pytest.raises(DataError) as e:
        read_qrels(q)
    assert str(e.value) == _not_utf8(str(q), 3, len(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\tCaf"))


def test_the_data_loaders_name_file_line_and_offset(tmp_path):
    import zipfile

    from convrag.data.coral import read_conversations
    from convrag.data.hipporag import load_hipporag
    from convrag.data.mtrag import load_conversations, load_passage_corpus
    from convrag.errors import DataError

    # an MTRAG corpus, plain and zipped (the label names the member)
    line1 = b'{"_id": "d1", "title": "t", "text": "a passage"}\n'
    bad = b'{"_id": "d2", "title": "t", "text": "' + LATIN1 + b'"}\n'
    plain = tmp_path / "govt.jsonl"
    plain.write_bytes(line1 + bad)
    offset = len(line1) + len(b'{"_id": "d2", "title": "t", "text": "Caf')
    with pytest.raises(DataError) as e:
        load_passage_corpus(plain, "govt")
    assert str(e.value) == _not_utf8(str(plain), 2, offset)
    z = tmp_path / "govt.jsonl.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("govt.jsonl", line1 + bad)
    with pytest.raises(DataError) as e:
        load_passage_corpus(z, "govt")
    assert str(e.value) == _not_utf8(f"{z}[govt.jsonl]", 2, offset)
    # whole JSON documents: MTRAG's conversations, a HippoRAG corpus, CORAL's conversations
    doc = tmp_path / "conversations.json"
    doc.write_bytes(b'[\n  {"messages": [],\n   "domain": "' + LATIN1 + b'"}\n]\n')
    want = _not_utf8(str(doc), 3, len(b'[\n  {"messages": [],\n   "domain": "Caf'))
    with pytest.raises(DataError) as e:
        load_conversations(doc)
    assert str(e.value) == want
    with pytest.raises(DataError) as e:
        load_hipporag(tmp_path / "q.json", doc, "h")
    assert str(e.value) == want
    with pytest.raises(DataError) as e:
        read_conversations(doc)
    assert str(e.value) == want


def test_a_config_file_that_is_not_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_bytes(LIC_K3.replace("k3:", "k1:").encode() + b"# " + LATIN1 + b"\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == _not_utf8(str(p), 14, len(LIC_K3.encode()) + len(b"# Caf"))


# ---- 6. passages with empty text: an error by default, dropped and counted by a config key ----------


def _corpus(tmp_path: Path, texts: list[str]) -> Path:
    import json

    p = tmp_path / "govt.jsonl"
    p.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return p


def test_an_empty_mtrag_passage_is_an_error_naming_file_line_and_the_key(tmp_path):
    from convrag.data.benchmarks import benchmark_loader
    from convrag.errors import DataError

    p = _corpus(tmp_path, ["a passage", "another", "  \n ", "the last"])
    loader = benchmark_loader("mtrag_retrieval")
    with pytest.raises(DataError) as e:
        loader.corpus("mtrag_r", {"kind": "mtrag_retrieval"}, "govt", {"corpus_govt.jsonl.zip": str(p)})
    assert str(e.value) == (f"{p}:3: field 'text' of passage 'd2' is empty: an empty passage can never be retrieved "
                            "on its terms; fix the corpus, or set benchmarks.mtrag_r.empty_passages: drop to leave "
                            "such passages out and count them")
    passages, counts = loader.corpus_with_counts("mtrag_r", {"kind": "mtrag_retrieval", "empty_passages": "drop"},
                                                 "govt", {"corpus_govt.jsonl.zip": str(p)})
    assert [x.doc_id for x in passages] == ["d0", "d1", "d3"]
    assert counts == {"empty_passages": "drop", "empty_passages_dropped": 1, "first_empty_passages": [f"{p}:3 ('d2')"]}


def test_dropped_empty_passages_are_counted_in_the_gold_report_and_the_caption(shared_data, tmp_path, capsys):
    """The benchmark-corpus stage on the real MTRAG sample (govt, one passage blanked): the gold
    report counts the dropped passage, and the caption of a retrieval table says so."""
    import json

    from convrag.cli import main
    from convrag.data.gold import caption_note
    from convrag.io import read_json

    lines = (shared_data / "mtrag" / "corpus_sample" / "govt.jsonl").read_text().splitlines()
    rec = json.loads(lines[4])
    rec["text"] = ""
    lines[4] = json.dumps(rec)
    corpus = tmp_path / "govt.jsonl"
    corpus.write_text("\n".join(lines) + "\n")
    (tmp_path / "tasks.jsonl").write_text("")
    spec = {"kind": "mtrag_conversations", "domains": ["govt"], "empty_passages": "drop", "files": {}}
    args = ["benchmark-corpus", "--name", "mtrag_sample", "--domain", "govt", "--spec", json.dumps(spec),
            "--files", json.dumps({"corpus_govt.jsonl.zip": str(corpus)}), "--tasks", str(tmp_path / "tasks.jsonl"),
            "--out", str(tmp_path / "corpus.jsonl"), "--gold", str(tmp_path / "gold.json")]
    assert main(args) == 0
    gold = read_json(tmp_path / "gold.json")
    assert (gold["passages"], gold["empty_passages_dropped"]) == (len(lines) - 1, 1)
    assert gold["first_empty_passages"] == [f"{corpus}:5 ('{rec['_id']}')"]
    assert caption_note([gold]) == ("Passages with empty text left out of the corpus (empty_passages: drop): "
                                    "mtrag_sample govt 1 empty passages dropped.")
    spec["empty_passages"] = "error"
    capsys.readouterr()
    assert main(args[:6] + [json.dumps(spec)] + args[7:]) != 0
    assert capsys.readouterr().err == (
        f"convrag benchmark-corpus: error: {corpus}:5: field 'text' of passage '{rec['_id']}' is empty: an empty "
        "passage can never be retrieved on its terms; fix the corpus, or set benchmarks.mtrag_sample.empty_passages: "
        "drop to leave such passages out and count them\n")


def test_an_empty_hipporag_passage_is_an_error_or_dropped_with_its_id_kept(tmp_path):
    import json

    from convrag.data.builtin import _hipporag
    from convrag.errors import DataError

    corpus = tmp_path / "corpus.json"
    corpus.write_text('[\n  {"title": "A", "text": "Alpha is a town."},\n  {"title": "B", "text": ""},\n'
                      '  {"title": "C", "text": "Gamma is a river."}\n]\n')
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"_id": "w1", "type": "bridge", "question": "Where?", "answer": "town",
                                      "supporting_facts": [["A", 0], ["C", 0]], "context": []}]))
    files = {"questions": str(questions), "corpus": str(corpus)}
    with pytest.raises(DataError) as e:
        _hipporag("twowiki", {"format": "2wikimultihopqa"}, files)
    assert str(e.value) == (f"{corpus}:3: field 'text' of passage 'twowiki/1' is empty: an empty passage can never be "
                            "retrieved on its terms; fix the corpus, or set corpora.twowiki.empty_passages: drop to "
                            "leave such passages out and count them")
    qs, ps, counts = _hipporag("twowiki", {"format": "2wikimultihopqa", "empty_passages": "drop"}, files)
    assert [p.doc_id for p in ps] == ["twowiki/0", "twowiki/2"]  # the ids do not shift
    assert qs[0].supporting_doc_ids == ["twowiki/0", "twowiki/2"]
    assert counts == {"empty_passages": "drop", "empty_passages_dropped": 1,
                      "first_empty_passages": [f"{corpus}:3 ('twowiki/1')"]}


def test_the_empty_passages_key_is_checked_in_the_config(tmp_path):
    p = _write_default(tmp_path, ("benchmarks", "mini_mtrag", "empty_passages"), "keep")
    with pytest.raises(ConfigError, match=rf"cfg\.yaml:{_line_of(p, 'empty_passages: keep')}: invalid config key "
                                          r"'benchmarks\.mini_mtrag\.empty_passages': 'keep' is not one of "
                                          r"\['error', 'drop'\]$"):
        load_config(p)
    p = _write_default(tmp_path, ("corpora", "miniworld", "empty_passages"), "drop")
    with pytest.raises(ConfigError, match=r"'corpora\.miniworld\.empty_passages': only for kind hipporag \(a corpus "
                                          r"read from files\); kind miniworld is generated and has no empty passages$"):
        load_config(p)
    # a kind that reads no corpus file does not take it
    p = _write_default(tmp_path, ("benchmarks", "mini_mtrag", "empty_passages"), "drop")
    with pytest.raises(ConfigError, match=r"'benchmarks\.mini_mtrag\.empty_passages': not a key of kind miniworld_mtrag "
                                          r"\(it reads no passage file\)$"):
        load_config(p)


# ---- 8. a single-domain MTRAG config needs that domain's files only, and says which are missing -------


def _one_domain(tmp_path: Path, drop: str | None = None) -> Path:
    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un_sample.yaml").read_text())
    b = cfg["benchmarks"]["mtrag_sample"]
    b["domains"] = ["govt"]
    b["files"] = {k: {"local": str((REPO_ROOT / v["local"]).resolve())} for k, v in b["files"].items()
                  if (k == "conversations.json" or "govt" in k) and k != drop}
    cfg["results_dir"] = str(tmp_path / "out")
    p = tmp_path / "one_domain.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def test_a_single_domain_mtrag_config_needs_only_that_domains_files(shared_data, tmp_path):
    from convrag.data.benchmarks import benchmark_loader

    cfg = load_config(_one_domain(tmp_path))
    spec = cfg["benchmarks"]["mtrag_sample"]
    loader = benchmark_loader(spec["kind"])
    assert loader.task_inputs(spec) == ["conversations.json", "govt_questions.jsonl"]
    tasks, report = loader.tasks("mtrag_sample", spec, {k: v["local"] for k, v in spec["files"].items()})
    # the same govt tasks as with every domain's files (each conversation's id comes from its own domain)
    full = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un_sample.yaml").read_text())["benchmarks"]
    every = full["mtrag_sample"]
    all_tasks, _ = loader.tasks("mtrag_sample", every, {k: str((REPO_ROOT / v["local"]).resolve())
                                                       for k, v in every["files"].items()})
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in all_tasks if t.labels["domain"] == "govt"]
    assert len(tasks) == 16 and (report["conversations"], report["conversations_other_domains"]) == (3, 9)


def test_a_missing_mtrag_file_is_named_with_why_it_is_needed(shared_data, tmp_path):
    p = _one_domain(tmp_path, drop="govt_questions.jsonl")
    line = _line_of(p, "mtrag_sample:")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == (
        f"{_shown(p)}:{line} (under 'benchmarks.mtrag_sample'): invalid config key 'benchmarks.mtrag_sample.revision': "
        "required (a commit of IBM/mt-rag-benchmark, to download the raw files) unless every raw file is given under "
        "'files'; not given there: govt_questions.jsonl; <domain>_questions.jsonl (one per domain in 'domains') gives "
        "the conversations of conversations.json their ids, which that file lacks (or give a "
        "conversation_index_to_id.tsv instead)")


def test_a_single_domain_mtrag_config_plans_in_a_dry_run(shared_data, tmp_path):
    proc = _dry_run("--configfile", str(_one_domain(tmp_path)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "mtrag_sample.govt" in proc.stdout and "mtrag_sample.fiqa" not in proc.stdout
