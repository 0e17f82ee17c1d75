"""Sizing planned jobs from a measured run's ``*.accounting.json`` files (``convrag estimate``).

Every model job writes, per role, what it asked of its model (requests, distinct requests,
prompt and completion tokens). A study's ``estimate`` maps each job its target config plans to
the measured jobs of the same stage and to a unit count (tasks, contexts, answers); this module
pools the measured tokens per unit (ratios of sums over jobs), scales them to the target's
units, and hands ``convrag.cost.Work`` to the generic cost model. Cold cache: a role's backend
figures are its asked-for ones times the job's distinct / asked requests. Where the target's
settings differ from the measured run's, completion tokens follow ``max_tokens`` per scenario
(``cost.reply_delta``) and prompts grow by a stated per-call delta (e.g. more passages shown).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from convrag.cost import SCENARIOS, Tokens, Work, WorkList, reply_delta
from convrag.errors import DataError

CHARS_PER_TOKEN = 4.0  # English text in subword tokenizers, for passage lengths read as text


def role_tokens(path, flat_role: str = "model") -> dict[str, Tokens]:
    """Per role of one accounting file, its asked-for counters with cold-cache backend figures.
    Roles are the mappings that carry ``requests`` (a one-model file carries them at the top:
    role ``flat_role``); errors name the file and key."""
    try:
        acc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read accounting: {e}") from e
    if not isinstance(acc, dict):
        raise DataError(f"{path}: not a JSON object (an accounting file)")
    out = {}
    for role, d in ({flat_role: acc} if "requests" in acc else acc).items():
        if not isinstance(d, dict) or "requests" not in d:
            continue
        for f in ("requests", "unique_requests", "prompt_tokens", "completion_tokens"):
            if not isinstance(d.get(f), (int, float)):
                raise DataError(f"{path}: key '{role}.{f}' is missing or not a number")
        r, p, c = float(d["requests"]), float(d["prompt_tokens"]), float(d["completion_tokens"])
        share = d["unique_requests"] / r if r else 1.0
        out[role] = Tokens(r, r * share, p, c, p * share, c * share)
    return out


def job_field(path, key: str) -> float | None:
    """A number of the file's ``job`` block (its units: tasks, items, contexts ...), else None."""
    acc = json.loads(Path(path).read_text(encoding="utf-8"))
    v = acc.get("job", {}).get(key) if isinstance(acc.get("job"), dict) else None
    return float(v) if isinstance(v, (int, float)) else None


@dataclass
class Pools:
    """Measured tokens per (stage key, role) with the units they cover, pooled over jobs."""

    units: dict = field(default_factory=lambda: defaultdict(float))
    tokens: dict = field(default_factory=lambda: defaultdict(Tokens))
    files: int = 0

    def add(self, key, path, units: float, rename=None, flat_role: str = "model") -> bool:
        """Add one measured job's file (False when it does not exist or covers no unit);
        ``rename``: a mapping or function of the file's role names."""
        if not Path(path).exists() or not units:
            return False
        self.files += 1
        for role, t in role_tokens(path, flat_role).items():
            role = rename(role) if callable(rename) else (rename or {}).get(role, role)
            self.units[(key, role)] += units
            self.tokens[(key, role)].add(t)
        return True

    def per_unit(self, key, role) -> Tokens | None:
        u = self.units.get((key, role), 0.0)
        return self.tokens[(key, role)].scaled(1.0 / u) if u and self.tokens[(key, role)].requests else None


def new_worklist(pools: Pools, study: str, results) -> tuple[WorkList, bool]:
    """An empty work list for ``study`` and whether anything was measured: a run without one of the
    study's accounting files sizes nothing, and the list's notes say so."""
    out = WorkList()
    if not pools.files:
        out.notes.append(f"the measured run ({results}) has no {study} accounting file: nothing sized")
    return out, bool(pools.files)


def work(study: str, kind: str, job: str, model: str, role: str, per: Tokens, units: float,
         max_tokens: float | None, prompt_delta: float = 0.0, series: str = "",
         chunk_units: float = 0.0) -> list[Work]:
    """The Work of one job and role in each scenario: ``per`` (measured tokens per unit) times
    ``units``; every request's prompt grows by ``prompt_delta`` tokens; its reply keeps the
    measured length capped at ``max_tokens`` ('measured') or sits at it ('long')."""
    out = []
    for sc in SCENARIOS:
        t = per.scaled(units)
        d = reply_delta(per, max_tokens, sc) if max_tokens else 0.0
        out.append(Work(study, kind, job, model, role, sc, t.grown(prompt_delta * t.requests, d * t.requests),
                        chunk_units, series))
    return out


