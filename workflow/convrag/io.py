"""Atomic file writes and line-checked JSON(L) and YAML reading.

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
from typing import IO, Any, Callable, Iterable, Iterator

import yaml

from convrag.errors import ConfigError, DataError


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


# ---- text that is not UTF-8 ------------------------------------------------------------------
# Python's UnicodeDecodeError gives a position inside the chunk a text reader happened to decode,
# and no file: a reader catches it (``utf8_errors``) and names the file, the line and the byte
# offset found by scanning the raw bytes again (only on that error path, so reading stays fast).

_SCAN_CHUNK = 1 << 20


def not_utf8(path: str | os.PathLike, label: str | None = None,
             open_binary: Callable[[], IO[bytes]] | None = None, error: UnicodeDecodeError | None = None) -> str:
    """The message for a file that is not UTF-8: ``<file>:<line>: not UTF-8 text at byte offset
    <n> (<reason> 0x<bytes>) ...``. The bytes are scanned from ``open_binary()`` (default: the
    file itself; a zip member gives its own opener) one chunk at a time, carrying a multi-byte
    character cut by a chunk's end over to the next chunk."""
    label = label or str(path)
    advice = ("every input file must be UTF-8 text: convert it (e.g. `iconv -f latin1 -t utf-8 IN > OUT`) "
              "or fix the bytes at that offset")
    opener = open_binary or (lambda: open(path, "rb"))
    offset, line, pending = 0, 1, b""
    with opener() as fh:
        while True:
            chunk = fh.read(_SCAN_CHUNK)
            data = pending + chunk
            if not data:
                break
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as e:
                cut = e.reason == "unexpected end of data" and e.end == len(data)
                if not (cut and chunk):  # a real error, or a character cut off by the end of the file
                    pos = offset + e.start
                    line += data.count(b"\n", 0, e.start)
                    return (f"{label}:{line}: not UTF-8 text at byte offset {pos} ({e.reason} "
                            f"0x{data[e.start:e.end].hex()}); {advice}")
                pending, data = data[e.start:], data[:e.start]
            else:
                pending = b""
            offset += len(data)
            line += data.count(b"\n")
            if not chunk:
                break
    why = f" ({error.reason})" if error is not None else ""
    return f"{label}: not UTF-8 text{why}; {advice}"


@contextlib.contextmanager
def utf8_errors(path: str | os.PathLike, label: str | None = None,
                open_binary: Callable[[], IO[bytes]] | None = None, error: type[Exception] = DataError
                ) -> Iterator[None]:
    """Read ``path`` as text inside this block: a UnicodeDecodeError becomes ``error`` naming the
    file, line and byte offset (``not_utf8``) instead of a traceback with neither."""
    try:
        yield
    except UnicodeDecodeError as e:
        raise error(not_utf8(path, label, open_binary, e)) from e


def read_text(path: str | os.PathLike, error: type[Exception] = DataError) -> str:
    """A whole UTF-8 file; a missing file or bytes that are not UTF-8 name the file (and line)."""
    path = Path(path)
    try:
        with utf8_errors(path, error=error):
            return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise error(f"{path}: file not found") from e


# ---- YAML without silently lost keys ----------------------------------------------------------


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that names one key twice (``key``; ``line`` and ``first`` 1-based)."""

    def __init__(self, key: Any, line: int, first: int, node_mark, key_mark):
        super().__init__("while constructing a mapping", node_mark,
                         f"found duplicate key {key!r} (first at line {first})", key_mark)
        self.key, self.line, self.first = key, line, first


class StrictLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that a mapping naming one key twice is an error.

    Why: YAML says the keys of a mapping are unique, but PyYAML keeps the last value silently, so
    a second ``smollm2-135m:`` entry in models.yaml or a repeated block in a config file replaced
    the first without a word. Merge keys (``<<``) may still be overridden by a key of their own
    mapping, as YAML's merge rule says."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
                if first != key_node.start_mark.line + 1:
                    raise DuplicateKeyError(key, key_node.start_mark.line + 1, first, node.start_mark,
                                            key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | os.PathLike, error: type[Exception] = ConfigError) -> Any:
    """A YAML file read with ``StrictLoader``: a duplicate key, a syntax error, bytes that are not
    UTF-8 or a missing file is ``error`` naming the file and line."""
    path = Path(path)
    loader = StrictLoader(read_text(path, error=error))
    loader.name = str(path)  # PyYAML's marks then name the file, not "<unicode string>"
    try:
        return loader.get_single_data()
    except DuplicateKeyError as e:
        raise error(f"{path}:{e.line}: duplicate key '{e.key}' (first at line {e.first}): YAML keeps only the "
                    "last value, so one of them would be lost silently; remove or rename one") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{path}{at}: invalid YAML: {e}") from e
    finally:
        loader.dispose()


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as fh, utf8_errors(path):
            return json.load(fh)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: invalid JSON ({json_error(e)})") from e
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for non-blank lines; a missing file names its path, bytes that
    are not UTF-8 the line and byte offset."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise DataError(f"{path}: file not found") from e
    with fh, utf8_errors(path):
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
