"""Portable LLM-cache bundles: the cache entries a set of targets needs, in one file.

Why: the LLM cache of a results tree holds every answer the run paid for, across all targets,
and is tied to that tree. To let a colleague rebuild some targets offline (no GPU, no API key),
``convrag cache export`` copies exactly the entries that a traced run of those targets used
(``llm_cache.trace``, see convrag.llm.engine) into one file, and ``convrag cache import`` adds
them to another cache, after which a strict replay (``llm_cache.replay: strict``) of the same
targets proves that every answer came from the bundle.

The file is a zip with two members: ``entries.jsonl`` (one ``{"key", "value"}`` line per cache
entry, sorted by key, canonical JSON) and ``manifest.json`` (format, the convrag version that
wrote it, the cache-key version, counts, the models with their ids, revisions and entry counts,
the jobs traced, per entry its model, roles and the sha256 of its prompt's messages, and the
sha256 of ``entries.jsonl``). The zip is written with fixed timestamps, so one trace over one
cache always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Iterable

from convrag import __version__
from convrag.errors import DataError
from convrag.llm.cache import KEY_VERSION, LLMCache, canonical_json
from convrag.llm.types import Response

FORMAT = "convrag-llm-cache-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ENTRIES = "entries.jsonl"
_KEY = re.compile(r"^[0-9a-f]{64}$")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps: a bundle's bytes depend on its content only


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- traces -------------------------------------------------------------------------------


def read_traces(dirs: Iterable[str | os.PathLike]) -> dict[str, dict[str, Any]]:
    """Key -> {model_id, revision, prompt_sha256, models, roles, jobs, uses} over every
    ``*.jsonl`` trace file in ``dirs`` (what the engines of a traced run appended)."""
    out: dict[str, dict[str, Any]] = {}
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise DataError(f"trace folder {d}: not found (run the targets with --config llm_cache='{{trace: {d}}}')")
        files = sorted(d.glob("*.jsonl"))
        if not files:
            raise DataError(f"trace folder {d}: no trace files (*.jsonl); did the traced run call any LLM?")
        for f in files:
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key, model_id, prompt = rec["key"], rec["model_id"], rec["prompt_sha256"]
                    revision = rec.get("revision")
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise DataError(f"{f}:{n}: not a trace record (needs key, model_id, prompt_sha256): {e}") from e
                if not isinstance(key, str) or not _KEY.match(key):
                    raise DataError(f"{f}:{n}: key {key!r} is not a sha256 cache key")
                e = out.setdefault(key, {"model_id": model_id, "revision": revision, "prompt_sha256": prompt,
                                         "models": set(), "roles": set(), "jobs": set(), "uses": 0,
                                         "first": f"{f}:{n}"})
                if (e["model_id"], e["revision"], e["prompt_sha256"]) != (model_id, revision, prompt):
                    raise DataError(f"{f}:{n}: key {key} traced with model {model_id}@{revision} and prompt {prompt}, "
                                    f"but {e['first']} has {e['model_id']}@{e['revision']} and {e['prompt_sha256']}")
                e["uses"] += 1
                for field, name in (("models", "model"), ("roles", "role"), ("jobs", "job")):
                    if rec.get(name):
                        e[field].add(str(rec[name]))
    return out


# ---- export -------------------------------------------------------------------------------


def _describe(key: str, e: dict[str, Any]) -> str:
    return (f"key {key} (model {', '.join(sorted(e['models'])) or '?'} = {e['model_id']}@{e['revision']}, "
            f"role {', '.join(sorted(e['roles'])) or 'unknown'}, job {', '.join(sorted(e['jobs'])) or 'unknown'}, "
            f"traced at {e['first']})")


def build_manifest(traced: dict[str, dict[str, Any]], entries_sha256: str) -> dict[str, Any]:
    models: dict[tuple, dict[str, Any]] = {}
    for e in traced.values():
        m = models.setdefault((e["model_id"], e["revision"] or ""), {
            "model_id": e["model_id"], "revision": e["revision"], "names": set(), "entries": 0})
        m["names"] |= e["models"]
        m["entries"] += 1
    jobs = sorted(set().union(*(e["jobs"] for e in traced.values())))
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "created_by": f"convrag {__version__}",
        "key_version": KEY_VERSION,
        "counts": {"entries": len(traced), "models": len(models), "jobs": len(jobs),
                   "trace_records": sum(e["uses"] for e in traced.values())},
        "models": [{**m, "names": sorted(m["names"])} for _, m in sorted(models.items())],
        "jobs": jobs,
        "entries_sha256": entries_sha256,
        "requests": [{"key": k, "model_id": e["model_id"], "revision": e["revision"],
                      "prompt_sha256": e["prompt_sha256"], "models": sorted(e["models"]),
                      "roles": sorted(e["roles"])} for k, e in sorted(traced.items())],
    }


def _write_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    """Write the zip next to ``path`` and rename it into place: never a half-written bundle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # plain open: the usual umask permissions
    try:
        with open(tmp, "wb") as fh, zipfile.ZipFile(fh, "w") as z:
            for name, data in members:
                info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                z.writestr(info, data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_bundle(cache_path: str | os.PathLike, trace_dirs: Iterable[str | os.PathLike],
                  out: str | os.PathLike) -> dict[str, Any]:
    """Write the entries of ``cache_path`` that the traces used to ``out``; return the manifest.
    A traced key absent from the cache is an error: the bundle would not rebuild the targets."""
    cache_path, out = Path(cache_path), Path(out)
    traced = read_traces(trace_dirs)
    if not cache_path.is_file():
        raise DataError(f"LLM cache {cache_path}: not found")
    with LLMCache(cache_path) as cache:
        found = cache.get_many(traced)
    missing = [k for k in sorted(traced) if k not in found]
    if missing:
        raise DataError(f"LLM cache {cache_path}: {len(missing)} of {len(traced)} traced requests are not in it, "
                        f"first {_describe(missing[0], traced[missing[0]])}; rebuild the targets with that cache "
                        f"before exporting")
    for k in sorted(found):
        try:
            Response.from_dict(found[k])
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"LLM cache {cache_path}: the value of {_describe(k, traced[k])} is not a response: "
                            f"{e!r}") from e
    payload = "".join(canonical_json({"key": k, "value": found[k]}) + "\n" for k in sorted(found)).encode("utf-8")
    manifest = build_manifest(traced, sha256_bytes(payload))
    _write_zip(out, [(MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")),
                     (ENTRIES, payload)])
    return manifest


# ---- import -------------------------------------------------------------------------------


def read_bundle(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, {key: value}) of a bundle, after checking its format, the sha256 of its entries
    and that the manifest's requests, models and counts describe exactly those entries."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"cache bundle {path}: not found")
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if not {MANIFEST, ENTRIES} <= names:
                raise DataError(f"cache bundle {path}: not a {FORMAT} (members {sorted(names)}, "
                                f"expected {MANIFEST} and {ENTRIES})")
            manifest_bytes, payload = z.read(MANIFEST), z.read(ENTRIES)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError) as e:
        raise DataError(f"cache bundle {path}: not a {FORMAT} (unreadable zip: {e})") from e
    try:
        manifest = json.loads(manifest_bytes)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"cache bundle {path}: {MANIFEST} is not JSON: {e}") from e
    fmt = (manifest.get("format"), manifest.get("format_version")) if isinstance(manifest, dict) else (None, None)
    if fmt != (FORMAT, FORMAT_VERSION):
        raise DataError(f"cache bundle {path}: unknown format {fmt[0]!r} version {fmt[1]!r} "
                        f"(this convrag reads {FORMAT} version {FORMAT_VERSION})")
    if manifest.get("key_version") != KEY_VERSION:
        raise DataError(f"cache bundle {path}: cache-key version {manifest.get('key_version')!r}, this convrag uses "
                        f"{KEY_VERSION}: its keys would never be looked up")
    digest = sha256_bytes(payload)
    if digest != manifest.get("entries_sha256"):
        raise DataError(f"cache bundle {path}: {ENTRIES} has sha256 {digest}, the manifest says "
                        f"{manifest.get('entries_sha256')}: the bundle was damaged or edited")
    entries: dict[str, Any] = {}
    for n, line in enumerate(payload.decode("utf-8").splitlines(), 1):
        try:
            rec = json.loads(line)
            key, value = rec["key"], rec["value"]
            Response.from_dict(value)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataError(f"cache bundle {path}: {ENTRIES} line {n} is not a cache entry: {e!r}") from e
        if key in entries:
            raise DataError(f"cache bundle {path}: {ENTRIES} line {n}: key {key} appears twice")
        entries[key] = value
    _check_manifest(path, manifest, entries)
    return manifest, entries


