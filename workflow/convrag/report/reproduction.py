"""Reproduction verdicts: every number a paper publishes beside ours, with a verdict.

Each study keeps its paper's published numbers in ``resources/published/<key>.yaml`` (one entry
per number; the values come from ``../shared/reference/published/``): where the paper states it,
the value and its interval, its scale, whether it is an ``estimate`` (judged against our 95%
interval) or ``deterministic`` (a fixed function of the same data, judged within a stated
``tolerance``), where our number lives (a target's CSV, a row selector, the value and interval
columns, a factor to the published scale), and what the comparison requires of the run (the
paper's models, data, domains, ...). The shared ``reproduction`` target reads the study's other
target tables and the run's description (``context["reproduction"]``, written by the study's
``context(config)``) and gives one row per published number:

- ``reproduced``: the published value lies in our 95% interval (bounds included), or within the
  tolerance of ours for a deterministic number;
- ``not reproduced``: it does not;
- ``not comparable``: the run differs from the paper where the number depends on it (a
  substituted model, generated data, an unreleased domain), the grid has no such row or target,
  the published number pools rows that our table keeps apart, our table gives no interval for an
  estimate, or the entry has no counterpart at all (``ours: null``). The reason says which. An
  entry may carry a standing ``reason`` beside ``ours`` (e.g. the paper does not name a model
  the number depends on): ours is shown, never judged.

Kept light (stdlib and yaml at import): every Snakemake start reads the published files to name
the reproduction target's inputs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from convrag.errors import DataError
from convrag.resources import REPO_ROOT

PUBLISHED_DIR = REPO_ROOT / "resources" / "published"

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE)
KINDS = ("estimate", "deterministic")
# points 0-100; share 0-1 (shares, precisions, F1, AUROC, kappa, correlations); ratio: unbounded
# (ratios, recovery shares that may pass 1); count: non-negative counts (tokens, calls, contexts)
SCALES = {"points": 100.0, "share": 1.0, "ratio": None, "count": None}
COLUMNS = ["id", "source", "what", "scale", "published", "published_ci_low", "published_ci_high", "ours",
           "ours_ci_low", "ours_ci_high", "kind", "tolerance", "verdict", "reason", "target", "where", "prompts"]
# A published file's ``requires: {prompts: supplied}`` (or a list of roles: ``[generation, idk]``): the
# number depends on the paper's prompts, so a run with the project's own wording (the run's
# ``prompts``: "own", or role -> "own") is "not comparable: own prompt wording"; ``prompts_used``
# (the run's prompt files, in words) fills every row's ``prompts`` column.
OWN_PROMPTS, SUPPLIED_PROMPTS = "own", "supplied"

_FILE_KEYS = {"study", "requires", "unreleased", "entries"}
_ENTRY_KEYS = {"id", "source", "what", "value", "ci", "scale", "kind", "tolerance", "ours", "reason", "requires",
               "unavailable"}
_OURS_KEYS = {"target", "where", "value", "low", "high", "scale", "agg"}
AGGS = ("min", "max", "mean", "sum", "count")  # a published range (or mean) over named rows; a total over rows


@dataclass(frozen=True)
class Ours:
    """Where our number is: one row of a target's CSV (``where``: column -> value), its value
    column, its 95% interval columns when the target has them, and the factor that puts it on
    the published scale (e.g. 100 for F1 0-1 against points; -1 where the paper takes the
    difference the other way round). With ``agg`` sum or count, our number is the total of the value
    column (or the number of rows) over every row ``where`` selects (a count of comparisons). With
    ``agg`` (min, max or mean), ``where`` may list several
    values of one column and our number is the lowest, highest or mean (on the published scale) of
    the rows it selects: the paper states a range over named retrievers or LLMs, or a mean over
    named models; every listed value must have a row."""

    target: str
    value: str
    where: dict[str, Any] = field(default_factory=dict)
    low: str | None = None
    high: str | None = None
    scale: float = 1.0
    agg: str | None = None


@dataclass(frozen=True)
class Entry:
    id: str
    source: str
    what: str
    value: float
    scale: str
    kind: str
    ours: Ours | None
    ci: tuple[float, float] | None = None
    tolerance: float | None = None
    reason: str | None = None
    requires: dict[str, Any] = field(default_factory=dict)
    unavailable: bool = False  # no run can give this number (the reason says why: the world, not our tables)


@dataclass(frozen=True)
class Published:
    path: str
    study: str
    entries: list[Entry]
    unreleased: dict[str, list] = field(default_factory=dict)

    def targets(self) -> list[str]:
        """The targets whose tables the entries read, in first-use order."""
        return list(dict.fromkeys(e.ours.target for e in self.entries if e.ours is not None))


# ---- loading and validation --------------------------------------------------------------------


def published_path(study_key: str) -> Path:
    return PUBLISHED_DIR / f"{study_key}.yaml"


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _requires(raw, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DataError(f"{where}: 'requires' must be a mapping (run key -> value or list), not {raw!r}")
    for k, v in raw.items():
        if isinstance(v, dict):
            raise DataError(f"{where}: requires.{k} must be a value or a list, not a mapping")
    return dict(raw)


def _ours(raw: dict, where: str) -> Ours:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: 'ours' must be a mapping (target, where, value, low, high, scale) or null")
    unknown = set(raw) - _OURS_KEYS
    if unknown:
        raise DataError(f"{where}: ours has unknown key(s) {', '.join(sorted(unknown))} (known: "
                        f"{', '.join(sorted(_OURS_KEYS))})")
    for k in ("target", "value"):
        if not isinstance(raw.get(k), str) or not raw[k]:
            raise DataError(f"{where}: ours.{k} must name a {'target' if k == 'target' else 'column'}")
    sel = raw.get("where") or {}
    agg = raw.get("agg")
    if agg is not None and agg not in AGGS:
        raise DataError(f"{where}: ours.agg must be one of {', '.join(AGGS)}, not {agg!r}")
    lists = [k for k, v in sel.items()] if isinstance(sel, dict) else []
    lists = [k for k in lists if isinstance(sel[k], list)]
    if not isinstance(sel, dict) or any(isinstance(v, dict) for v in sel.values()) or (lists and agg is None):
        raise DataError(f"{where}: ours.where must map columns to single values (a list needs ours.agg)")
    if agg in ("sum", "count"):
        if lists or raw.get("low") is not None:
            raise DataError(f"{where}: ours.agg {agg} totals every row 'where' selects: single values only, no interval")
    elif agg is not None and (len(lists) != 1 or raw.get("low") is not None):
        raise DataError(f"{where}: ours.agg takes one listed column in 'where' (the named rows) and no interval columns")
    if (raw.get("low") is None) != (raw.get("high") is None):
        raise DataError(f"{where}: ours needs both 'low' and 'high' interval columns, or neither")
    scale = raw.get("scale", 1)
    if not _is_number(scale) or scale == 0:
        raise DataError(f"{where}: ours.scale must be a non-zero number, not {scale!r}")
    return Ours(target=raw["target"], value=raw["value"], where=dict(sel), low=raw.get("low"), high=raw.get("high"),
                scale=float(scale), agg=agg)


def _entry(raw, i: int, path: str, defaults: dict) -> Entry:
    if not isinstance(raw, dict):
        raise DataError(f"{path}: entries[{i}]: an entry must be a mapping, not {raw!r}")
    eid = raw.get("id")
    if not isinstance(eid, str) or not eid:
        raise DataError(f"{path}: entries[{i}]: every entry needs an 'id'")
    where = f"{path}: entry '{eid}'"
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise DataError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                        f"(known: {', '.join(sorted(_ENTRY_KEYS))})")
    for k in ("source", "what"):
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise DataError(f"{where}: '{k}' must be a non-empty text")
    value = raw.get("value")
    if not _is_number(value):
        raise DataError(f"{where}: 'value' must be a number, not {value!r}")
    scale = raw.get("scale")
    if scale not in SCALES:
        raise DataError(f"{where}: 'scale' must be one of {', '.join(SCALES)}, not {scale!r}")
    bound = SCALES[scale]
    if bound is not None and abs(value) > bound:
        raise DataError(f"{where}: value {value} is off the {scale} scale (|value| <= {bound:g})")
    if scale == "count" and value < 0:
        raise DataError(f"{where}: a count cannot be negative ({value})")
    ci = raw.get("ci")
    if ci is not None:
        if not (isinstance(ci, list) and len(ci) == 2 and all(_is_number(x) for x in ci) and ci[0] <= value <= ci[1]):
            raise DataError(f"{where}: 'ci' must be [low, high] around the value {value}, not {ci!r}")
        ci = (float(ci[0]), float(ci[1]))
    kind = raw.get("kind")
    if kind not in KINDS:
        raise DataError(f"{where}: 'kind' must be one of {', '.join(KINDS)}, not {kind!r}")
    tol = raw.get("tolerance")
    if kind == "deterministic" and not (_is_number(tol) and tol >= 0):
        raise DataError(f"{where}: a deterministic entry needs a 'tolerance' >= 0, not {tol!r}")
    if kind == "estimate" and tol is not None:
        raise DataError(f"{where}: an estimate is judged by our 95% interval; 'tolerance' is for deterministic entries")
    if "ours" not in raw:
        raise DataError(f"{where}: 'ours' is missing (a mapping, or null with a 'reason')")
    ours = None if raw["ours"] is None else _ours(raw["ours"], where)
    unavailable = raw.get("unavailable")
    if unavailable is not None and (ours is not None or not (isinstance(unavailable, str) and unavailable.strip())):
        raise DataError(f"{where}: 'unavailable' (why no run can give this number: a fact about the world) goes with "
                        "'ours: null' and is a text")
    reason = raw.get("reason") or unavailable
    if ours is None and not (isinstance(reason, str) and reason.strip()):
        raise DataError(f"{where}: 'ours: null' needs a 'reason' (why no table of ours holds this number) or "
                        "'unavailable' (why no run can)")
    req = {**defaults, **_requires(raw.get("requires"), where)}
    return Entry(id=eid, source=raw["source"], what=raw["what"], value=float(value), scale=scale, kind=kind,
                 ours=ours, ci=ci, tolerance=None if tol is None else float(tol), reason=reason,
                 requires={k: v for k, v in req.items() if v is not None}, unavailable=unavailable is not None)


def load_published(path, study_key: str | None = None) -> Published:
    """Read and validate one published file; any bad entry is a DataError naming the file and
    the entry id, so a typo stops the run before a table is built on it."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh)
    except FileNotFoundError:
        raise DataError(f"{path}: published file not found") from None
    except yaml.YAMLError as e:
        raise DataError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: a published file is a mapping with 'study' and 'entries'")
    unknown = set(raw) - _FILE_KEYS
    if unknown:
        raise DataError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))} (known: "
                        f"{', '.join(sorted(_FILE_KEYS))})")
    study = raw.get("study")
    if not isinstance(study, str) or (study_key is not None and study != study_key):
        raise DataError(f"{path}: 'study' must be {study_key!r}, not {study!r}" if study_key else
                        f"{path}: 'study' must name the study")
    unreleased = raw.get("unreleased") or {}
    if not isinstance(unreleased, dict) or not all(isinstance(v, list) for v in unreleased.values()):
        raise DataError(f"{path}: 'unreleased' must map run keys to lists (e.g. domains: [banking, telco])")
    entries = raw.get("entries")
    if not isinstance(entries, list) or not entries:
        raise DataError(f"{path}: 'entries' must be a non-empty list")
    defaults = _requires(raw.get("requires"), f"{path}: top-level")
    out, seen = [], set()
    for i, e in enumerate(entries):
        entry = _entry(e, i, path, defaults)
        if entry.id in seen:
            raise DataError(f"{path}: entry '{entry.id}': the id is repeated")
        seen.add(entry.id)
        out.append(entry)
    return Published(path=path, study=study, entries=out, unreleased=unreleased)


