"""Pinned, verified sources (convrag.sources, resources/sources.yaml): every download of every
config in config/ has a commit (or, for Hugging Face, `lock`) and a checksum; a `lock` revision is
recorded at the first download and pins every later one."""

import functools
import hashlib
import http.server
import json
import subprocess
import sys
import threading

import pytest
import yaml

from convrag.cli import main as cli_main
from convrag.config import REPO_ROOT, load_config
from convrag.data import download
from convrag.data.download import download_file, download_url
from convrag.downloads import config_downloads, problems
from convrag.errors import DataError
from convrag.sources import Lock, git_blob_id, github_pin, is_commit, load_sources, model_revision

# config/miniatures/ holds overlays, not configs: tests/test_miniature.py checks them laid over their paper config
CONFIGS = sorted([REPO_ROOT / "config" / "config.yaml",
                  *(p for p in (REPO_ROOT / "config").glob("*/*.yaml") if p.parent.name != "miniatures")])


@functools.lru_cache(maxsize=None)
def downloads_of(path):
    return tuple(config_downloads(load_config(path)))
IBM, MAIN = "IBM/mt-rag-benchmark", "cc5b1d481b391181b89f7ced860308482e785463"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_download_of_every_config_is_pinned(path):
    entries = list(downloads_of(path))
    assert problems(entries) == []
    for e in entries:
        assert e["revision"] not in ("main", "master", "HEAD", None, "")
        assert is_commit(e["revision"]) or (e["revision"] == "lock" and e["kind"].startswith("hf-"))
        if e["kind"] in ("github", "url"):
            assert e["sha256"] or e["git_blob"], e


def test_the_paper_configs_list_what_they_download():
    kinds = {p.stem: {(e["kind"], e["repo"]) for e in downloads_of(p)}
             for p in CONFIGS if p.parent.name == "studies"}
    assert ("github", IBM) in kinds["mtrag_un"] and ("hf-model", "Qwen/Qwen3-8B") in kinds["worse_labels"]
    assert ("hf-dataset", "osunlp/HippoRAG_2") in kinds["lic_rag"] and ("hf-dataset", "ariya2357/CORAL") in kinds["coral"]
    assert ("hf-model", "BAAI/bge-base-en-v1.5") in kinds["mtrag_un"]  # a retriever's model
    # coral's -Q rows train on QReCC: its release zip at a pinned commit, checked by the zip's git blob id
    qrecc = [e for e in downloads_of(REPO_ROOT / "config" / "studies" / "coral.yaml") if e["repo"] == "apple/ml-qrecc"]
    assert [(e["kind"], e["revision"], e["path"], e["git_blob"]) for e in qrecc] == [
        ("github", "cf44d03cb6676f7414471cec509d4a6c6858b0d3", "dataset/qrecc_data.zip",
         "4b2e03a230edeb3657aeaf1ced59f281335516ed")]
    wl = {e["path"] for e in downloads_of(REPO_ROOT / "config" / "studies" / "worse_labels.yaml")}
    assert "mtrag-human/retrieval_tasks/govt/qrels/dev.tsv" in wl and "corpora/passage_level/fiqa.jsonl.zip" in wl


def test_an_unpinned_revision_names_the_key(tmp_path, capsys):
    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un.yaml").read_text())
    cfg["benchmarks"]["mtrag_un"]["revision"] = "main"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    found = problems(config_downloads(load_config(tmp_path / "c.yaml")))
    assert "benchmarks.mtrag_un (reference.jsonl): revision 'main' of IBM/mt-rag-benchmark is not a commit" in found[0]
    cfg["benchmarks"]["mtrag_un"]["revision"] = "1" * 40  # a commit the sources list does not know: no checksum
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    found = problems(config_downloads(load_config(tmp_path / "c.yaml")))
    assert any("mtragun-human/generation_tasks/reference.jsonl has no checksum" in f for f in found)
    assert cli_main(["sources", str(tmp_path / "c.yaml")]) == 1  # in-process: the subprocess test is below
    assert "has no checksum" in capsys.readouterr().err


