"""Download one file (from a Hugging Face repository or by URL) and record what was downloaded.

Why a sidecar: a paper grid is only reproducible if the exact input bytes are known. Each
download writes ``<out>.sha256`` (JSON: repo, revision, file, sha256, size, time) beside the
file; an expected ``sha256`` or git blob id (``resources/sources.yaml``) stops the run on any
change instead of silently using different data. A Hugging Face revision ``lock`` (no commit
could be verified when the config was written) is resolved at the first download and recorded,
with the file's sha256, in the run's lock file (``convrag.sources.Lock``); later downloads use
that commit and must match that sha256.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from huggingface_hub import hf_hub_download

from convrag.errors import DataError
from convrag.io import atomic_path, write_json

# The HippoRAG 2 evaluation sets (1,000 questions each, shared corpus) in the HF dataset
# repo osunlp/HippoRAG_2: format -> (question file, corpus file). Not fetched from the hub
# here (no hub access on the build machines); found with the code/docs search index: the
# HF file page .../osunlp/HippoRAG_2/blob/main/hotpotqa_corpus.json ("Upload 8 files"), and
# public download scripts that list the same 8 files (these 6 plus
# narrativeqa_dev_10_doc{,_corpus}.json). One of those scripts pins revision
# 5ec05b38deecc3318bb432c69865959c56058990 with 11,656 MuSiQue and 6,119 2Wiki passages;
# unverified here, so the configs keep their own revision and optional sha256.
HIPPORAG_REPO = "osunlp/HippoRAG_2"
HIPPORAG_FILES: dict[str, tuple[str, str]] = {
    "musique": ("musique.json", "musique_corpus.json"),
    "2wikimultihopqa": ("2wikimultihopqa.json", "2wikimultihopqa_corpus.json"),
    "hotpotqa": ("hotpotqa.json", "hotpotqa_corpus.json"),
}


# A download mirror (config ``download_mirror``; every job finds it here): a base URL that serves
# each file at ``<mirror>/<host>/<path>`` of its original URL, Hugging Face repositories included
# (``<mirror>/huggingface.co`` as the hub endpoint). `convrag miniature` points it at a loopback
# server of the shared samples; the URLs, revisions, locks and checksums stay the config's own.
MIRROR_ENV = "CONVRAG_DOWNLOAD_MIRROR"


def mirror_base(mirror: str | None = None) -> str | None:
    """The mirror's base URL (the argument, else $CONVRAG_DOWNLOAD_MIRROR), or None."""
    m = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    return m.rstrip("/") if m else None


def mirrored(url: str, mirror: str | None = None) -> str:
    """Where ``url`` is fetched from: the URL itself, or its place on the mirror."""
    base = mirror_base(mirror)
    if not base:
        return url
    parts = urlsplit(url)
    return f"{base}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, read in chunks."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _check(path: Path, where: str, sha256: str | None, git_blob: str | None) -> tuple[str, int]:
    """(sha256, size) of a downloaded file; a mismatch with the expected sha256 / git blob id is an error."""
    from convrag.sources import git_blob_id

    digest, size = sha256_file(path)
    if sha256 is not None and digest != sha256.lower():
        raise DataError(f"sha256 mismatch for {where}: expected {sha256}, got {digest}")
    if git_blob is not None and sha256 is None and git_blob_id(path) != git_blob.lower():
        raise DataError(f"git blob id mismatch for {where}: expected {git_blob}, got {git_blob_id(path)}")
    return digest, size


