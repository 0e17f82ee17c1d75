"""What a config downloads, joined with the pins of ``resources/sources.yaml`` (convrag.sources):
``config_downloads`` lists every download a config implies (benchmark raw files, corpus sources,
the URLs it names, the weights of the models it uses: registry models, dense / sparse retrievers'
models, graph retrievers' and the knowledge graph's encoders, the models a metric loads);
``problems`` says which are unpinned; ``convrag sources`` prints both for every config in
``config/``.

A Hugging Face repository must be listed in ``resources/sources.yaml`` (its revision, with the
evidence), and a revision the config states must be the one listed there: the list is the one
place where a reader of a paper run finds what it downloaded.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from convrag.sources import (LOCK, SOURCES_PATH, github_pin, hf_dataset, hf_dataset_sha256, hf_model, is_commit, lock_path,
                             pinned_model_revision)

GITHUB_RAW = re.compile(r"^https://raw\.githubusercontent\.com/([^/]+/[^/]+)/([^/]+)/(.+)$")
HF_RESOLVE = re.compile(r"^https://huggingface\.co/datasets/([^/]+/[^/]+)/resolve/([^/]*)/(.+)$")


def _walk_strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _walk_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_strings(v)
    elif isinstance(obj, str):
        yield obj


def _url_mappings(obj: Any, where: str = "") -> Iterator[tuple[str, dict]]:
    """(config key, mapping) of every mapping with a ``url`` string: a file pinned where it is named
    (e.g. ``worse_labels.slices.<s>.ladder.<rung>.released``: {url, sha256})."""
    if isinstance(obj, dict):
        if isinstance(obj.get("url"), str) and obj["url"].startswith(("https://", "http://")):
            yield where, obj
        for k, v in obj.items():
            yield from _url_mappings(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _url_mappings(v, f"{where}[{i}]")


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


def _is_hub_id(name: Any) -> bool:
    """``org/name`` (a Hugging Face repository id), not a folder or a packaged model's name."""
    from pathlib import Path

    return isinstance(name, str) and bool(re.fullmatch(r"[\w.-]+/[\w.-]+", name)) and not Path(name).exists()


def _relative(where: str) -> str:
    """A registry path inside the repository, relative to it (as the configs name it)."""
    from convrag.sources import REPO_ROOT

    root = str(REPO_ROOT) + "/"
    return where[len(root):] if where.startswith(root) else where


def _model_entry(key: str, repo: str, revision: str | None, stated: bool) -> dict[str, Any]:
    """A model's weights. ``stated``: the config (or the registry) gives ``revision``; otherwise
    the model loads at resources/sources.yaml's pin, else the lock file's (``revision`` = lock)."""
    return {"key": key, "kind": "hf-model", "repo": repo, "revision": revision, "stated": stated, "path": "",
            "sha256": None, "git_blob": None, "evidence": hf_model(repo).get("evidence")}


def _metric_models(config: dict) -> Iterator[tuple[str, str]]:
    """(config key, hub repository) of the models the active studies' metrics load by themselves
    (``Study.hub_models``: each study knows its own; this module never imports a study)."""
    from convrag.studies import all_studies

    studies = all_studies(config.get("study_plugins") or ())
    for key in config.get("studies") or []:
        for where, repo in studies[key].hub_models(config):
            if _is_hub_id(repo):
                yield where, repo


def config_downloads(config: dict, registry: dict | None = None) -> list[dict[str, Any]]:
    """Every download a (validated) config implies, one dict per file or model: key (the config
    key it comes from), kind (github / url / hf-dataset / hf-model), repo, revision, path,
    sha256, git_blob, evidence, lock (the lock file a ``lock`` revision is recorded in)."""
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
                hf = HF_RESOLVE.match(f["url"])
                if hf:
                    repo, rev, path = hf.groups()
                    pin = hf_dataset(repo)
                    e = {"key": key, "kind": "hf-dataset", "repo": repo, "revision": rev, "path": path,
                         "sha256": f.get("sha256") or hf_dataset_sha256(repo, rev, path),
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
                        or hf_dataset_sha256(s["repo_id"], s.get("revision"), s[role]),
                        "git_blob": None, "evidence": pin.get("evidence")})
    rest = {k: v for k, v in config.items() if k not in ("benchmarks", "corpora")}
    for where, f in _url_mappings(rest):  # {url, sha256 / git_blob} anywhere else (a study's pinned file)
        if f["url"] not in seen_urls:
            seen_urls.add(f["url"])
            out.append(_url_entry(where, f["url"], f.get("sha256"), f.get("git_blob")))
    for v in _walk_strings(rest):
        if v.startswith(("https://", "http://")) and v not in seen_urls:
            seen_urls.add(v)
            out.append(_url_entry(f"(a URL in the config) {v}", v))
    used = sorted({v for v in _walk_strings(config) if v in registry})
    for m in used:
        spec = registry[m]
        weights = getattr(spec, "weights", None) or {}
        if "hf_repo" in weights:
            where = spec.where("revision") if hasattr(spec, "where") else f"models.yaml: {m}.revision"
            out.append(_model_entry(f"model {m} ({_relative(where)})", weights["hf_repo"], spec.revision, True))
    for name, r in config.get("retrievers", {}).items():
        params = r.get("params") or {}
        if _is_hub_id(params.get("model")):  # dense / sparse: params.revision, default lock
            out.append(_model_entry(f"retrievers.{name}.params.model", params["model"],
                                    params.get("revision", LOCK), "revision" in params))
        if _is_hub_id(params.get("embedding")):  # a graph retriever's encoder: no revision key
            out.append(_model_entry(f"retrievers.{name}.params.embedding", params["embedding"], LOCK, False))
    kg = (config.get("knowledge_graph") or {}).get("embedding")
    if _is_hub_id(kg):
        out.append(_model_entry("knowledge_graph.embedding", kg, LOCK, False))
    for key, repo in _metric_models(config):
        out.append(_model_entry(key, repo, LOCK, False))
    for e in out:
        if e["kind"] == "hf-model" and e["revision"] == LOCK:
            e["revision"] = pinned_model_revision(e["repo"])  # what model_revision loads
        if e["revision"] == LOCK:
            e["lock"] = lock_path(config)
    return out