def _config_with(tmp_path, study, edit):
    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / f"{study}.yaml").read_text())
    edit(cfg)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return problems(config_downloads(load_config(tmp_path / "c.yaml")))


def test_model_weights_at_a_branch_or_off_the_list_name_the_key(tmp_path):
    bge = "retrievers.bge_base.params.model"
    found = _config_with(tmp_path, "mtrag_un", lambda c: c["retrievers"]["bge_base"]["params"].update(revision="main"))
    assert found == [f"{bge}: revision 'main' of BAAI/bge-base-en-v1.5 is not a commit (40 hex digits) or 'lock'"]
    found = _config_with(tmp_path, "mtrag_un", lambda c: c["retrievers"]["bge_base"]["params"].update(revision="2" * 40))
    assert found == [f"{bge}: revision '{'2' * 40}' of BAAI/bge-base-en-v1.5, but sources.yaml lists "
                     "'a5beb1e3e68b9ab74eb54cfd186867f64f240e1a'"]
    found = _config_with(tmp_path, "mtrag_un", lambda c: c["retrievers"]["bge_base"]["params"].update(model="org/unlisted"))
    assert found == [f"{bge}: org/unlisted is not listed in sources.yaml (its revision and the evidence for it)"]
    # a registry model at a branch: the registry file and the model's key are named
    reg = (REPO_ROOT / "config" / "models.yaml").read_text()
    pin = "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"
    assert reg.count(f"revision: {pin}") == 1
    (tmp_path / "models.yaml").write_text(reg.replace(f"revision: {pin}", "revision: main"))
    found = _config_with(tmp_path, "mtrag_un", lambda c: c.update(models_registry=str(tmp_path / "models.yaml")))
    assert found == [f"model gpt-oss-120b ({tmp_path / 'models.yaml'}: gpt-oss-120b.revision): revision 'main' of "
                     "openai/gpt-oss-120b is not a commit (40 hex digits) or 'lock'"]


def test_sources_list_every_entry_pinned_with_evidence():
    """resources/sources.yaml itself: GitHub files at commits with blob ids; every Hugging Face
    repository at a commit (with the evidence, 'not verified here') or `lock` (saying so)."""
    src = load_sources()
    for repo, r in src["github"].items():
        assert r["default_branch"] not in ("", None) and r["evidence"]
        for commit, files in r["commits"].items():
            assert is_commit(commit), (repo, commit)
            for path, pin in files.items():
                assert is_commit(pin["git_blob"]), (repo, path)
                assert set(pin) <= {"git_blob", "bytes", "sha256"} and len(pin.get("sha256", "0" * 64)) == 64
    hub = {**src["huggingface"]["datasets"], **src["huggingface"]["models"]}
    assert len(src["huggingface"]["models"]) >= 30
    for repo, r in hub.items():
        assert r["revision"] == "lock" or is_commit(r["revision"]), repo
        if r["revision"] == "lock":
            assert "recorded at the first" in r["evidence"].lower(), repo
        else:
            assert r["evidence"].startswith("not verified here"), repo
    for repo, r in src["huggingface"]["datasets"].items():
        if is_commit(r["revision"]):
            assert r["files"] and all(len(f["sha256"]) == 64 for f in r["files"].values()), repo


def test_registry_and_retriever_revisions_agree_with_the_list():
    """Every open-weight model a config uses is listed, and config/models.yaml says the listed revision."""
    from convrag.llm.registry import load_registry

    listed = load_sources()["huggingface"]["models"]
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    used = {e["repo"] for p in CONFIGS for e in downloads_of(p) if e["kind"] == "hf-model"}
    assert used <= set(listed) and {"Qwen/Qwen3-8B", "google/t5_xxl_true_nli_mixture",
                                    "microsoft/deberta-xlarge-mnli", "BAAI/bge-large-en-v1.5"} <= used
    for name, spec in registry.items():
        repo = (spec.weights or {}).get("hf_repo")
        if repo in used:
            assert spec.revision == listed[repo]["revision"], name
    assert registry["qwen3-8b"].revision == "b968826d9c46dd6066d109eabc6255188de91218"
    assert all(spec.revision != "main" for spec in registry.values())


