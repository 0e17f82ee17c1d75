"""Outputs get the mode a plain open() / mkdir() gives under the user's umask (convrag.io):
atomic writes go through mkstemp (0600) and staged folders through mkdtemp (0700), which would
otherwise keep every table private on a shared filesystem."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Run in a fresh interpreter under the given umask: convrag.io reads the umask once per process.
SCRIPT = textwrap.dedent("""
    import json, os, stat, sys
    from pathlib import Path
    import pandas as pd
    from convrag.io import atomic_open, write_json, write_jsonl, write_parquet
    from convrag.llm.cache import LLMCache
    from convrag.llm.bundle import _write_zip
    from convrag.retrieval.base import staging_dir
    from convrag.data.download import download_url
    from convrag.io import temp_dir
    from convrag.report.figures import _figure, save_figure
    from convrag.sources import Lock

    out = Path(sys.argv[1])
    write_json(out / "t.json", {"a": 1})
    write_jsonl(out / "t.jsonl", [{"a": 1}])
    write_parquet(pd.DataFrame({"a": [1]}), out / "t.parquet")
    with atomic_open(out / "t.md") as fh:
        fh.write("x")
    cache = LLMCache(out / "cache" / "llm.sqlite")
    cache.put_many({"k": {"text": "v"}})
    _write_zip(out / "b.zip", [("m.json", b"{}")])
    with staging_dir(out / "index") as tmp:
        (tmp / "manifest.json").write_text("{}")
        import torch
        from safetensors.torch import save_file
        (tmp / "model").mkdir()
        save_file({"w": torch.zeros(2)}, str(tmp / "model" / "model.safetensors"))  # safetensors writes 0600
    # a download and its sidecar (the file:// URL goes through the same atomic write), the lock file
    (out / "src.txt").write_text("payload")
    download_url((out / "src.txt").as_uri(), out / "dl" / "f.txt", retries=1)
    Lock(out / "sources.lock.json").record("k", {"revision": "0" * 40, "sha256": "1" * 64})
    fig = _figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [0, 1])
    save_figure(fig, out / "fig" / "plot")
    (temp_dir(out, prefix="staged.") / "page.html").write_text("x")  # coral pages, converted models
    print(json.dumps({str(p.relative_to(out)): oct(stat.S_IMODE(p.stat().st_mode))
                      for p in sorted(out.rglob("*"))}))
""")


# 002 too: SQLite creates its database 0644 & ~umask, which only a group-writable umask tells apart
@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, "0o644", "0o755"), (0o027, "0o640", "0o750"),
                                                        (0o002, "0o664", "0o775")])
def test_every_output_gets_the_umask_mode(tmp_path, umask, file_mode, dir_mode):
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr[-3000:]
    modes = json.loads(proc.stdout.strip().splitlines()[-1])
    files = {p: m for p, m in modes.items() if not (out / p).is_dir()}
    dirs = {p: m for p, m in modes.items() if (out / p).is_dir()}
    for name in ("t.json", "t.jsonl", "t.parquet", "t.md", "cache/llm.sqlite", "cache/llm.sqlite-wal",
                 "cache/llm.sqlite-shm", "b.zip", "index/manifest.json", "index/model/model.safetensors",
                 "dl/f.txt", "dl/f.txt.sha256",
                 "sources.lock.json", "sources.lock.json.flock", "fig/plot.png", "fig/plot.pdf"):
        assert name in files, sorted(modes)
    assert set(files.values()) == {file_mode}, files
    assert len(dirs) == 6 and set(dirs.values()) == {dir_mode}, dirs  # cache, index, index/model, dl, fig, the staged one
    assert any(p.startswith("staged.") for p in dirs), dirs
    assert not [p for p in modes if p.startswith(".") or ".tmp" in p], modes  # no temporary left behind
