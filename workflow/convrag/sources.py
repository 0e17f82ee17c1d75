"""Pinned, verified sources: what every config downloads, at which revision, with which checksum.

Why: a paper grid is only reproducible if its input bytes and model weights are known; a branch
name moves, and a model's revision is part of the LLM cache key. ``resources/sources.yaml`` is the
one list of pins (GitHub files with their git blob ids and sha256, verified against a snapshot of
the repository; Hugging Face repositories with a commit where one is known, else ``lock``).
``lock`` means: the first download resolves the default branch to its commit and records it, with
each file's sha256, in the run's lock file (``Lock``); every later run is pinned to those.

What a config downloads, joined with these pins, is ``convrag.downloads`` (``convrag sources``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import yaml

from convrag.errors import ConfigError, DataError

from convrag.resources import REPO_ROOT  # noqa: E402

SOURCES_PATH = REPO_ROOT / "resources" / "sources.yaml"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
LOCK = "lock"  # a revision resolved at the first download and recorded in the lock file
LOCK_ENV = "CONVRAG_SOURCES_LOCK"  # the lock file of this run (set by the workflow for every job)


@functools.lru_cache(maxsize=None)
def load_sources(path: str = str(SOURCES_PATH)) -> dict:
    return yaml.safe_load(Path(path).read_text()) or {}


def is_commit(revision: Any) -> bool:
    return isinstance(revision, str) and bool(COMMIT.match(revision))


def github_pin(repo: str, commit: str, path: str) -> dict[str, Any]:
    """The pin of one file of a GitHub repository at a commit: {git_blob, bytes, sha256}, each
    present where known; {} when ``resources/sources.yaml`` does not list it."""
    commits = (load_sources().get("github", {}).get(repo) or {}).get("commits") or {}
    return dict((commits.get(commit) or {}).get(path) or {})


def github_file(repo: str, commit: str, path: str) -> dict[str, Any]:
    """Download spec of a file of a GitHub repository: url (raw) and its checksums."""
    pin = github_pin(repo, commit, path)
    return {"url": f"https://raw.githubusercontent.com/{repo}/{commit}/{path}", "sha256": pin.get("sha256"),
            "git_blob": pin.get("git_blob")}


def hf_dataset(repo_id: str) -> dict[str, Any]:
    return dict(load_sources().get("huggingface", {}).get("datasets", {}).get(repo_id) or {})


def hf_dataset_sha256(repo_id: str, revision: str | None, path: str) -> str | None:
    """The sha256 ``resources/sources.yaml`` gives a Hugging Face dataset file, when ``revision``
    is the commit it was listed at (another revision's bytes are not known; None then)."""
    pin = hf_dataset(repo_id)
    if revision != pin.get("revision"):
        return None
    return ((pin.get("files") or {}).get(path) or {}).get("sha256")


def hf_model(repo_id: str) -> dict[str, Any]:
    """The entry of a model repository in ``resources/sources.yaml`` ({revision, evidence}); {}
    when it is not listed."""
    return dict(load_sources().get("huggingface", {}).get("models", {}).get(repo_id) or {})


def pinned_model_revision(repo_id: str) -> str:
    """The revision ``resources/sources.yaml`` gives a model repository (a commit), else ``lock``:
    what a model loaded without a config revision (a metric's model, a graph retriever's
    encoder) is loaded at."""
    rev = hf_model(repo_id).get("revision")
    return rev if is_commit(rev) else LOCK


def git_blob_id(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Git's blob id of a file: sha1 over ``blob <size>\\0`` and the content."""
    import hashlib

    h = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


# ---- the lock file -------------------------------------------------------------------------------


class Lock:
    """The run's lock file (JSON: key -> {revision, sha256, bytes, recorded_at}). A ``lock``
    revision reads its commit here; the first download or model load writes it. Writes take an
    exclusive file lock, so parallel download jobs add their entries without losing any."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None

    @classmethod
    def from_env(cls) -> "Lock":
        return cls(os.environ.get(LOCK_ENV) or None)

    def read(self) -> dict[str, dict]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            return json.loads(self.path.read_text() or "{}")
        except json.JSONDecodeError as e:
            raise DataError(f"{self.path}: invalid lock file ({e})") from e

    def get(self, key: str) -> dict | None:
        return self.read().get(key)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".flock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def record(self, key: str, entry: dict) -> dict:
        """Add ``entry`` under ``key``; an existing entry must agree (revision, sha256)."""
        if self.path is None:
            return entry
        from convrag.io import write_json

        with self._exclusive():
            data = self.read()
            old = data.get(key)
            if old is not None:
                for k in ("revision", "sha256"):
                    if entry.get(k) and old.get(k) and entry[k] != old[k]:
                        raise DataError(f"{self.path}: {key} is locked to {k} {old[k]}, but this download got {entry[k]}"
                                        " (the upstream file or branch changed; delete the entry to accept the new one)")
                return old
            data[key] = {**entry, "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
            write_json(self.path, dict(sorted(data.items())))
            return data[key]


def lock_path(config: dict) -> str:
    """The config's lock file: ``sources_lock``, else ``<results_dir>/sources.lock.json``."""
    return config.get("sources_lock") or f"{config.get('results_dir', 'results')}/sources.lock.json"


def model_revision(kind: str, repo_id: str, revision: str | None, *, lock: Lock | None = None) -> str | None:
    """The commit to load a Hugging Face model at: ``revision`` if it is one; for ``lock`` the
    commit ``resources/sources.yaml`` pins for the repository, else the lock file's entry, else the
    default branch resolved now through huggingface_hub and recorded in the lock file."""
    if revision != LOCK:
        return revision
    if is_commit(pinned := pinned_model_revision(repo_id)):
        return pinned
    lock = lock or Lock.from_env()
    key = f"hf-model:{repo_id}"  # one entry per model repository, whatever loads it
    entry = lock.get(key)
    if entry:
        return entry["revision"]
    try:
        from huggingface_hub import HfApi

        sha = HfApi().model_info(repo_id).sha
    except Exception as e:  # offline, unknown repo, auth: say what to do
        raise ConfigError(f"{kind} {repo_id}: revision 'lock' has no entry in the lock file "
                          f"({lock.path or 'none: set ' + LOCK_ENV}) and the hub could not resolve it "
                          f"({type(e).__name__}: {e}); run once with hub access, or pin a commit") from e
    return lock.record(key, {"revision": sha})["revision"]