# ---- the verdict -------------------------------------------------------------------------------


def _num(x) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def verdict(published, ours, low=None, high=None, kind: str = "estimate", tolerance=None,
            not_comparable_reason: str | None = None) -> tuple[str, str]:
    """(verdict, reason) for one published number against ours, both on the published scale.

    Bounds count as inside (a relative slack of 1e-9 absorbs the rounding of rescaling, e.g.
    0.029 * 100). An estimate without our interval is not judged: a point estimate alone says
    nothing about whether the difference is noise."""
    if not_comparable_reason:
        return NOT_COMPARABLE, not_comparable_reason
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    p, o = _num(published), _num(ours)
    if p is None:
        raise ValueError(f"the published value must be a finite number, not {published!r}")
    if o is None:
        return NOT_COMPARABLE, "our value is missing (NaN) in this grid"
    if kind == "deterministic":
        tol = _num(tolerance)
        if tol is None or tol < 0:
            raise ValueError(f"a deterministic comparison needs a tolerance >= 0, not {tolerance!r}")
        d = abs(o - p)
        slack = 1e-9 * max(1.0, abs(p), abs(o))
        if d <= tol + slack:
            return REPRODUCED, f"|{_fmt(o)} - {_fmt(p)}| = {_fmt(d)} is within the tolerance {_fmt(tol)}"
        return NOT_REPRODUCED, f"|{_fmt(o)} - {_fmt(p)}| = {_fmt(d)} exceeds the tolerance {_fmt(tol)}"
    lo, hi = _num(low), _num(high)
    if lo is None or hi is None:
        return NOT_COMPARABLE, f"our table gives no 95% interval for this estimate (ours: {_fmt(o)})"
    lo, hi = min(lo, hi), max(lo, hi)
    slack = 1e-9 * max(1.0, abs(p), abs(lo), abs(hi))
    span = f"our 95% interval [{_fmt(lo)}, {_fmt(hi)}] (ours: {_fmt(o)})"
    if lo - slack <= p <= hi + slack:
        return REPRODUCED, f"{_fmt(p)} lies in {span}"
    return NOT_REPRODUCED, f"{_fmt(p)} lies {'below' if p < lo else 'above'} {span}"