def _check_manifest(path: Path, manifest: dict[str, Any], entries: dict[str, Any]) -> None:
    try:
        requests = {r["key"]: r for r in manifest["requests"]}
        counts, models = manifest["counts"], manifest["models"]
        per_model: dict[tuple, int] = {}
        for r in requests.values():
            per_model[(r["model_id"], r["revision"])] = per_model.get((r["model_id"], r["revision"]), 0) + 1
        listed = {(m["model_id"], m["revision"]): m["entries"] for m in models}
    except (KeyError, TypeError) as e:
        raise DataError(f"cache bundle {path}: {MANIFEST} lacks {e} (requests, counts, models)") from e
    if set(requests) != set(entries):
        extra, lacking = sorted(set(entries) - set(requests)), sorted(set(requests) - set(entries))
        raise DataError(f"cache bundle {path}: the manifest's requests and {ENTRIES} differ "
                        f"({len(extra)} entries not in the manifest, {len(lacking)} manifest keys without an entry; "
                        f"first {(extra or lacking)[0]})")
    if counts.get("entries") != len(entries) or counts.get("models") != len(listed) or per_model != listed:
        raise DataError(f"cache bundle {path}: the manifest's counts ({counts}, models {listed}) do not match its "
                        f"{len(entries)} entries ({per_model})")


