"""write_table (CSV + Markdown) and figures (PNG + PDF)."""

import numpy as np
import pandas as pd
import pytest

from convrag.report.figures import grouped_bars, save_figure
from convrag.report.tables import write_table


def test_write_table_csv_roundtrip_and_markdown(tmp_path):
    df = pd.DataFrame({"retriever": ["bm25", "dense"], "n": [100, 100], "mean_f1": [1 / 3, 0.123456789]})
    csv, md = write_table(df, tmp_path / "sub" / "tab", caption="Table 1: mean F1 by retriever.")
    assert csv.name == "tab.csv" and md.name == "tab.md"
    back = pd.read_csv(csv)
    pd.testing.assert_frame_equal(back, df)  # full precision, exact round trip
    text = md.read_text()
    assert text.startswith("Table 1: mean F1 by retriever.\n\n")
    assert "0.333" in text and "0.123" in text
    assert "0.3333" not in text and "0.1234" not in text
    assert "| retriever" in text and "bm25" in text
    assert not [p for p in csv.parent.iterdir() if p.name.startswith(".")]  # no temp files left


def test_write_table_no_caption_fmt_and_index(tmp_path):
    df = pd.DataFrame({"g": ["a", "b"], "v": [0.5, np.nan]}).set_index("g")
    csv, md = write_table(df, tmp_path / "t", float_fmt="{:.1f}")
    assert pd.read_csv(csv).columns.tolist() == ["g", "v"]  # named index kept as a column
    text = md.read_text()
    assert text.startswith("|")
    assert "0.5" in text and "nan" not in text.lower()


def _delivery_df(datasets=("musique", "2wiki"), conditions=("SHARDED", "FULL", "CONCAT", "SNOWBALL")):
    rows = []
    for d in datasets:
        for i, r in enumerate(["closed_book", "bm25", "dense"]):
            for j, c in enumerate(conditions):
                m = 0.1 + 0.1 * i + 0.05 * j
                rows.append(dict(dataset=d, retriever=r, condition=c, mean_f1=m, ci_low=m - 0.04, ci_high=m + 0.05))
    return pd.DataFrame(rows)


def _check_image_files(png, pdf):
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert png.stat().st_size > 5000 and pdf.stat().st_size > 2000


def test_grouped_bars_with_cis_panels_and_hue_order(tmp_path):
    png, pdf = grouped_bars(_delivery_df(), tmp_path / "fig" / "delivery", x="retriever", hue="condition", y="mean_f1",
                            lo="ci_low", hi="ci_high", panel="dataset", ylim=(0, 1), hue_order=("FULL", "SHARDED"))
    assert (png.name, pdf.name) == ("delivery.png", "delivery.pdf")
    _check_image_files(png, pdf)


def test_grouped_bars_single_panel_missing_cells_and_repeated_rows(tmp_path):
    df = _delivery_df(datasets=("all",)).drop(columns="dataset").iloc[1:]  # one cell missing
    df = pd.concat([df, df.iloc[:2]])  # two cells with two rows each: drawn as their mean
    png, pdf = grouped_bars(df, tmp_path / "one", x="retriever", hue="condition", y="mean_f1")
    _check_image_files(png, pdf)


def test_grouped_bars_validation(tmp_path):
    with pytest.raises(ValueError, match="missing columns"):
        grouped_bars(pd.DataFrame({"retriever": ["bm25"]}), tmp_path / "x", x="retriever", hue="condition", y="f1")
    with pytest.raises(ValueError, match="empty"):
        grouped_bars(_delivery_df().iloc[:0], tmp_path / "x", x="retriever", hue="condition", y="mean_f1")


def test_save_figure_deterministic_pdf(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1, 2], [0, 1, 4])
    png, pdf = save_figure(fig, tmp_path / "line")
    first = pdf.read_bytes()
    save_figure(fig, tmp_path / "line")
    assert pdf.read_bytes() == first  # no creation date -> reproducible
    _check_image_files(png, pdf)


def test_markdown_number_formats_follow_their_kind(tmp_path):
    """Issue 45, item 5: counts print as integers though a NaN made them float, no -0.000, and
    a blank is blank, never the word nan."""
    import numpy as np

    df = pd.DataFrame({"n": [750.0, np.nan], "prompt_tokens": [1500000.0, 2.0], "share": [-0.0001, 0.5],
                       "gap": [1.0, 2.0], "note": ["nan", "x"], "label": [None, "y"]})
    _, md = write_table(df, tmp_path / "t")
    text = md.read_text()
    assert "| 750 " in text and "1500000 " in text and "750.000" not in text and "1500000.000" not in text
    assert "-0.000" not in text and "| 0.000 " in text and "| 0.500 " in text
    assert "nan" not in text and "None" not in text
    assert "| 1.000 " in text  # a whole-number score that is not a count keeps its decimals
