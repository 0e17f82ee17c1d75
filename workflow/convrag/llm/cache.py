"""Persistent LLM response cache (one SQLite file per results tree).

Why SQLite in WAL mode: many Snakemake jobs of one results tree answer overlapping requests
at the same time; WAL lets readers run while one writer commits, the busy timeout plus a
retry loop absorbs lock contention, and every batch is committed as soon as it is answered,
so a crash or restart never pays for a call twice. WAL needs a local (or lock-correct)
filesystem; on NFS-like storage set ``CONVRAG_CACHE_JOURNAL=DELETE``.

Why the key covers everything: the key is a sha256 of the canonical JSON of model identity,
revision, the full messages, every sampling setting, seed, sample index, labels and JSON
mode. Repeated stochastic samples (different ``sample_index``) therefore stay distinct, and
a different model never serves another model's answer (the LightRAG cache bug).

Threads: one connection per process, opened with ``check_same_thread=False`` and used under a
lock, so the engines of a job may call the cache from several threads (a job overlapping its
API roles with its GPU work); a busy database's retry sleeps outside the lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from convrag.errors import DataError
from convrag.io import public_mode
from convrag.llm.types import Request

KEY_VERSION = 1
_CHUNK = 500  # stay far below SQLite's host-parameter limit


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def cache_key(model_id: str, revision: str | None, request: Request) -> str:
    """sha256 over model, revision, messages and every request setting (see module doc)."""
    payload = {"v": KEY_VERSION, "model": model_id, "revision": revision, **request.to_dict()}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def prompt_hash(request: Request) -> str:
    """sha256 of the messages alone: names a prompt in traces and bundle manifests without copying
    it, and lets two models' entries for one prompt be matched (the cache key mixes in the model)."""
    return hashlib.sha256(canonical_json(request.chat).encode("utf-8")).hexdigest()


# SQLite's result codes for a file that is not a database or is damaged (sqlite3 gives the name of
# each error's code: Python >= 3.11)
_DAMAGED = ("SQLITE_NOTADB", "SQLITE_CORRUPT")


def _unreadable(path: Path, e: sqlite3.DatabaseError) -> str:
    """What a user can do about a cache file SQLite cannot read: it holds model answers only, so
    moving it aside costs model calls again, never a result."""
    return (f"{path}: the LLM cache is not a readable SQLite database ({e}). It only holds cached model answers: "
            f"move it aside (mv {path} {path}.broken) or delete it, together with any {path.name}-wal and "
            f"{path.name}-shm beside it, and rerun; the answers are then asked again (or restore it from a "
            "bundle: convrag cache import)")


class LLMCache:
    """``get_many(keys) -> {key: value}`` and ``put_many({key: value})`` over JSON values."""

    def __init__(self, path: str | os.PathLike, timeout_s: float = 60.0, retries: int = 20):
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.retries = retries
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._lock = threading.RLock()  # the connection is shared by the process's threads
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._retry(self._init_schema)

    # -- connection handling -------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is None or self._pid != os.getpid():
            new = not self.path.exists()
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            try:
                if new:  # SQLite creates 0644 & ~umask; -wal/-shm files copy the database's mode
                    try:
                        public_mode(self.path)
                    except PermissionError:  # another user's process created it first: its mode stands
                        pass
                conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
                journal = os.environ.get("CONVRAG_CACHE_JOURNAL", "WAL").upper()
                conn.execute(f"PRAGMA journal_mode={journal}")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error:
                conn.close()
                raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _retry(self, fn, *args):
        """Run ``fn`` and retry with jittered backoff while the database is locked or busy; a file
        that is not an SQLite database or is damaged is a DataError naming it (``_unreadable``)."""
        for attempt in range(self.retries + 1):
            try:
                with self._lock:
                    return fn(*args)
            except sqlite3.DatabaseError as e:
                if getattr(e, "sqlite_errorname", "") in _DAMAGED:
                    self.close()
                    raise DataError(_unreadable(self.path, e)) from e
                msg = str(e).lower()
                if not isinstance(e, sqlite3.OperationalError) or ("locked" not in msg and "busy" not in msg) \
                        or attempt == self.retries:
                    raise
                time.sleep(min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random()))

    def _init_schema(self) -> None:
        self._connection().execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
            "created REAL NOT NULL)")

    # -- public API ----------------------------------------------------------------------
    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, Any] = {}
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i:i + _CHUNK]
            q = f"SELECT key, value FROM responses WHERE key IN ({','.join('?' * len(chunk))})"
            rows = self._retry(lambda: self._connection().execute(q, chunk).fetchall())
            out.update((k, json.loads(v)) for k, v in rows)
        return out

    def put_many(self, items: Mapping[str, Any]) -> None:
        if not items:
            return
        now = time.time()
        rows = [(k, json.dumps(v, ensure_ascii=False), now) for k, v in items.items()]

        def write():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")  # take the write lock up front: no upgrade deadlock
            try:
                conn.executemany("INSERT OR REPLACE INTO responses (key, value, created) VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        self._retry(write)

    def __len__(self) -> int:
        return self._retry(lambda: self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