def download_file(
    repo_id: str,
    filename: str,
    revision: str,
    out_path: str | Path,
    repo_type: str = "dataset",
    sha256: str | None = None,
    cache_dir: str | Path | None = None,
    lock: str | Path | None = None,
) -> str:
    """Fetch ``filename`` at ``revision`` into ``out_path``; return its sha256 (hex).

    The file comes through the huggingface_hub cache (``cache_dir``, default HF_HOME), is
    copied to a temporary file beside ``out_path``, hashed, checked against ``sha256`` and
    only then renamed into place, so a mismatch or a crash never leaves a file behind.
    """
    from convrag.sources import LOCK, Lock

    out = Path(out_path)
    locked, key = Lock(lock), f"hf-{repo_type}:{repo_id}/{filename}"
    if revision == LOCK:  # the commit and sha256 of the first download, if there was one
        entry = locked.get(key) or {}
        revision, sha256 = entry.get("revision"), sha256 or entry.get("sha256")
    where = f"{repo_type} {repo_id}@{revision or 'default branch'}: {filename}"
    endpoint = mirror_base()
    scratch = None
    if endpoint:  # a mirror's bytes never enter the shared hub cache under the real commit
        endpoint += "/huggingface.co"
        where += f" (mirror {endpoint})"
        scratch = tempfile.TemporaryDirectory(prefix="convrag-mirror-")
        cache_dir = scratch.name
    from huggingface_hub import constants as hf_constants

    offline = hf_constants.HF_HUB_OFFLINE
    if endpoint and urlsplit(endpoint).hostname in ("127.0.0.1", "localhost", "::1"):
        hf_constants.HF_HUB_OFFLINE = False  # a loopback mirror is this machine, not the hub
    try:
        cached = hf_hub_download(
            repo_id=repo_id, filename=filename, revision=revision, repo_type=repo_type,
            cache_dir=str(cache_dir) if cache_dir is not None else None, endpoint=endpoint,
        )
    except Exception as e:  # network, auth, missing file: one clear message for the log
        if scratch is not None:
            scratch.cleanup()
        raise DataError(f"download failed for {where}: {type(e).__name__}: {e}") from e
    finally:
        hf_constants.HF_HUB_OFFLINE = offline
    parts = Path(cached).parts  # .../snapshots/<commit>/<filename>: the commit actually served
    commit = parts[parts.index("snapshots") + 1] if "snapshots" in parts else revision
    try:
        with atomic_path(out) as tmp:
            shutil.copyfile(cached, tmp)
            digest, size = _check(tmp, where, sha256, None)
    finally:
        if scratch is not None:
            scratch.cleanup()
    locked.record(key, {"revision": commit, "sha256": digest, "bytes": size})
    revision = commit
    write_json(out.with_name(out.name + ".sha256"), {
        "repo_id": repo_id,
        "repo_type": repo_type,
        "revision": revision,
        "filename": filename,
        "sha256": digest,
        "bytes": size,
        "downloaded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **({"mirror": endpoint} if endpoint else {}),
    })
    return digest


HF_LOCKED = "/resolve/lock/"  # a Hugging Face file URL whose commit is kept in the lock file


def download_url(url: str, out_path: str | Path, sha256: str | None = None, retries: int = 3,
                 timeout_s: float = 120.0, backoff_s: float = 2.0, git_blob: str | None = None,
                 lock: str | Path | None = None) -> str:
    """Fetch a file by URL (a GitHub raw file, a Hugging Face ``resolve`` URL) into ``out_path``,
    with ``retries`` attempts and exponential backoff on network errors and 5xx answers; the same
    checks (sha256, else git blob id) and sidecar as ``download_file``; a 4xx answer fails at once.
    A Hugging Face URL at revision ``lock`` takes the lock file's commit and sha256; the first
    download takes the default branch and records the commit the hub served (``X-Repo-Commit``)."""
    import time
    import urllib.error
    import urllib.request

    from convrag.sources import Lock

    out = Path(out_path)
    locked, key = Lock(lock), None
    if HF_LOCKED in url:
        key = "hf-url:" + url.replace(HF_LOCKED, "/resolve/")
        entry = locked.get(key) or {}
        sha256 = sha256 or entry.get("sha256")
        url = url.replace(HF_LOCKED, f"/resolve/{entry.get('revision') or 'main'}/")
    last: Exception | None = None
    commit = None
    fetch = mirrored(url)  # the URL itself, or its place on the configured mirror
    for attempt in range(retries):
        try:
            with atomic_path(out) as tmp:
                with urllib.request.urlopen(fetch, timeout=timeout_s) as resp, open(tmp, "wb") as fh:
                    commit = resp.headers.get("X-Repo-Commit")
                    shutil.copyfileobj(resp, fh, 1 << 20)
                digest, size = _check(tmp, url, sha256, git_blob)
            break
        except urllib.error.HTTPError as e:
            if e.code < 500:
                raise DataError(f"download failed for {url}: HTTP {e.code} {e.reason}") from e
            last = e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            last = e
        if attempt + 1 < retries:
            time.sleep(backoff_s * 2 ** attempt)
    else:
        raise DataError(f"download failed for {url} after {retries} attempts: {type(last).__name__}: {last}")
    if key is not None:
        if not commit:
            raise DataError(f"{url}: the hub sent no X-Repo-Commit header, so the revision cannot be locked; "
                            "pin a commit in the config")
        locked.record(key, {"revision": commit, "sha256": digest, "bytes": size})
    write_json(out.with_name(out.name + ".sha256"), {
        "url": url, "sha256": digest, "bytes": size,
        "downloaded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **({"mirror": fetch} if fetch != url else {}),
    })
    return digest
