"""One way to run a model-calling job: ``Job`` owns the engine pool, each role's accounting,
the wall time and the all-or-nothing writes.

A job writes several record files (one per cell or chunk) and one accounting file. Snakemake
treats a job as done when all its outputs exist, so a job that fails half-way must leave none
of them: every file is written atomically, the accounting last, and on any error the files
this call already wrote are removed before the error propagates.
"""

from __future__ import annotations

import time
from pathlib import Path

from convrag.cliargs import set_threads
from convrag.errors import ConfigError
from convrag.io import write_json
from convrag.records import write_records


class Job:
    """``with Job(registry, cache, threads) as job:`` then ``job.engine(model, role)`` per role
    (engines share one pool, so a model loads once; each role's cost is accounted apart) and one
    ``job.write(...)`` at the end. The pool is closed however the job ends."""

    def __init__(self, registry=None, cache=None, threads: int | None = None):
        set_threads(threads)
        self.t0 = time.time()
        self.registry, self.cache = registry, cache
        self._pool = None
        self.roles: dict = {}

    def engine(self, model: str, role: str, template_kwargs: dict | None = None):
        """``template_kwargs``: chat-template variables over the registry entry's (a grid's own
        thinking switch); they are part of the model's identity, hence of its cache keys."""
        if not self.registry:
            raise ConfigError(f"the {role} model '{model}' needs --registry")
        if self._pool is None:
            from convrag.llm.engine import EnginePool

            self._pool = EnginePool(self.registry, self.cache)
        self.roles[role] = engine = self._pool.engine(model, role=role, template_kwargs=template_kwargs)
        return engine

    def accounting(self, **counts) -> dict:
        """Each role's accounting, then the job's counts and its wall time so far."""
        return {**{role: e.accounting.to_dict() for role, e in self.roles.items()},
                "job": {**counts, "wall_seconds": round(time.time() - self.t0, 3)}}

    def write(self, files: dict[str, list], accounting_path: str | None, *, first=(), extra: dict | None = None,
              engine=None, **counts) -> None:
        """``files``: path -> records; ``first``: [(path, write(path))] written before them (a TREC
        run, a report); the accounting (with ``counts``, and ``extra``'s top-level keys) last.
        With ``engine``, the accounting is that one engine's totals and model identity
        (``Engine.write_accounting``: a shard job's, as the estimates read it). All or nothing."""
        records = [(p, lambda p, r=r: write_records(p, r)) for p, r in files.items()]
        write_acc = engine.write_accounting if engine is not None else \
            (lambda p: write_json(p, {**self.accounting(**counts), **(extra or {})}))
        acc = [(accounting_path, write_acc)] if accounting_path else []
        write_outputs([*first, *records, *acc])  # a job's stale outputs go too if it fails

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.close()


def write_job(files: dict[str, list], accounting_path: str | None, accounting: dict | None) -> None:
    """``files``: path -> records (Record objects or dicts), then the accounting as given."""
    write_outputs([*((p, lambda p, r=r: write_records(p, r)) for p, r in files.items()),
                   *([(accounting_path, lambda p: write_json(p, accounting))] if accounting_path is not None else [])])


def write_outputs(writes) -> None:
    """``writes``: [(path, write(path))] in order (the last is what Snakemake checks first);
    on any error every listed file is removed (those already written and any stale one of an
    earlier run) before the error propagates."""
    writes = list(writes)
    try:
        for path, write in writes:
            write(path)
    except BaseException:
        for path, _ in writes:
            Path(path).unlink(missing_ok=True)
        raise

