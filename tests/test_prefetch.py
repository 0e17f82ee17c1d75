"""The login-node step of a SLURM run (README "Running on a SLURM cluster"): `convrag sources
--prefetch CONFIG` fetches every Hugging Face model the config uses at the commit its jobs will
load, so nodes without internet load them from the hub cache (convrag.downloads.prefetch_models)."""

import json


from convrag.cli import main as cli_main
from convrag.config import REPO_ROOT, load_config
from convrag.downloads import config_downloads, prefetch_models


def test_prefetch_fetches_each_model_once_at_the_commit_its_jobs_load(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.chdir(tmp_path)  # the lock file is relative to the workflow's directory, as in a run
    asked = []

    class Api:
        def model_info(self, repo):
            asked.append(repo)
            return type("Info", (), {"sha": "a" * 40})()

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    entries = config_downloads(load_config(REPO_ROOT / "config" / "studies" / "lic_rag.yaml"))
    fetched = []
    lines = prefetch_models(entries, snapshot=lambda repo_id, revision, ignore_patterns: fetched.append(
        (repo_id, revision)) or f"/hub/{repo_id}")
    repos = {e["repo"] for e in entries if e["kind"] == "hf-model"}
    assert sorted(r for r, _ in fetched) == sorted(repos)  # BAAI/bge-large-en-v1.5 serves three keys: fetched once
    got = dict(fetched)
    assert got["Qwen/Qwen3-8B"] == "b968826d9c46dd6066d109eabc6255188de91218"  # resources/sources.yaml's pin
    assert got["BAAI/bge-large-en-v1.5"] == "d4aa6901d3a41ba39fb536a557fa166f842b0e09"
    assert got["Qwen/Qwen3-14B"] == "a" * 40 and asked == ["Qwen/Qwen3-14B"]  # `lock`: resolved now ...
    lock = json.loads((tmp_path / "results" / "paper_lic_rag" / "sources.lock.json").read_text())
    assert lock["hf-model:Qwen/Qwen3-14B"]["revision"] == "a" * 40  # ... and recorded for the jobs
    assert f"Qwen/Qwen3-14B@{'a' * 40}: /hub/Qwen/Qwen3-14B" in lines

    # the jobs (and a second prefetch) read the lock file, never the hub
    monkeypatch.setattr(huggingface_hub, "HfApi", None)
    fetched.clear()
    prefetch_models(entries, snapshot=lambda repo_id, revision, **kw: fetched.append((repo_id, revision)) or "")
    assert dict(fetched)["Qwen/Qwen3-14B"] == "a" * 40


def test_prefetch_needs_named_configs(capsys):
    assert cli_main(["sources", "--prefetch"]) == 2
    assert "name the configs whose models to fetch" in capsys.readouterr().err
