"""The all-or-nothing job writer shared by every model-calling job.

A job writes several record files (one per cell or chunk) and one accounting file. Snakemake
treats a job as done when all its outputs exist, so a job that fails half-way must leave none
of them: every file is written atomically, the accounting last, and on any error the files
this call already wrote are removed before the error propagates.
"""

from __future__ import annotations

from pathlib import Path

from convrag.io import write_json
from convrag.records import write_records


def write_job(files: dict[str, list], accounting_path: str | None, accounting: dict | None) -> None:
    """``files``: path -> records (Record objects or dicts)."""
    written: list[Path] = []
    try:
        for path, records in files.items():
            write_records(path, records)
            written.append(Path(path))
        if accounting_path is not None:
            write_json(accounting_path, accounting)
    except BaseException:
        for p in [*written, *[Path(p) for p in files]]:
            p.unlink(missing_ok=True)
        raise


def write_outputs(writes) -> None:
    """``writes``: [(path, write(path))] in order (the last is what Snakemake checks first);
    on any error the files already written are removed before the error propagates."""
    written: list[Path] = []
    try:
        for path, write in writes:
            write(path)
            written.append(Path(path))
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        raise