# ---- comparability ------------------------------------------------------------------------------


_ROLES = {"models": "model", "readers": "reader", "judges": "judge", "panel": "panel judge", "retrievers": "retriever"}


def _label(key: str, missing: list, have: list, unreleased: dict) -> str:
    """What kind of difference a failed requirement is, in the reader's words."""
    words = key.replace("_", " ")
    if key in unreleased and missing and all(m in unreleased[key] for m in missing):
        return f"unreleased {words.removesuffix('s')}"
    if key == "data" or key.endswith("_data"):
        generated = have and all(str(h).startswith("generated:") for h in have)
        return f"{'generated' if generated else 'different'} {words}"
    if key == "domains":
        return "domain not in this run"
    if key in _ROLES:
        return f"substituted {_ROLES[key]}"
    if key.endswith(("_model", "_reader", "_labeller")):
        return f"substituted {words}"
    return f"different {words}"


def _has(have: list, need) -> bool:
    """``need`` is in ``have``, or is the stem of an item (``coral`` matches ``coral:test``,
    ``dense`` matches ``dense:BAAI/bge-base-en-v1.5``)."""
    return any(h == need or (isinstance(h, str) and isinstance(need, str) and h.startswith(need + ":"))
               for h in have)


def own_prompts(need, have) -> list[str]:
    """The prompts a number depends on that ran in the project's own wording. ``need``:
    ``supplied`` (every prompt of the run; ``have`` is ``supplied`` or ``own``) or a list of
    roles (``have``: role -> ``own``, ``official`` or the user's file)."""
    if isinstance(need, list):
        have = have if isinstance(have, dict) else {}
        return [r for r in need if have.get(r, OWN_PROMPTS) == OWN_PROMPTS]
    return [] if have == SUPPLIED_PROMPTS else ["all"]