def task_count(config: dict, benchmark: str, domain: str | None = None,
               domains: list | None = None, results: str | None = None) -> tuple[float | None, str]:
    """Tasks of a benchmark (one domain of it): counted in the target run's prepared task file
    (``labels.domain`` per record) when it exists, else the config's ``estimate.tasks.<benchmark>``
    (an integer over the benchmark, split evenly over ``domains``, or domain -> integer), else,
    for a benchmark whose tasks need no download (a sample of local files, or generated), its
    tasks counted by its loader (``local_task_counts``), else a dataset's ``n_questions``.
    (None, why) when unknown. ``results``: the run's folder when it
    is not the config's ``results_dir`` (a measured run copied elsewhere)."""
    from convrag.layout import Layout

    prepared = Path(Layout(results or config["results_dir"]).benchmark_tasks(benchmark))
    if prepared.exists():
        with open(prepared, encoding="utf-8") as fh:
            recs = [json.loads(line) for line in fh if line.strip()]
        n = sum(1 for r in recs if domain is None or (r.get("labels") or {}).get("domain") == domain)
        return float(n), str(prepared)
    hint = (config.get("estimate") or {}).get("tasks", {}).get(benchmark)
    if isinstance(hint, dict):
        if domain is None:
            return float(sum(hint.values())), f"estimate.tasks.{benchmark}"
        if domain in hint:
            return float(hint[domain]), f"estimate.tasks.{benchmark}.{domain}"
        return None, f"estimate.tasks.{benchmark} has no domain '{domain}'"
    if isinstance(hint, (int, float)):
        n = len(domains) if domain is not None and domains else 1
        return float(hint) / n, f"estimate.tasks.{benchmark}" + (f" / {n} domains" if n > 1 else "")
    spec = (config.get("benchmarks") or {}).get(benchmark)
    if isinstance(spec, dict):
        counted = local_task_counts(benchmark, spec)
        if counted is not None:
            by_domain, where = counted
            if domain is None:
                return float(sum(by_domain.values())), where
            return float(by_domain.get(domain, 0)), f"{where}, domain {domain}"
    ds = config.get("datasets", {}).get(benchmark)
    if isinstance(ds, dict) and "n_questions" in ds:
        return float(ds["n_questions"]), f"datasets.{benchmark}.n_questions"
    return None, f"set estimate.tasks.{benchmark} (its number of tasks) in the config"


def local_path(path: str) -> Path:
    """A ``{local: path}`` of the config as the workflow reads it: as given when it exists (or is
    absolute), else against the repository (Snakefile's ``from_repo``)."""
    from convrag.resources import REPO_ROOT

    p = Path(path)
    return p if p.is_absolute() or p.exists() else REPO_ROOT / p


_LOCAL_COUNTS: dict[str, tuple[dict[str, int], str] | None] = {}


def local_task_counts(benchmark: str, spec: dict) -> tuple[dict[str, int], str] | None:
    """Tasks per domain of a benchmark whose tasks need no download (a sample given as
    ``{local: path}`` files, or a benchmark the project generates), counted by its own loader
    as the ``benchmark_tasks`` rule reads it; None when a task file would be downloaded (or is
    missing). Counted once per benchmark spec."""
    from convrag.data.benchmarks import benchmark_loader

    key = json.dumps([benchmark, spec], sort_keys=True, default=str)
    if key in _LOCAL_COUNTS:
        return _LOCAL_COUNTS[key]
    loader = benchmark_loader(spec["kind"])
    raw = loader.raw_files(spec)
    names = loader.task_inputs(spec)
    files = {n: local_path(raw[n]["local"]) for n in names if "local" in raw.get(n, {})}
    out = None
    if len(files) == len(names) and all(f.is_file() for f in files.values()):
        tasks, _ = loader.tasks(benchmark, spec, {n: str(f) for n, f in files.items()})
        by_domain: dict[str, int] = {}
        for t in tasks:
            d = (t.labels or {}).get("domain")
            by_domain[d] = by_domain.get(d, 0) + 1
        where = (f"counted in the local files of benchmarks.{benchmark}" if names
                 else f"counted in the generated benchmarks.{benchmark}")
        out = (by_domain, where)
    _LOCAL_COUNTS[key] = out
    return out


def passage_tokens(measured: dict, corpora: list[str] | None = None) -> tuple[float, str]:
    """Tokens per passage of the target corpora: ``measured['passage_tokens']`` when given,
    else the measured run's corpora (``corpora``, else all) as characters / CHARS_PER_TOKEN."""
    if measured.get("passage_tokens"):
        return float(measured["passage_tokens"]), "--passage-tokens"
    root = Path(measured["results"]) / "corpora"
    files = [root / c / "corpus.jsonl" for c in corpora] if corpora else sorted(root.glob("*/corpus.jsonl"))
    chars = n = 0
    for f in files:
        if f.exists():
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        rec = json.loads(line)
                        chars += len(str(rec.get("title", ""))) + len(str(rec.get("text", "")))
                        n += 1
    if not n:
        return 0.0, "no measured corpus: passage counts kept as measured"
    return chars / n / CHARS_PER_TOKEN, f"{n:,} measured passages, {chars / n:.0f} characters / {CHARS_PER_TOKEN:.0f}"