def problems(entries: list[dict[str, Any]]) -> list[str]:
    """Each download that is not pinned, naming its config key: a branch name or no revision; a
    GitHub file or URL without a checksum; a Hugging Face repository that resources/sources.yaml
    does not list, or whose revision there differs from the config's (every ``lock`` entry is
    pinned at its first download, in the lock file)."""
    out = []
    for e in entries:
        rev = e["revision"]
        if e["kind"] == "url":
            if not (e["sha256"] or e["git_blob"]):
                out.append(f"{e['key']}: {e['repo']} has no checksum")
            continue
        hf = e["kind"].startswith("hf-")
        if not (is_commit(rev) or (hf and rev == LOCK)):
            out.append(f"{e['key']}: revision {rev!r} of {e['repo']} is not a commit (40 hex digits)"
                       + (" or 'lock'" if hf else ""))
        elif e["kind"] == "github" and not (e["sha256"] or e["git_blob"]):
            out.append(f"{e['key']}: {e['repo']}@{rev[:12]} {e['path']} has no checksum in {SOURCES_PATH.name}")
        elif hf:
            listed = (hf_model if e["kind"] == "hf-model" else hf_dataset)(e["repo"]).get("revision")
            if listed is None:
                out.append(f"{e['key']}: {e['repo']} is not listed in {SOURCES_PATH.name} (its revision and the "
                           "evidence for it)")
            elif listed != rev:
                out.append(f"{e['key']}: revision {rev!r} of {e['repo']}, but {SOURCES_PATH.name} lists {listed!r}")
    return out


def describe(e: dict[str, Any]) -> str:
    lock = f"recorded at first download: {e.get('lock') or 'the lock file'}"
    check = (f"sha256 {e['sha256'][:12]}" if e.get("sha256") else f"git blob {e['git_blob'][:12]}" if e.get("git_blob")
             else lock if e["revision"] == LOCK
             else "the commit pins every file" if e["kind"] == "hf-model" and is_commit(e["revision"])
             else "none")
    rev = e["revision"] if e["revision"] == LOCK or not e["revision"] else e["revision"][:12]
    return f"{e['kind']:10} {e['repo']}@{rev} {e['path']}  [{check}]"


def prefetch_models(entries: list[dict[str, Any]], snapshot=None) -> list[str]:
    """Fetch the weights of every Hugging Face model in ``entries`` into the local hub cache
    (``HF_HOME``) at the commit its jobs will load (``lock``: resolved now and recorded in the
    run's lock file): the login-node step of a cluster run whose nodes have no internet, which
    then load with ``HF_HUB_OFFLINE=1``. One line per model: repo@commit and its folder."""
    from convrag.sources import Lock, model_revision

    if snapshot is None:
        from huggingface_hub import snapshot_download as snapshot
    out, seen = [], set()
    for e in entries:
        if e["kind"] != "hf-model" or (e["repo"], e["revision"]) in seen:
            continue
        seen.add((e["repo"], e["revision"]))
        rev = model_revision(f"{e['key']}:", e["repo"], e["revision"], lock=Lock(e.get("lock")))
        # Meta's original/*.pth checkpoints duplicate the safetensors that transformers and vLLM load
        folder = snapshot(repo_id=e["repo"], revision=rev, ignore_patterns=["original/*", "*.pth"])
        out.append(f"{e['repo']}@{rev}: {folder}")
    return out