def test_models_loaded_without_a_revision_load_the_pin(monkeypatch, tmp_path):
    """A `lock` (or absent) revision loads the commit resources/sources.yaml pins; without a pin,
    the lock file's; a hub encoder is never loaded at the default branch."""
    import types

    from convrag.metrics import text
    from convrag.retrieval import dense

    lock = Lock(tmp_path / "l.json")
    assert model_revision("model", "Qwen/Qwen3-8B", "lock", lock=lock) == "b968826d9c46dd6066d109eabc6255188de91218"
    lock.record("hf-model:Qwen/Qwen3-14B", {"revision": "c" * 40})  # listed as `lock`: the lock file decides
    assert model_revision("model", "Qwen/Qwen3-14B", "lock", lock=lock) == "c" * 40
    assert not (tmp_path / "l.json").read_text().count("Qwen3-8B")  # a pinned commit needs no lock entry

    seen = []
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(
        SentenceTransformer=lambda name, device=None, **kw: seen.append((name, kw)) or "model"))
    dense.load_encoder("BAAI/bge-large-en-v1.5", "cpu")  # a graph retriever's / session encoder's call
    dense.load_encoder("BAAI/bge-base-en-v1.5", "cpu", "f" * 40)
    assert seen == [("BAAI/bge-large-en-v1.5", {"revision": "d4aa6901d3a41ba39fb536a557fa166f842b0e09"}),
                    ("BAAI/bge-base-en-v1.5", {"revision": "f" * 40})]

    calls = []
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(
        snapshot_download=lambda repo, revision=None, allow_patterns=None: calls.append((repo, revision)) or "/snap"))
    assert text.pinned_snapshot("microsoft/deberta-xlarge-mnli") == "/snap"  # BERTScore's paper model
    assert calls == [("microsoft/deberta-xlarge-mnli", "5b07a9086c1dbb79981ff7b05b4d1ad83b3af51c")]


