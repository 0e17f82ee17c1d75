"""Every figure shows something, or is a placeholder whose stated reason is true of its data.

Unit level: the figure helpers on small frames (per-panel x axes in ladder order, a measured 0
drawn unlike a missing bar, distinct line styles, integer ticks, placeholders that carry their
reason). Run level, with CONVRAG_TEST_GRID=DIR (a folder where the default has run, as
tests/test_workflow.py takes it): every figure target the default builds is a non-empty image
with coloured marks, or a placeholder of a known kind whose reason the test checks against the
figure's own data file (docs/figures.md is the checklist these follow).
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convrag.report import figures
from convrag.report.figures import grouped_bars, line_styles, lines, placeholder, placeholder_of
from convrag.report.targets import Target, build_target

MULTI_TURN = ("SHARDED", "RECAP", "SNOWBALL")


def _pixels(png) -> np.ndarray:
    from PIL import Image

    with Image.open(png) as im:
        return np.asarray(im.convert("RGB"), dtype=float)


MIN_MARK = 100  # coloured pixels a bar, line, point or heatmap cell leaves at the least


def coloured_pixels(png, width: float = 0.8) -> int:
    """Pixels with a clear colour (not white, grey or black: bars, lines, points, heatmap cells)
    in the left ``width`` of the image; the helpers put the legend at the right, so its
    coloured swatches do not count as marks."""
    a = _above_band(_pixels(png))
    a = a[:, : int(a.shape[1] * width)]
    return int(((a.max(axis=2) - a.min(axis=2)) > 60).sum())


BAND_FILL = (255, 224, 179)  # figures.small_model_warning's #ffe0b3


def _above_band(a: np.ndarray) -> np.ndarray:
    """The image above a stand-in warning band (orange, under the panels), so that the band
    never passes for a mark: rows from the first one whose pixels are a tenth the band's fill,
    less its border, are cut."""
    fill = (np.abs(a - np.array(BAND_FILL)).max(axis=2) <= 4).mean(axis=1) > 0.1
    rows = np.flatnonzero(fill)
    return a[: max(rows[0] - 8, 0)] if rows.size else a


def _recovery_gaps(df: pd.DataFrame) -> pd.Series:
    return df["gap"] if "gap" in df else df["f1_full"] - df["f1_sharded"]


def check_placeholder(kind: str, reason: str, data: pd.DataFrame) -> None:
    """The claim of each placeholder kind, checked on the figure's data (independently of the
    code that drew it)."""
    if kind == "no_rows":
        assert data.empty, f"placeholder says no rows, data has {len(data)}"
    elif kind == "no_multi_turn":
        assert data.empty or not data["condition"].isin(MULTI_TURN).any()
    elif kind == "no_positive_gap":
        rec = [c for c in data.columns if "recovery" in c]
        assert rec and data[rec].isna().all().all(), "a recovery is plotted-worthy"
        gaps = _recovery_gaps(data).dropna()
        assert (gaps <= 0).all(), f"a positive gap exists: {gaps.max()}"
        assert f"in all {len(data)} rows" in reason
        assert f"from {gaps.min():.2f} to {gaps.max():.2f}" in reason
    else:
        raise AssertionError(f"unknown placeholder kind {kind!r} ({reason})")


# ---- unit level -----------------------------------------------------------------------------


def test_placeholder_round_trip(tmp_path):
    reason = placeholder(tmp_path / "p", "no_rows", "nothing here")
    assert reason == "nothing here"
    assert placeholder_of(tmp_path / "p.png") == ("no_rows", "nothing here")
    assert (tmp_path / "p.pdf").read_bytes()[:5] == b"%PDF-"
    png, _ = grouped_bars(pd.DataFrame({"x": ["a"], "h": ["h"], "y": [0.5]}), tmp_path / "bars", x="x", hue="h", y="y")
    assert placeholder_of(png) is None and coloured_pixels(png) > MIN_MARK


def _spy_on_axes(monkeypatch) -> dict:
    """Record the axes of the next figure drawn (``seen["axes"]``), to read its ticks and texts."""
    seen = {}
    real = figures._canvas

    def spy(*a, **k):
        fig, axes = real(*a, **k)
        seen["axes"] = axes
        return fig, axes

    monkeypatch.setattr(figures, "_canvas", spy)
    return seen


def test_grouped_bars_axes_per_panel_in_ladder_order(tmp_path, monkeypatch):
    seen = _spy_on_axes(monkeypatch)
    df = pd.DataFrame({"slice": ["mtrag"] * 3 + ["recor"] * 4,
                       "rung": ["last_bm25", "rewrite_bm25", "dense", "bm25_turn", "fusion", "dense", "hybrid"],
                       "labeller": "m", "precision": [1, 0, np.nan, 0.8, 0.4, 0.2, 0.4]})
    grouped_bars(df, tmp_path / "f", x="rung", hue="labeller", y="precision", panel="slice")
    labels = [[t.get_text() for t in ax.get_xticklabels()] for ax in seen["axes"]]
    assert labels == [["last_bm25", "rewrite_bm25", "dense"], ["bm25_turn", "fusion", "dense", "hybrid"]]
    texts = [t.get_text() for t in seen["axes"][0].texts]
    assert texts == ["0", "n/a"]  # a measured 0 and a NaN are both marked, unlike a missing cell


def test_panels_wrap_and_stay_readable(tmp_path):
    df = pd.DataFrame({"facet": np.repeat(["a", "b", "c", "d"], 10), "value": [f"v{i}" for i in range(40)],
                       "what": "tasks", "share": 0.1})
    png, _ = grouped_bars(df, tmp_path / "dist", x="value", hue="what", y="share", panel="facet")
    h, w, _ = _pixels(png).shape
    assert w < 2400 and w / h < 3  # four panels in a 2 x 2 grid, not 7,815 x 557


def test_line_styles_separate_thirty_lines():
    df = pd.DataFrame([(r, c, p) for r in ["bm25", "dense", "hipporag2", "pog", "raptor"]
                       for c in MULTI_TURN for p in ["current", "history"]], columns=["retriever", "condition", "policy"])
    styles = line_styles(df, ["retriever", "condition", "policy"])
    looks = {(s["color"], s["ls"], s["marker"]) for s in styles.values()}
    assert len(styles) == 30 and len(looks) == 30


def test_lines_integer_ticks_and_n(tmp_path, monkeypatch):
    seen = _spy_on_axes(monkeypatch)
    df = pd.DataFrame({"m": [1, 2, 1, 2], "value": [19.1, 21.2, 0.0, 0.0], "model": "s",
                       "measure": ["rougeL", "rougeL", "draw", "draw"], "n": [4, 3, 4, 3]})
    lines(df, tmp_path / "l", x="m", y="value", group=["model"], panel="measure", n="n")
    ax = seen["axes"][0]
    assert list(ax.get_xticks()) == [1, 2]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1\nn=4", "2\nn=3"]


def test_build_target_writes_a_true_placeholder(tmp_path):
    class Fake:
        key = "fake"

        def all_targets(self):
            return {"empty": Target("empty", "figure", lambda i, c: pd.DataFrame(), lambda df, stem: None),
                    "gapless": Target("gapless", "figure", lambda i, c: gapless, _recovery_plot)}

        def caption(self, name):
            return f"Figure {name}."

    gapless = pd.DataFrame({"retriever": ["bm25", "dense"], "gap": [0.0, -0.33], "recovery": [np.nan, np.nan]})

    def _recovery_plot(df, stem):
        from convrag.studies.lic_rag.targets import _fig_recovery_policy

        return _fig_recovery_policy(df.assign(dataset="d", condition="RECAP", ci_low=np.nan, ci_high=np.nan), stem)

    for name in ("empty", "gapless"):
        build_target(Fake(), name, {}, {}, str(tmp_path / name))
        kind, reason = placeholder_of(tmp_path / f"{name}.png")
        data = pd.read_csv(tmp_path / f"{name}.csv") if (tmp_path / f"{name}.csv").stat().st_size > 1 else pd.DataFrame()
        check_placeholder(kind, reason, data)
        assert f"(Placeholder: {reason}.)" in (tmp_path / f"{name}.md").read_text()
    assert placeholder_of(tmp_path / "gapless.png")[0] == "no_positive_gap"
    # a positive gap: the claim would be false, so bars are drawn instead
    gapless.loc[0, ["gap", "recovery"]] = [0.2, 0.5]
    build_target(Fake(), "gapless", {}, {}, str(tmp_path / "drawn"))
    assert placeholder_of(tmp_path / "drawn.png") is None


def test_check_placeholder_rejects_a_false_reason():
    data = pd.DataFrame({"gap": [0.1, -0.2], "recovery": [np.nan, np.nan]})
    with pytest.raises(AssertionError, match="positive gap"):
        check_placeholder("no_positive_gap", "in all 2 rows, from -0.20 to 0.10", data)
    with pytest.raises(AssertionError):
        check_placeholder("no_rows", "", data)


# ---- the default run --------------------------------------------------------------------------


def _grid() -> Path | None:
    given = os.environ.get("CONVRAG_TEST_GRID")
    return Path(given) / "results" if given else None


def _default_figures():
    from convrag.config import load_config
    from convrag.layout import layout
    from convrag.resources import REPO_ROOT
    from convrag.studies import active_studies

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    out = []
    for study in active_studies(cfg):
        targets = study.all_targets()
        out += [(study.key, n) for n in study.built_targets(cfg, layout(cfg)) if targets[n].kind == "figure"]
    return out


@pytest.mark.skipif(_grid() is None, reason="CONVRAG_TEST_GRID names no finished default run")
@pytest.mark.parametrize("study,name", _default_figures() if _grid() else [])
def test_default_run_figure_shows_something_or_says_why(study, name):
    stem = _grid() / study / "figures" / name
    png = stem.with_suffix(".png")
    assert png.exists() and png.stat().st_size > 2000, png
    data = pd.read_csv(stem.with_suffix(".csv")) if stem.with_suffix(".csv").stat().st_size > 1 else pd.DataFrame()
    mark = placeholder_of(png)
    if mark is None:
        assert not data.empty, f"{name}: a plot of no rows"
        # more than a legend's swatches (about 100 pixels each): some bar, line, point or cell
        assert coloured_pixels(png) > MIN_MARK, f"{name}: no coloured mark in the image"
    else:
        check_placeholder(*mark, data)
        assert f"(Placeholder: {mark[1]}.)" in stem.with_suffix(".md").read_text()


def test_comparison_marks_of_issue_45(tmp_path, monkeypatch):
    """The comparison a paper figure makes (issue 45, item 1): a baseline drawn as reference
    lines, lines dodged apart, points labelled, a difference written above its group of bars."""
    from matplotlib.figure import Figure

    drawn = {}
    real = figures.save_figure

    def keep(fig: Figure, stem, note=None):
        drawn["fig"] = fig
        return real(fig, stem, note)

    monkeypatch.setattr(figures, "save_figure", keep)
    df = pd.DataFrame({"turn": [1, 2, 1, 2], "y": [0.5, 0.5, 0.5, 0.5], "cond": ["A", "A", "B", "B"],
                       "rung": ["r1", "r2", "r1", "r2"]})
    refs = pd.DataFrame({"panel": ["all", "all"], "label": ["FULL (one retrieval)", "CONCAT (one retrieval)"],
                         "y": [0.6, 0.4]})
    lines(df, tmp_path / "l", x="turn", y="y", group=["cond"], dodge=0.1, refs=refs, point_labels="rung")
    ax = drawn["fig"].axes[0]
    xs = [tuple(line.get_xdata()) for line in ax.get_lines() if len(line.get_xdata()) == 2
          and line.get_label() in ("A", "B")]
    assert len(xs) == 2 and xs[0] != xs[1]  # equal values, lines apart
    legend = [t.get_text() for t in drawn["fig"].legends[0].get_texts()]
    assert "FULL (one retrieval)" in legend and "CONCAT (one retrieval)" in legend
    assert {t.get_text() for t in ax.texts} >= {"r1", "r2"}
    bars = pd.DataFrame({"x": ["a", "b"], "h": ["q", "q"], "v": [0.7, 0.8]})
    grouped_bars(bars, tmp_path / "b", x="x", hue="h", y="v", notes={("all", "a"): ("\u0394 +.10", True)},
                 notes_label="\u0394: content minus qrels")
    texts = [t for t in drawn["fig"].axes[0].texts if t.get_text() == "\u0394 +.10"]
    assert texts and texts[0].get_fontweight() == "bold"
    assert any("content minus qrels" in t.get_text() for t in drawn["fig"].texts)


# ---- lic_rag: Figure 8's intervals, the study's order of conditions ------------------------------


def _capture(monkeypatch, name: str) -> dict:
    """The frame and keywords a lic_rag figure hands ``figures.<name>`` (nothing drawn)."""
    got = {}

    def fake(df, stem, **kw):
        got.update(df=df.copy(), **kw)

    monkeypatch.setattr(figures, name, fake)
    return got


def test_lic_rag_figure8_draws_the_falls_intervals(monkeypatch):
    """Figure 8 by hand: with retrieval, FULL ceiling .50 / floor .30, SHARDED .48 / .22 with
    falls .02 [.01, .03] and .08 [.07, .09]: the SHARDED bars' whiskers are FULL's level minus the
    interval (.47 to .49, .21 to .23), FULL's have none, and the note gives both falls in points."""
    from convrag.studies.lic_rag.targets import CEILING_FLOOR_BARS, _fig_ceiling_floor

    df = pd.DataFrame([
        {"dataset": "d", "retrieval": "closed book", "condition": "FULL", "ceiling": 0.3, "floor": 0.2},
        {"dataset": "d", "retrieval": "closed book", "condition": "SHARDED", "ceiling": 0.26, "floor": 0.16,
         "ceiling_fall": 0.04, "ceiling_fall_ci_low": -0.01, "ceiling_fall_ci_high": 0.09,
         "floor_fall": 0.04, "floor_fall_ci_low": 0.03, "floor_fall_ci_high": 0.05},
        {"dataset": "d", "retrieval": "with retrieval", "condition": "FULL", "ceiling": 0.5, "floor": 0.3},
        {"dataset": "d", "retrieval": "with retrieval", "condition": "SHARDED", "ceiling": 0.48, "floor": 0.22,
         "ceiling_fall": 0.02, "ceiling_fall_ci_low": 0.01, "ceiling_fall_ci_high": 0.03,
         "floor_fall": 0.08, "floor_fall_ci_low": 0.07, "floor_fall_ci_high": 0.09}])
    got = _capture(monkeypatch, "grouped_bars")
    _fig_ceiling_floor(df, "unused")
    bars = got["df"].set_index(["retrieval", "bar"])
    assert list(dict.fromkeys(got["df"].retrieval)) == ["with retrieval", "closed book"]
    assert got["hue_order"] == list(CEILING_FLOOR_BARS.values()) and got["lo"] == "lo" and got["hi"] == "hi"
    sh_c, sh_f = bars.loc[("with retrieval", "SHARDED: ceiling (P90)")], bars.loc[("with retrieval", "SHARDED: floor (P10)")]
    assert (sh_c.f1, sh_c.lo, sh_c.hi) == pytest.approx((0.48, 0.47, 0.49))
    assert (sh_f.f1, sh_f.lo, sh_f.hi) == pytest.approx((0.22, 0.21, 0.23))
    assert bars.loc[("with retrieval", "FULL: ceiling (P90)"), ["lo", "hi"]].isna().all()
    assert got["notes"][("d", "with retrieval")] == ("ceiling 2.0\n[1.0, 3.0]\nfloor 8.0\n[7.0, 9.0]", True)
    # the closed book's ceiling interval holds 0, its floor's does not: bold
    assert got["notes"][("d", "closed book")] == ("ceiling 4.0\n[-1.0, 9.0]\nfloor 4.0\n[3.0, 5.0]", True)