def import_bundle(bundle: str | os.PathLike, cache_path: str | os.PathLike) -> dict[str, int]:
    """Add a bundle's entries to the cache at ``cache_path`` (created if absent); return
    {entries, added, present}. A key the cache already holds with another value is a conflict:
    the import then writes nothing and fails, naming the keys."""
    manifest, entries = read_bundle(bundle)
    with LLMCache(cache_path) as cache:
        existing = cache.get_many(entries)
        conflicts = sorted(k for k, v in existing.items() if canonical_json(v) != canonical_json(entries[k]))
        if conflicts:
            req = {r["key"]: r for r in manifest["requests"]}[conflicts[0]]
            raise DataError(
                f"cache bundle {bundle}: {len(conflicts)} of its {len(entries)} entries conflict with different "
                f"values already in the LLM cache {cache_path} (first key {conflicts[0]}, model {req['model_id']}@"
                f"{req['revision']}, roles {', '.join(req['roles']) or 'unknown'}); nothing was imported. "
                f"Import into an empty cache, or remove those keys from {cache_path} first")
        new = {k: v for k, v in sorted(entries.items()) if k not in existing}
        cache.put_many(new)
    return {"entries": len(entries), "added": len(new), "present": len(existing)}


def summary(manifest: dict[str, Any]) -> str:
    """One line per model: what a bundle holds."""
    buf = io.StringIO()
    c = manifest["counts"]
    buf.write(f"{c['entries']} entries, {c['models']} model(s), {c['jobs']} job(s), "
              f"{c['trace_records']} traced uses\n")
    for m in manifest["models"]:
        buf.write(f"  {', '.join(m['names']) or '?'}: {m['model_id']} @ {m['revision']}: {m['entries']} entries\n")
    return buf.getvalue().rstrip("\n")
