"""What a config downloads, joined with the pins of ``resources/sources.yaml`` (convrag.sources):
``config_downloads`` lists every download a config implies (benchmark raw files, corpus sources,
the URLs it names, the weights of the models and retriever models it uses); ``problems`` says
which are unpinned; ``convrag sources`` prints both for every config in ``config/``.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from convrag.sources import LOCK, SOURCES_PATH, github_pin, hf_dataset, is_commit

GITHUB_RAW = re.compile(r"^https://raw\.githubusercontent\.com/([^/]+/[^/]+)/([^/]+)/(.+)$")


def _walk_strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _walk_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_strings(v)
    elif isinstance(obj, str):
        yield obj


def _url_entry(key: str, url: str, sha256: str | None = None, git_blob: str | None = None) -> dict[str, Any]:
    m = GITHUB_RAW.match(url)
    if m:
        repo, rev, path = m.groups()
        pin = github_pin(repo, rev, path)
        return {"key": key, "kind": "github", "repo": repo, "revision": rev, "path": path,
                "sha256": sha256 or pin.get("sha256"), "git_blob": git_blob or pin.get("git_blob"),
                "bytes": pin.get("bytes")}
    return {"key": key, "kind": "url", "repo": url, "revision": None, "path": "", "sha256": sha256,
            "git_blob": git_blob, "bytes": None}


def config_downloads(config: dict, registry: dict | None = None) -> list[dict[str, Any]]:
    """Every download a (validated) config implies, one dict per file or model: key (the config
    key it comes from), kind (github / url / hf-dataset / hf-model), repo, revision, path,
    sha256, git_blob, evidence."""
    from convrag.config import config_registry
    from convrag.data.benchmarks import benchmark_loader

    registry = config_registry(config) if registry is None else registry
    out: list[dict[str, Any]] = []
    seen_urls: set[str] = set()
    for name, spec in config.get("benchmarks", {}).items():
        loader = benchmark_loader(spec["kind"])
        for fname, f in loader.raw_files(spec).items():
            if "local" in f:
                continue
            key = f"benchmarks.{name} ({fname})"
            if "url" in f:
                seen_urls.add(f["url"])
                e = _url_entry(key, f["url"], f.get("sha256"), f.get("git_blob"))
                hf = re.match(r"^https://huggingface\.co/datasets/([^/]+/[^/]+)/resolve/([^/]*)/(.+)$", f["url"])
                if hf:
                    repo, rev, path = hf.groups()
                    pin = hf_dataset(repo)
                    e = {"key": key, "kind": "hf-dataset", "repo": repo, "revision": rev, "path": path,
                         "sha256": f.get("sha256") or ((pin.get("files") or {}).get(path) or {}).get("sha256"),
                         "git_blob": None, "evidence": pin.get("evidence")}
                out.append(e)
    for name, c in config.get("corpora", {}).items():
        s = c.get("source")
        if not s:
            continue
        pin = hf_dataset(s["repo_id"])
        for role in ("questions", "corpus"):
            out.append({"key": f"corpora.{name}.source ({s[role]})", "kind": "hf-dataset", "repo": s["repo_id"],
                        "revision": s.get("revision"), "path": s[role],
                        "sha256": (s.get("sha256") or {}).get(s[role])
                        or ((pin.get("files") or {}).get(s[role]) or {}).get("sha256"),
                        "git_blob": None, "evidence": pin.get("evidence")})
    for v in _walk_strings({k: v for k, v in config.items() if k not in ("benchmarks", "corpora")}):
        if v.startswith(("https://", "http://")) and v not in seen_urls:
            seen_urls.add(v)
            out.append(_url_entry(f"(a URL in the config) {v}", v))
    used = sorted({v for v in _walk_strings(config) if v in registry})
    for m in used:
        spec = registry[m]
        weights = getattr(spec, "weights", None) or {}
        if "hf_repo" in weights:
            out.append({"key": f"model {m} (config/models.yaml)", "kind": "hf-model", "repo": weights["hf_repo"],
                        "revision": spec.revision, "path": "", "sha256": None, "git_blob": None})
    for name, r in config.get("retrievers", {}).items():
        model = (r.get("params") or {}).get("model")
        if model and "/" in str(model):
            out.append({"key": f"retrievers.{name}.params.model", "kind": "hf-model", "repo": model,
                        "revision": (r.get("params") or {}).get("revision", LOCK), "path": "", "sha256": None,
                        "git_blob": None})
    return out


def problems(entries: list[dict[str, Any]]) -> list[str]:
    """Each download that is not pinned: a branch name or no revision; a GitHub file without a
    checksum; a Hugging Face file whose revision is a commit but has no sha256 and no lock (every
    ``lock`` entry is pinned at its first download)."""
    out = []
    for e in entries:
        rev = e["revision"]
        if e["kind"] == "url":
            if not (e["sha256"] or e["git_blob"]):
                out.append(f"{e['key']}: {e['repo']} has no checksum")
            continue
        if rev == LOCK and e["kind"].startswith("hf-"):
            continue
        if not is_commit(rev):
            out.append(f"{e['key']}: revision {rev!r} of {e['repo']} is not a commit (40 hex digits)"
                       + (" or 'lock'" if e["kind"].startswith("hf-") else ""))
        elif e["kind"] == "github" and not (e["sha256"] or e["git_blob"]):
            out.append(f"{e['key']}: {e['repo']}@{rev[:12]} {e['path']} has no checksum in {SOURCES_PATH.name}")
    return out


def describe(e: dict[str, Any]) -> str:
    check = (f"sha256 {e['sha256'][:12]}" if e.get("sha256") else f"git blob {e['git_blob'][:12]}" if e.get("git_blob")
             else "recorded at first download (lock file)" if e["revision"] == LOCK or e["kind"].startswith("hf-")
             else "none")
    rev = e["revision"] if e["revision"] == LOCK or not e["revision"] else e["revision"][:12]
    return f"{e['kind']:10} {e['repo']}@{rev} {e['path']}  [{check}]"
