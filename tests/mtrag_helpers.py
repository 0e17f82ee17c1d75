"""A benchmark spec of kind mtrag_retrieval over the shared MTRAG samples (local files, read by path)."""

from __future__ import annotations

ALL_DOMAINS = ("clapnq", "cloud", "fiqa", "govt")


def local_retrieval_spec(shared, domains=ALL_DOMAINS, **extra) -> dict:
    """MTRAG's retrieval tasks, qrels and the sample corpus of ``domains`` from ``../shared/data``;
    ``extra``: more keys of the benchmark spec (``tags``, ``allow_missing_gold``)."""
    files = {}
    for d in domains:
        for k in ("lastturn", "rewrite", "questions"):
            files[f"{d}_{k}.jsonl"] = {"local": str(shared / "mtrag_retrieval" / f"{d}_{k}.jsonl")}
        files[f"qrels_{d}.tsv"] = {"local": str(shared / "mtrag_retrieval" / f"qrels_{d}.tsv")}
        files[f"corpus_{d}.jsonl.zip"] = {"local": str(shared / "mtrag" / "corpus_sample" / f"{d}.jsonl")}
    return {"kind": "mtrag_retrieval", "domains": list(domains), **extra, "files": files}


def build_target(tmp_path, cfg: dict, target: str, timeout: int = 900) -> None:
    """Run the workflow on ``cfg`` (written as given, keys in order) in ``tmp_path`` for one target."""
    import os
    import subprocess
    import sys

    import yaml

    from convrag.config import REPO_ROOT

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--snakefile",
                           str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(tmp_path / "config.yaml"), "--", target],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