def test_lic_rag_figures_order_conditions_as_the_study(monkeypatch, tmp_path):
    """Conditions FULL, CONCAT, SHARDED, RECAP, SNOWBALL and policies none, history, current,
    whatever the data's (alphabetical) order: in recall_by_turn's lines and legend, the
    aptitude scatter's colours and legend, and the category bars' x."""
    from convrag.studies.lic_rag import targets as T

    cells = [("SNOWBALL", "current"), ("RECAP", "history"), ("SHARDED", "current"), ("SHARDED", "history"),
             ("CONCAT", "none"), ("FULL", "none")]
    apt = pd.DataFrame([{"condition": c, "policy": p, "aptitude": 0.5, "unreliability": 0.1} for c, p in cells])
    T._fig_reliability(apt, tmp_path / "apt")
    assert _pixels(tmp_path / "apt.png").size  # drawn
    got = _capture(monkeypatch, "scatter")
    T._fig_reliability(apt, "unused")
    assert got["order"] == ["FULL/none", "CONCAT/none", "SHARDED/history", "SHARDED/current", "RECAP/history",
                            "SNOWBALL/current"]
    cat = pd.DataFrame([{"retriever": "bm25", "condition": c, "policy": p, "answer_attempt": 1.0} for c, p in cells])
    got = _capture(monkeypatch, "stacked_bars")
    T._fig_categories(cat, "unused")
    assert list(got["df"].cell) == ["FULL/none", "CONCAT/none", "SHARDED/history", "SHARDED/current",
                                     "RECAP/history", "SNOWBALL/current"]