def requirement_failures(requires: dict, run: dict, unreleased: dict | None = None) -> list[str]:
    """What the run lacks of what a published number depends on, one text per key. A list
    requirement needs every item in the run's list; a single value needs equality."""
    unreleased = unreleased or {}
    out = []
    for key, need in requires.items():
        if key == "prompts":  # the paper's prompts (official or supplied) or the project's own wording
            own = own_prompts(need, run.get("prompts"))
            if own:
                out.append("own prompt wording" + (f" ({', '.join(own)})" if isinstance(need, list) else ""))
            continue
        if key not in run or run[key] is None:
            out.append(f"this run has no {key.replace('_', ' ')}")
            continue
        have = run[key]
        if isinstance(need, list):
            have_l = list(have) if isinstance(have, (list, tuple)) else [have]
            missing = [n for n in need if not _has(have_l, n)]
            if missing:
                shown = ", ".join(map(str, have_l)) or "none"
                out.append(f"{_label(key, missing, have_l, unreleased)}: the paper's {', '.join(map(str, missing))} "
                           f"(this run: {shown})")
        elif have != need:
            have_l = list(have) if isinstance(have, (list, tuple)) else [have]
            out.append(f"{_label(key, [need], have_l, unreleased)}: the paper's {need} (this run: {have})")
    return list(dict.fromkeys(out))


