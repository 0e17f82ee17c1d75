"""A paper config's rehearsal and reproduction plan, without models.

Why: a paper grid costs GPU-weeks, and a published number that no cell of its tables can give
back is found only at the end. ``rehearse`` asks the study for the score files its grid would
produce, at the grid's full shape with seeded synthetic values (``Study.rehearsal_inputs``;
questions and runs per cell cut), builds every table and figure and the reproduction table
from them; ``plan`` then says, for every published number, the one target, row and column it
will be compared with, or why it cannot be:

- ``resolved``: exactly one row of the rehearsed table matches the entry, and the config meets
  what the number depends on;
- ``unavailable``: the config cannot meet it, for a reason about the world (a closed model
  without an endpoint, an unreleased domain, data that is not public: the entry's ``requires``
  against the run), or no run can (the entry says ``unavailable: <why>``, e.g. the paper does
  not name the models a range is over);
- ``unresolved``: our tables do not hold it (``ours: null`` with its reason, or no row matches).

A lookup that matches several rows (``ambiguous``: the published file's ``where`` does not pick
one row of the table) makes the command fail after printing the plan, rather than give a silent
``not comparable`` at the end of the real run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.errors import ConfigError, DataError

RESOLVED, UNAVAILABLE, UNRESOLVED, AMBIGUOUS = "resolved", "unavailable", "unresolved", "ambiguous"


# --- drawing helpers the studies' calibrated rehearsals share: a published mean or count is hit
# exactly, with a spread, so its rehearsed interval is not degenerate.

def half_up(x: float) -> int:
    """``x`` rounded to an integer, halves up (Python's ``round`` rounds halves to even)."""
    return int(np.floor(x + 0.5))


def paired(n: int, mean: float, half: float, rng) -> np.ndarray:
    """``n`` values whose mean is ``mean`` (to float rounding): pairs ``mean +- d`` with ``d``
    uniform in [0, half], in random order (an odd one out is the mean itself)."""
    d = rng.uniform(0.0, half, size=n // 2)
    return rng.permutation(np.concatenate([mean + d, mean - d, [mean] * (n % 2)]))


def paired_ints(n: int, mean: float, half: int, rng, low: int = 0) -> np.ndarray:
    """``n`` integers summing to ``half_up(n * mean)``: floor / ceiling of the mean, then paired
    integer deviations of at most ``half`` (kept at or above ``low``), in random order."""
    total = half_up(n * mean)
    base = total // n
    vals = np.full(n, base, dtype=int)
    vals[: total - base * n] += 1
    half = max(0, min(half, base - low))
    if half:
        d = rng.integers(0, half + 1, size=n // 2)
        vals[: n // 2] += d
        vals[n // 2: 2 * (n // 2)] -= d
    return rng.permutation(vals)


def rehearse(study, config: dict, out_dir, *, questions: int = 4, runs: int = 2, seed: int = 0,
             n_resamples: int | None = 200, inputs: dict | None = None) -> dict[str, str]:
    """Build every target of ``study`` for ``config`` from synthetic inputs in ``out_dir`` (or
    the ``inputs`` given: a calibrated rehearsal's); returns target -> CSV path (the
    reproduction table too). Targets that need inputs the rehearsal does not make (real
    questions or corpora) are left out."""
    from convrag.report.reproduction import published_path
    from convrag.report.targets import build_target

    out = Path(out_dir)
    if inputs is None:
        inputs = study.rehearsal_inputs(config, out / "inputs", questions=questions, runs=runs, seed=seed)
    if inputs is None:
        raise ConfigError(f"study '{study.key}' has no rehearsal yet (Study.rehearsal_inputs)")
    ctx = {**study.context(config), "study_dir": str(out)}
    if n_resamples is not None and isinstance(ctx.get("boot"), dict):  # intervals of synthetic numbers: fewer resamples
        ctx["boot"] = {**ctx["boot"], "n_resamples": n_resamples}
    tables = {}
    for name, t in study.targets().items():
        if name == "reproduction" or not set(t.inputs) <= set(inputs):
            continue
        stem = str(out / ("figures" if t.kind == "figure" else "tables") / name)
        build_target(study, name, {k: inputs[k] for k in t.inputs}, ctx, stem)
        tables[name] = stem + ".csv"
    if "reproduction" in study.targets():
        stem = str(out / "tables" / "reproduction")
        build_target(study, "reproduction", {"published": str(published_path(study.key)),
                                             "reproduction_tables": list(tables.values())}, ctx, stem)
        tables["reproduction"] = stem + ".csv"
    return tables


def rehearse_calibrated(study, config: dict, out_dir, *, shift: float = 0.0, widths: dict[str, float] | None = None,
                        questions: int = 4, runs: int = 2, seed: int = 0,
                        n_resamples: int | None = 200) -> tuple[dict[str, str], dict[str, str]]:
    """The proof of the verdict rules without a GPU: a rehearsal whose per-unit scores are drawn
    so that every published number the study can drive comes out at its published value
    (``shift`` 0: those rows must read "reproduced"), or moved by ``shift`` times its interval's
    width (``widths``: entry id -> our 95% interval's width, from a rehearsal at shift 0; at 3
    they must read "not reproduced"). Returns the tables (as ``rehearse``) and the entries the
    study cannot drive, with why."""
    from convrag.report.reproduction import load_published, published_path

    pub = load_published(published_path(study.key), study.key)
    widths = widths or {}
    targets = {e.id: e.value + shift * widths.get(e.id, 0.0) for e in pub.entries
               if e.ours is not None and e.kind != "statement"}
    got = study.calibrated_rehearsal_inputs(config, Path(out_dir) / "inputs", targets, questions=questions,
                                            runs=runs, seed=seed)
    if got is None:
        raise ConfigError(f"study '{study.key}' has no calibrated rehearsal yet (Study.calibrated_rehearsal_inputs)")
    inputs, undriven = got
    tables = rehearse(study, config, out_dir, questions=questions, runs=runs, seed=seed, n_resamples=n_resamples,
                      inputs=inputs)
    return tables, undriven


def plan(study, config: dict, tables: dict[str, str]) -> pd.DataFrame:
    """One row per published number: its status (resolved / unavailable / unresolved), where it
    will come from (target, row, column), why not where it will not, the caveats a verdict will
    carry, and whether it can get a verdict at all (``judged``: resolved, and nothing the config
    fixes makes it "not comparable")."""
    from convrag.report.reproduction import (_where_text, load_published, lookup, published_path,
                                             requirement_differences, statement_rows)

    pub = load_published(published_path(study.key), study.key)
    run = study.context(config).get("reproduction") or {}
    cache: dict = {}
    rows = []
    for e in pub.entries:
        # protocol differences (own prompt wording, a substituted model) are caveats: the number is
        # resolved and judged; a different quantity or population is the world's (or the config's)
        diffs = requirement_differences(e.requires, run, pub.unreleased)
        world = [t for t, caveat in diffs if not caveat]
        caveats = [t for t, caveat in diffs if caveat] + ([e.caveat] if e.caveat else [])
        row = {"id": e.id, "source": e.source, "what": e.what, "published": e.value, "kind": e.kind,
               "target": e.ours.target if e.ours else "", "row": _where_text(e.ours.where) if e.ours else "",
               "column": e.ours.value if e.ours else "", "caveats": "; ".join(caveats), "judged": False}
        if e.ours is None:
            rows.append({**row, "status": UNAVAILABLE if e.unavailable else UNRESOLVED, "reason": e.reason})
            continue
        if e.kind == "statement":
            found, missing = statement_rows(e.ours, e.holds, tables, cache)
        else:
            found, missing = lookup(e.ours, tables, cache)
        if missing and " rows of " in missing:
            rows.append({**row, "status": AMBIGUOUS, "reason": f"{missing}; its 'where' must pick one row"})
        elif missing:
            rows.append({**row, "status": UNRESOLVED, "reason": missing})
        elif world:
            rows.append({**row, "status": UNAVAILABLE, "reason": "; ".join(world)})
        else:
            rows.append({**row, "status": RESOLVED, "reason": e.incomparable or "", "judged": not e.incomparable})
    return pd.DataFrame(rows, columns=["id", "source", "what", "published", "kind", "status", "judged", "target",
                                       "row", "column", "reason", "caveats"])


def summary_line(df: pd.DataFrame) -> str:
    n = df["status"].value_counts()
    line = (f"resolved {int(n.get(RESOLVED, 0))} of {len(df)} published numbers; "
            f"{int(n.get(UNAVAILABLE, 0))} unavailable; {int(n.get(UNRESOLVED, 0))} unresolved; "
            f"{int(df['judged'].sum())} can get a verdict")
    own = int((df["caveats"].fillna("").str.contains("own prompt wording") & (df["status"] == RESOLVED)).sum())
    line += f" ({own} of them on the project's own prompt wording, a caveat)" if own else ""
    return line + (f"; {int(n[AMBIGUOUS])} ambiguous" if n.get(AMBIGUOUS) else "")


def check_unambiguous(df: pd.DataFrame, where: str) -> None:
    """The plan's error: entries whose lookup matches several rows."""
    bad = df[df.status == AMBIGUOUS]
    if len(bad):
        raise DataError(f"{where}: {len(bad)} published entries match several rows (first: '{bad.id.iloc[0]}': "
                        f"{bad.reason.iloc[0]})")
