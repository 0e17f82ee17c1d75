"""Pinned, verified sources (convrag.sources, resources/sources.yaml): every download of every
config in config/ has a commit (or, for Hugging Face, `lock`) and a checksum; a `lock` revision is
recorded at the first download and pins every later one."""

import hashlib
import http.server
import json
import subprocess
import sys
import threading

import pytest
import yaml

from convrag.config import REPO_ROOT, load_config
from convrag.data import download
from convrag.data.download import download_file, download_url
from convrag.downloads import config_downloads, problems
from convrag.errors import DataError
from convrag.sources import Lock, git_blob_id, github_pin, is_commit, load_sources, model_revision

CONFIGS = sorted([REPO_ROOT / "config" / "config.yaml", *(REPO_ROOT / "config").glob("*/*.yaml")])
IBM, MAIN = "IBM/mt-rag-benchmark", "cc5b1d481b391181b89f7ced860308482e785463"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_download_of_every_config_is_pinned(path):
    entries = config_downloads(load_config(path))
    assert problems(entries) == []
    for e in entries:
        assert e["revision"] not in ("main", "master", "HEAD", None, "")
        assert is_commit(e["revision"]) or (e["revision"] == "lock" and e["kind"].startswith("hf-"))
        if e["kind"] in ("github", "url"):
            assert e["sha256"] or e["git_blob"], e


def test_the_paper_configs_list_what_they_download():
    kinds = {p.stem: {(e["kind"], e["repo"]) for e in config_downloads(load_config(p))}
             for p in (REPO_ROOT / "config" / "studies").glob("*.yaml")}
    assert ("github", IBM) in kinds["mtrag_un"] and ("hf-model", "Qwen/Qwen3-8B") in kinds["worse_labels"]
    assert ("hf-dataset", "osunlp/HippoRAG_2") in kinds["lic_rag"] and ("hf-dataset", "ariya2357/CORAL") in kinds["coral"]
    assert ("hf-model", "BAAI/bge-base-en-v1.5") in kinds["mtrag_un"]  # a retriever's model
    wl = {e["path"] for e in config_downloads(load_config(REPO_ROOT / "config" / "studies" / "worse_labels.yaml"))}
    assert "mtrag-human/retrieval_tasks/govt/qrels/dev.tsv" in wl and "corpora/passage_level/fiqa.jsonl.zip" in wl


def test_an_unpinned_revision_names_the_key(tmp_path):
    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un.yaml").read_text())
    cfg["benchmarks"]["mtrag_un"]["revision"] = "main"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    found = problems(config_downloads(load_config(tmp_path / "c.yaml")))
    assert "benchmarks.mtrag_un (reference.jsonl): revision 'main' of IBM/mt-rag-benchmark is not a commit" in found[0]
    cfg["benchmarks"]["mtrag_un"]["revision"] = "1" * 40  # a commit the sources list does not know: no checksum
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    found = problems(config_downloads(load_config(tmp_path / "c.yaml")))
    assert any("mtragun-human/generation_tasks/reference.jsonl has no checksum" in f for f in found)
    proc = subprocess.run([sys.executable, "-m", "convrag.cli", "sources", str(tmp_path / "c.yaml")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 1 and "has no checksum" in proc.stderr, proc.stderr[-2000:]


def test_convrag_sources_lists_every_config():
    proc = subprocess.run([sys.executable, "-m", "convrag.cli", "sources"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for p in CONFIGS:
        assert str(p.relative_to(REPO_ROOT)) in proc.stdout
    assert f"github     {IBM}@cc5b1d481b39 mtragun-human/generation_tasks/reference.jsonl  [sha256 68053f709c92]" \
        in proc.stdout
    assert "@main" not in proc.stdout and "@master" not in proc.stdout and "@HEAD" not in proc.stdout


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