# ---- our number -----------------------------------------------------------------------------------


def _where_text(where: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items()) or "(any row)"


def _matches(series, value):
    import pandas as pd

    if value is None:
        return series.isna()
    if isinstance(value, bool):
        return series.astype(str).str.lower() == str(value).lower()
    if isinstance(value, (int, float)):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == str(value)


def read_table(path: str):
    """A target's CSV; a target with nothing to show may have written no columns at all."""
    import pandas as pd

    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def lookup(ours: Ours, tables: dict[str, str], cache: dict | None = None) -> tuple[dict | None, str | None]:
    """Our value and interval (on the published scale) from the one row ``ours`` selects, or
    None and the reason there is none in this grid."""
    import numpy as np
    import pandas as pd

    if ours.target not in tables:
        return None, f"target {ours.target} is not built by this grid"
    cache = {} if cache is None else cache
    if ours.target not in cache:
        cache[ours.target] = read_table(tables[ours.target])
    df = cache[ours.target]
    if df.empty:
        return None, f"{ours.target} is empty in this grid"
    cols = [*ours.where, ours.value, *([ours.low, ours.high] if ours.low else [])]
    missing = [c for c in dict.fromkeys(cols) if c not in df.columns]
    if missing:
        return None, f"{ours.target} has no column {', '.join(missing)} in this grid"
    mask = None
    for col, val in ours.where.items():
        if isinstance(val, list):
            m = np.logical_or.reduce([_matches(df[col], v).to_numpy() for v in val])
            m = pd.Series(m, index=df.index)
        else:
            m = _matches(df[col], val)
        mask = m if mask is None else (mask & m)
    rows = df if mask is None else df[mask.to_numpy()]
    if len(rows) == 0:
        return None, f"no row of {ours.target} has {_where_text(ours.where)} in this grid"
    if ours.agg in ("sum", "count"):  # a total over every selected row (a count of comparisons, of changes)
        if ours.agg == "count":
            return {"ours": float(len(rows)) * ours.scale, "low": None, "high": None}, None
        # booleans (True / False after a CSV round trip) count 1 / 0; an empty cell (an undefined
        # comparison) counts 0
        def one(v):
            if isinstance(v, bool) or str(v) in ("True", "False"):
                return float(str(v) == "True")
            return _num(v) or 0.0

        return {"ours": sum(one(v) for v in rows[ours.value]) * ours.scale, "low": None, "high": None}, None
    if ours.agg is not None:  # a range over named rows: each must be there, once
        col = next(c for c, v in ours.where.items() if isinstance(v, list))
        names = [str(v) for v in ours.where[col]]
        have = rows[col].astype(str).tolist()
        missing = [n for n in names if n not in have]
        if missing:
            return None, f"{ours.target}: the {ours.agg} over {col} {', '.join(names)} has no row for {', '.join(missing)} in this grid"
        vals = [_num(v) for v in rows[ours.value]]
        if any(v is None for v in vals):
            return {"ours": None, "low": None, "high": None}, None
        vals = [v * ours.scale for v in vals]  # on the published scale, then its lowest, highest or mean
        agg = {"min": min, "max": max, "mean": lambda x: sum(x) / len(x)}[ours.agg]
        return {"ours": agg(vals), "low": None, "high": None}, None
    if len(rows) > 1:
        return None, (f"{len(rows)} rows of {ours.target} have {_where_text(ours.where)}: the published number "
                      "pools what this table keeps apart")
    r = rows.iloc[0]

    def scaled(col):
        v = _num(r[col]) if col else None
        return None if v is None else v * ours.scale

    lo, hi = scaled(ours.low), scaled(ours.high)
    if lo is not None and hi is not None and lo > hi:  # a negative scale turns the interval round
        lo, hi = hi, lo
    return {"ours": scaled(ours.value), "low": lo, "high": hi}, None


# ---- the table ------------------------------------------------------------------------------------