def test_convrag_sources_lists_every_config():
    proc = subprocess.run([sys.executable, "-m", "convrag.cli", "sources"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for p in CONFIGS:
        assert str(p.relative_to(REPO_ROOT)) in proc.stdout
    assert f"github     {IBM}@cc5b1d481b39 mtragun-human/generation_tasks/reference.jsonl  [sha256 68053f709c92]" \
        in proc.stdout
    assert "@main" not in proc.stdout and "@master" not in proc.stdout and "@HEAD" not in proc.stdout
    assert ("hf-dataset ariya2357/CORAL@lock test/new_test_qrel.trec  [recorded at first download: "
            "results/paper_coral/sources.lock.json]  <- benchmarks.coral (qrels.trec)") in proc.stdout
    assert "microsoft/deberta-xlarge-mnli@5b07a9086c1d   [the commit pins every file]  <- mtrag_un.evaluation.bertscore" \
        in proc.stdout


def test_the_ibm_pins_match_the_shared_verbatim_copies(shared_data):
    """The shared samples that are whole files hash to the pinned git blob ids and sha256."""
    pairs = {"mtrag_un/reference.jsonl": "mtragun-human/generation_tasks/reference.jsonl",
             "mtrag_un/qrels_govt.tsv": "mtragun-human/retrieval_tasks/qrels/govt.tsv",
             "mtrag_retrieval/fiqa_rewrite.jsonl": "mtrag-human/retrieval_tasks/fiqa/fiqa_rewrite.jsonl",
             "mtrag_retrieval/qrels_clapnq.tsv": "mtrag-human/retrieval_tasks/clapnq/qrels/dev.tsv"}
    for local, path in pairs.items():
        pin = github_pin(IBM, MAIN, path)
        f = shared_data / local
        assert git_blob_id(f) == pin["git_blob"] and hashlib.sha256(f.read_bytes()).hexdigest() == pin["sha256"]
    hippo = load_sources()["huggingface"]["datasets"]["osunlp/HippoRAG_2"]["files"]["2wikimultihopqa_corpus.json"]
    corpus = shared_data / "hipporag_2wikimultihopqa" / "2wikimultihopqa_corpus.json"
    assert hashlib.sha256(corpus.read_bytes()).hexdigest() == hippo["sha256"]


def test_git_blob_id_is_gits():
    """`printf 'hello\\n' | git hash-object --stdin` prints ce01362503..."""
    import tempfile

    with tempfile.NamedTemporaryFile("wb", delete=False) as fh:
        fh.write(b"hello\n")
    assert git_blob_id(fh.name) == "ce013625030ba8dba906f756967f9e9ca394464a"


# ---- the lock file -------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path):
    (tmp_path / "www").mkdir()
    payload = {"body": b'{"a": 1}\n', "commit": "a" * 40}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("X-Repo-Commit", payload["commit"])
            self.end_headers()
            self.wfile.write(payload["body"])

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", payload
    httpd.shutdown()


def test_a_lock_revision_is_recorded_at_the_first_download_and_pins_the_next(served, tmp_path):
    base, payload = served
    url = f"{base}/datasets/x/y/resolve/lock/data/f.jsonl"
    lock = tmp_path / "sources.lock.json"
    download_url(url, tmp_path / "f1", lock=lock)
    entry = json.loads(lock.read_text())[f"hf-url:{base}/datasets/x/y/resolve/data/f.jsonl"]
    assert entry["revision"] == "a" * 40 and entry["sha256"] == hashlib.sha256(payload["body"]).hexdigest()
    download_url(url, tmp_path / "f2", lock=lock)  # same bytes: fine
    payload["body"] = b'{"a": 2}\n'  # the upstream file changed: the lock catches it
    with pytest.raises(DataError, match="sha256 mismatch"):
        download_url(url, tmp_path / "f3", lock=lock)
    assert not (tmp_path / "f3").exists()


def test_a_git_blob_id_checks_a_download(served, tmp_path):
    base, payload = served
    good = hashlib.sha1(b"blob %d\0" % len(payload["body"]) + payload["body"]).hexdigest()
    download_url(f"{base}/f", tmp_path / "ok", git_blob=good)
    with pytest.raises(DataError, match="git blob id mismatch"):
        download_url(f"{base}/f", tmp_path / "bad", git_blob="0" * 40)


def test_a_hub_lock_records_the_commit_it_was_served(tmp_path, monkeypatch):
    calls = []

    def fake(**kw):
        calls.append(kw)
        p = tmp_path / "hub" / "snapshots" / ("b" * 40) / kw["filename"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"[]\n")
        return str(p)

    monkeypatch.setattr(download, "hf_hub_download", fake)
    lock = tmp_path / "l.json"
    download_file("org/ds", "q.json", "lock", tmp_path / "q1", lock=lock)
    download_file("org/ds", "q.json", "lock", tmp_path / "q2", lock=lock)
    assert calls[0]["revision"] is None and calls[1]["revision"] == "b" * 40  # the second run: the locked commit
    assert json.loads(lock.read_text())["hf-dataset:org/ds/q.json"]["revision"] == "b" * 40


def test_a_model_lock_reads_the_lock_file_and_fails_offline_without_it(tmp_path):
    lock = Lock(tmp_path / "l.json")
    lock.record("hf-model:org/m", {"revision": "c" * 40})
    assert model_revision("model", "org/m", "lock", lock=lock) == "c" * 40
    assert model_revision("model", "org/m", "d" * 40, lock=lock) == "d" * 40
    with pytest.raises(Exception, match="org/other: revision 'lock' has no entry in the lock file"):
        model_revision("model", "org/other", "lock", lock=lock)  # HF_HUB_OFFLINE in the tests
    with pytest.raises(DataError, match="locked to revision"):
        lock.record("hf-model:org/m", {"revision": "e" * 40})