def test_lines_orders_draw_and_legend_in_the_given_order(tmp_path):
    df = pd.DataFrame([{"turn": t, "recall": 0.5, "condition": c, "policy": p}
                       for t in (1, 2) for c in ("RECAP", "SHARDED", "SNOWBALL") for p in ("current", "history")])
    orders = {"condition": ("SHARDED", "RECAP", "SNOWBALL"), "policy": ("history", "current")}
    styles = line_styles(df, ["condition", "policy"], orders)
    assert styles[("SHARDED", "history")]["color"] == "C0" and styles[("RECAP", "history")]["color"] == "C1"
    assert styles[("SHARDED", "history")]["ls"] == "-" and styles[("SHARDED", "current")]["ls"] == "--"
    from matplotlib.figure import Figure

    seen = []
    real = Figure.legend

    def spy(self, handles, labels, **kw):
        seen.extend(labels)
        return real(self, handles, labels, **kw)

    import unittest.mock as mock

    with mock.patch.object(Figure, "legend", spy):
        lines(df, tmp_path / "l", x="turn", y="recall", group=["condition", "policy"], orders=orders)
    assert seen == ["SHARDED / history", "SHARDED / current", "RECAP / history", "RECAP / current",
                    "SNOWBALL / history", "SNOWBALL / current"]