def reproduction_table(study_key: str, published_path, tables: dict[str, str], context: dict):
    """One row per published number of ``study_key``: the published value and interval, ours and
    our 95% interval (on the published scale), the verdict and its reason. ``tables``: target
    name -> CSV path of the study's other targets this grid built; ``context["reproduction"]``:
    what the run used (models, data, domains, ...), against each entry's ``requires``."""
    import pandas as pd

    pub = load_published(published_path, study_key)
    run = (context or {}).get("reproduction") or {}
    cache: dict = {}
    rows = []
    nan = float("nan")
    for e in pub.entries:
        reasons = [e.reason] if e.reason else []
        reasons += requirement_failures(e.requires, run, pub.unreleased)
        found = None
        if e.ours is not None:
            found, missing = lookup(e.ours, tables, cache)
            if missing:
                reasons.append(missing)
        found = found or {}
        v, why = verdict(e.value, found.get("ours"), found.get("low"), found.get("high"), e.kind, e.tolerance,
                         "; ".join(reasons) or None)

        def val(x):
            return nan if x is None else x

        rows.append({
            "id": e.id, "source": e.source, "what": e.what, "scale": e.scale, "published": e.value,
            "published_ci_low": e.ci[0] if e.ci else nan, "published_ci_high": e.ci[1] if e.ci else nan,
            "ours": val(found.get("ours")), "ours_ci_low": val(found.get("low")),
            "ours_ci_high": val(found.get("high")),
            "kind": e.kind, "tolerance": nan if e.tolerance is None else e.tolerance, "verdict": v, "reason": why,
            "target": e.ours.target if e.ours else "", "where": _where_text(e.ours.where) if e.ours else "",
            "prompts": run.get("prompts_used", ""),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


# ---- what a study declares ---------------------------------------------------------------------------


def reproduction_target(study_key: str):
    """The ``reproduction`` table target of a study: it reads the study's published file
    (``published``) and the CSVs of the targets the file names (``reproduction_tables``), so
    Snakemake builds those first and rebuilds the verdicts when the file changes."""
    from convrag.report.targets import Target

    def build(inputs: dict, ctx: dict):
        paths = inputs.get("reproduction_tables") or []
        paths = [paths] if isinstance(paths, str) else list(paths)
        return reproduction_table(study_key, inputs["published"], {Path(p).stem: p for p in paths}, ctx)

    return Target("reproduction", "table", build, inputs=("published", "reproduction_tables"))


def reproduction_artifacts(study, layout, artifacts: dict) -> dict:
    """The reproduction target's artifacts, given the study's other ``artifacts``: its published
    file and the CSV of every target the file names that this config builds (a target reading an
    artifact the config does not make is left out; its entries say so)."""
    path = published_path(study.key)
    pub = load_published(path, study.key)
    targets = study.targets()
    absent = {k for k, v in artifacts.items() if v is None}
    files = []
    for name in pub.targets():
        if name not in targets:
            raise DataError(f"{path}: ours.target '{name}' is not a target of {study.key} "
                            f"(known: {', '.join(sorted(targets))})")
        t = targets[name]
        if absent.intersection(t.inputs):
            continue
        stem = layout.table(study.key, name) if t.kind == "table" else layout.figure(study.key, name)
        files.append(stem + ".csv")
    # relative to the working directory: a rule input (and so the HTML report) names no
    # absolute path of this machine
    return {"published": os.path.relpath(path), "reproduction_tables": files}


# ---- how a study describes its run (``context["reproduction"]``) -----------------------------------


def retriever_identity(config: dict, name: str) -> str:
    """A retriever as the paper would name it: its kind, and its model where it has one
    (``dense:BAAI/bge-base-en-v1.5``), whatever the config calls it."""
    r = config["retrievers"][name]
    model = (r.get("params") or {}).get("model")
    return f"{r['kind']}:{model}" if model else r["kind"]


def corpus_identity(config: dict, corpus: str) -> str:
    """``generated:<name>`` for a generated world; else the source format or kind."""
    c = config["corpora"][corpus]
    if c["kind"] == "miniworld":
        return f"generated:{corpus}"
    return c.get("format") or c["kind"]


def dataset_identity(config: dict, dataset: str) -> str:
    """A question set: its corpus identity plus its hop filter (``musique_2hop``)."""
    d = config["datasets"][dataset]
    base = corpus_identity(config, d["corpus"])
    hops = d.get("hops")
    return base + "".join(f"_{h}hop" for h in hops) if hops and not base.startswith("generated:") else base


def benchmark_identity(config: dict, name: str) -> str:
    """``generated:<name>`` for a generated benchmark; else its kind and split (``recor:dev``)."""
    b = config["benchmarks"][name]
    if b["kind"].startswith("miniworld"):
        return f"generated:{name}"
    return f"{b['kind']}:{b['split']}" if b.get("split") else b["kind"]
