"""One machinery for every study's tables and figures.

A study declares its targets (``studies.base.Target``); the shared rules ``study_table`` and
``study_figure`` (workflow/rules/report.smk) call ``convrag target <study> <name>``, which
runs ``build_target``: compute the DataFrame, draw the figure, write CSV (full precision)
and Markdown (with the caption) beside it; a target with its own page (``Target.markdown``,
e.g. the reproduction table's verdicts grouped by the paper's tables) writes that page as its
Markdown. Captions are ``<captions_dir>/<name>.rst`` (shared ones, such as the accounting
table's, in ``workflow/report/<name>.rst``); Snakemake's report shows each target's Markdown
file, read after the run, through one template (``workflow/report/target.rst``): its first line
(the caption, or a page's summary) as text, the rest as written.
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import dataclass
from typing import Any, Callable

from convrag.errors import DataError
from convrag.resources import REPO_ROOT

SHARED_CAPTIONS = REPO_ROOT / "workflow" / "report"


# ``inputs`` of a target build: artifact name -> path or list of paths (see Study.artifacts)
Inputs = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One table or figure: ``build(inputs, context) -> DataFrame`` computes what it shows
    (a figure also writes that DataFrame as CSV/Markdown); ``plot(df, stem)`` draws a
    figure. ``inputs`` names the study artifacts it reads, so a target reruns only when they
    change. The caption is ``<captions_dir>/<name>.rst``.

    ``markdown(df, caption) -> str``: the target's own Markdown page, for a table the generic
    caption-and-table renders badly (long texts repeated on every row); its first line is a
    plain sentence that sums the page up, which the HTML report shows above the page
    (workflow/report/target.rst). The CSV keeps every column either way."""

    name: str
    kind: str  # "table" | "figure"
    build: Callable[[Inputs, dict], Any]
    plot: Callable[[Any, str], None] | None = None
    inputs: tuple[str, ...] = ()
    markdown: Callable[[Any, str], str] | None = None
    # a figure whose numbers come from no model (a benchmark's own statistics): no stand-in band
    model_free: bool = False

    def __post_init__(self):
        if self.kind not in ("table", "figure"):
            raise ValueError(f"target {self.name}: kind must be 'table' or 'figure', not {self.kind!r}")
        if self.kind == "figure" and self.plot is None:
            raise ValueError(f"figure target {self.name} needs a plot function")


def read_caption(study, name: str) -> str:
    for path in (study.captions_dir / f"{name}.rst", SHARED_CAPTIONS / f"{name}.rst"):
        if path.exists():
            return path.read_text(encoding="utf-8").strip()
    raise DataError(f"{study.captions_dir / (name + '.rst')}: caption of {study.key} target '{name}' is missing")


def build_target(study, name: str, inputs: dict, context: dict, out_stem: str) -> None:
    """Write one named table (CSV + Markdown) or figure (PNG + PDF, plus its data as CSV +
    Markdown). A target with nothing to show (e.g. no RECAP cells in the grid) still writes
    its files, with a caption that says why, so every target of a grid exists; a figure whose
    rows show nothing (``plot`` returns the reason of its ``figures.placeholder``) says why too."""
    from convrag.report import figures
    from convrag.report.tables import write_table

    targets = study.all_targets()
    if name not in targets:
        raise DataError(f"unknown {study.key} target '{name}' (known: {', '.join(targets)})")
    t = targets[name]
    text = study.caption(name)
    if context.get("run_note"):  # the run's own settings (Study.run_note; the rule passes it)
        text += " " + context["run_note"]
    if "gold" in t.inputs:  # scored on a benchmark's qrels: say which gold ids its corpus lacks
        from convrag.data.gold import caption_note
        from convrag.io import read_json

        note = caption_note(read_json(p) for p in inputs.get("gold") or [])  # none given: nothing to say
        text += f" {note}" if note else ""
    df = t.build(inputs, context)
    if t.kind == "figure":
        if df.empty:
            reason = figures.placeholder(out_stem, "no_rows", "the grid has no cells this analysis needs "
                                                              "(the figure's data has no rows)")
        else:  # a plot function may draw a placeholder itself and return its reason
            # a run's stand-ins under 1B (context tiny_models) are named on the figure itself
            tiny = {} if t.model_free else (context.get("tiny_models") or {})
            with figures.stand_in_warning("these numbers come from", tiny):
                reason = t.plot(df, out_stem)
        if isinstance(reason, str):
            text += f" (Placeholder: {reason}.)"
    elif df.empty:
        text += " (Empty: the grid has no cells this analysis needs.)"
    from convrag.report.blanks import blanks_sentence

    blanks = blanks_sentence(df)  # why each blank cell is blank, where the row shows it
    write_table(df, out_stem, caption=text + (" " + blanks if blanks else ""), markdown=t.markdown)


# ---- the accounting table every study gets --------------------------------------------------


def accounting_target():
    return Target("accounting", "table", lambda inputs, ctx: accounting_table(inputs["accounting"], ctx["study_dir"]),
                  inputs=("accounting",))


def accounting_table(paths: list[str], study_dir: str):
    """One row per job accounting file (its path under the study folder, without the
    ``.accounting.json`` / ``.json`` suffix), nested keys flattened with dots; per-cell
    breakdowns (``cells``) stay in the files."""
    import pandas as pd

    from convrag.io import read_json

    rows = []
    for p in paths:
        acc = read_json(p)
        rel = str(Path(p).resolve().relative_to(Path(study_dir).resolve())) if study_dir else str(p)
        job = rel.removesuffix(".json").removesuffix(".accounting")
        rows.append({"job": job, **_flatten({k: v for k, v in acc.items() if k != "cells"})})
    return pd.DataFrame(rows)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif not isinstance(v, (list, tuple)):
            out[f"{prefix}{k}"] = v
    return out