def _texts_when_saved(monkeypatch):
    """Every figure's texts as it is saved (Figure.savefig is called once per PNG and PDF)."""
    from matplotlib.figure import Figure

    saved, real = [], Figure.savefig

    def spy(self, fname, *a, **kw):
        if kw.get("format") == "png":
            saved.append([t.get_text() for t in self.texts])
        return real(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", spy)
    return saved


def test_a_run_of_stand_ins_says_so_on_every_figure(tmp_path, monkeypatch):
    """Issue 45: a figure whose numbers come from a model under 1B says so on the figure itself.
    build_target draws every figure target inside figures.stand_in_warning with the run's tiny
    models (context tiny_models, from the rules): one band naming them, under any note of the
    figure; none on a model-free target (a benchmark's own statistics), none on a placeholder,
    none without tiny models; a figure's own tiny-judge band gives way to the run's."""
    saved = _texts_when_saved(monkeypatch)
    bars = pd.DataFrame({"x": ["a", "b"], "y": [0.2, 0.4], "h": ["m", "m"]})

    def _bars(df, stem):
        grouped_bars(df, stem, x="x", y="y", hue="h", notes={("all", "a"): "d 0.1"}, notes_label="d: a difference")

    def _judged(df, stem):
        figures.scatter(df.assign(y2=df.y), stem, x="y", y="y2", label="x",
                        warn=("the accuracy is judged by", {"tiny-judge": 0.2}))

    class Fake:
        key = "fake"

        def all_targets(self):
            return {"bars": Target("bars", "figure", lambda i, c: bars, _bars),
                    "stats": Target("stats", "figure", lambda i, c: bars, _bars, model_free=True),
                    "judged": Target("judged", "figure", lambda i, c: bars, _judged),
                    "empty": Target("empty", "figure", lambda i, c: pd.DataFrame(), _bars)}

        def caption(self, name):
            return f"Figure {name}."

    tiny = {"tiny_models": {"smollm2-135m": 0.135}}
    band = ("Warning: these numbers come from smollm2-135m (0.135B parameters), a tiny stand-in (under 1B): a "
            "check that the pipeline runs, not a measure of quality")
    bands = []
    for name, context in (("bars", tiny), ("stats", tiny), ("judged", tiny), ("empty", tiny), ("bars", {}),
                          ("judged", {})):
        build_target(Fake(), name, {}, context, str(tmp_path / f"{name}{len(bands)}"))
        bands.append([t.replace("\n", " ") for t in saved[-1] if t.startswith("Warning:")])
    assert bands[0] == [band]  # the run's stand-in, once
    assert bands[1] == [] and bands[3] == [] and bands[4] == []  # model-free, placeholder, no tiny model
    assert bands[2] == [band]  # the judge's own band gives way to the run's, which names every stand-in
    assert bands[5] == ["Warning: the accuracy is judged by tiny-judge (0.2B parameters), a tiny stand-in (under "
                        "1B): a check that the pipeline runs, not a measure of quality"]
    assert figures.active_stand_ins() == {}  # the context is left as found


def test_a_band_alone_is_no_mark(tmp_path):
    """coloured_pixels (the run-level check that a figure shows something) does not count the
    stand-in band: an empty canvas with a band has no mark; the same with a bar has."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def draw(bar: bool):
        fig = Figure(figsize=(6, 3))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        if bar:
            ax.bar([0], [1.0], color="C0")
        figures.small_model_warning(fig, "these numbers come from", {"m": 0.1})
        return figures.save_figure(fig, tmp_path / f"bar{bar}")[0]

    assert coloured_pixels(draw(False)) == 0
    assert coloured_pixels(draw(True)) > MIN_MARK


def test_the_stand_in_band_goes_under_the_figures_notes():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3))
    FigureCanvasAgg(fig)
    fig.subplots().plot([0, 1], [0, 1])
    note = fig.text(0.5, 0, "a note\nof two lines", ha="center", va="top")
    figures.small_model_warning(fig, "these numbers come from", {"m": 0.1})
    band = fig.texts[-1]
    r = fig.canvas.get_renderer()
    assert band.get_window_extent(r).y1 < note.get_window_extent(r).y0  # wholly below the note
    alone = Figure(figsize=(6, 3))
    FigureCanvasAgg(alone)
    figures.small_model_warning(alone, "these numbers come from", {"m": 0.1})
    assert alone.texts[-1].get_position() == (0.5, 0)  # no note: right under the panels


def test_the_runs_tiny_models_come_from_its_settings():
    from convrag.config import REPO_ROOT, load_config
    from convrag.studies import get_study

    config = load_config(REPO_ROOT / "config" / "config.yaml")
    for key in ("lic_rag", "mtrag_un", "coral", "worse_labels", "cross"):
        assert get_study(key).tiny_models(config) == {"smollm2-135m": 0.135}, key
    paper = load_config(REPO_ROOT / "config" / "studies" / "mtrag_un.yaml")
    assert get_study("mtrag_un").tiny_models(paper) == {}  # the paper's models: no band
