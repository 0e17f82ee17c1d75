"""Atomic file writes and line-checked JSON(L) reading.

Every output is written to a temporary file in the same folder and renamed into place,
so a killed job never leaves a partial file that Snakemake could mistake for a result.
The temporary file (``mkstemp``: mode 0600) and folder (``mkdtemp``: 0700) get the mode a plain
``open()`` / ``mkdir()`` would give under the user's umask before they are renamed into place,
so a colleague who may read the results folder can read every table (``public_mode``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from convrag.errors import DataError


def umask() -> int:
    """The process's umask, read without changing it where the OS tells (Linux >= 4.7:
    ``/proc/self/status``), else by setting and restoring it. The umask is process-wide, so the
    fallback changes it for every thread for an instant: it is called once, at import (under
    the import lock, before a job starts threads), and sets 022 rather than 0 meanwhile, so a
    file another thread might create in that instant is never group- or world-writable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


_UMASK = umask()  # read once; ``public_mode`` only reads it, from any thread


def process_umask() -> int:
    """The umask this process's outputs follow (read at import, or set by ``adopt_umask``)."""
    return _UMASK


def adopt_umask(mask: int) -> None:
    """Take ``mask`` as this process's umask, for ``open()`` and ``public_mode`` alike: a job
    forked from the warm server (convrag.warm) takes its client's umask, as a fresh process
    would. Call it before the job starts threads."""
    global _UMASK
    os.umask(mask)
    _UMASK = mask


def public_mode(path: str | os.PathLike) -> None:
    """Give ``path`` the mode ``open()`` (a file: 0666) or ``mkdir()`` (a folder: 0777) would
    give it under this process's umask: for what ``mkstemp`` / ``mkdtemp`` made private."""
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~_UMASK)


def public_tree(root: str | os.PathLike) -> None:
    """``public_mode`` on a staged folder and everything in it, before it is renamed into place:
    libraries write some files private (safetensors' ``save_file`` makes 0600 model weights)."""
    public_mode(root)
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            p = os.path.join(folder, name)
            if not os.path.islink(p):
                public_mode(p)


def temp_dir(parent: str | os.PathLike, prefix: str, suffix: str = "") -> Path:
    """A new temporary folder in ``parent`` (renamed into place later) with ``mkdir()``'s mode."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    public_mode(tmp)
    return tmp


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    public_mode(tmp)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[Any]:
    """Open a temporary file for writing; it replaces ``path`` only if the block succeeds."""
    with atomic_path(path) as tmp:
        if "b" not in mode:
            kwargs.setdefault("encoding", "utf-8")
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


def write_json(path: str | os.PathLike, obj: Any) -> None:
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=False)
        fh.write("\n")


def write_jsonl(path: str | os.PathLike, records: Iterable[Any]) -> None:
    with atomic_open(path) as fh:
        for rec in records:
            if hasattr(rec, "to_dict"):
                rec = rec.to_dict()
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def json_error(e: json.JSONDecodeError, line: bool = False) -> str:
    """What went wrong and where: the message with its column (and line, for a whole document),
    e.g. ``Invalid control character at: column 41`` for a line cut off mid-string."""
    return f"{e.msg}: column {e.colno}" if line else f"{e.msg}: line {e.lineno} column {e.colno}"


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({json_error(e)})") from e
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for non-blank lines; a missing file names its path."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield lineno, line.rstrip("\n")


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, record)``; a malformed line raises DataError naming file:line."""
    for lineno, line in iter_lines(path):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: malformed JSON line ({json_error(e, line=True)})") from e
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(rec).__name__}")
        yield lineno, rec


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return [rec for _, rec in iter_jsonl(path)]


def write_parquet(df, path: str | os.PathLike) -> None:
    """A DataFrame as Parquet, atomically (the score tables every study writes)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)
