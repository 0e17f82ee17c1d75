"""Reproduction verdicts (convrag.report.reproduction): the verdict logic on hand-made cases, the
published files' validation, a reproduction table built from small hand-written target CSVs, and
the four studies' published files against their code (every entry loads, names a real target of
its study and real columns of that target, so the files cannot drift from the code)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from convrag.config import REPO_ROOT, load_config, load_configs
from convrag.errors import DataError
from convrag.layout import Layout
from convrag.report.reproduction import (
    COLUMNS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    REPRODUCED,
    Entry,
    Ours,
    default_margin,
    load_published,
    miniature_reason,
    published_path,
    reproduction_artifacts,
    reproduction_table,
    requirement_differences,
    requirement_failures,
    statement_verdict,
    verdict,
)
from convrag.studies import get_study

STUDIES = ("lic_rag", "mtrag_un", "coral", "worse_labels")
PAPER_CONFIGS = {k: REPO_ROOT / "config" / "studies" / f"{k}.yaml" for k in STUDIES}


# ---- the verdict on hand-made cases ---------------------------------------------------------------


def test_estimate_inside_outside_and_on_the_bounds():
    v, why = verdict(0.50, 0.48, 0.40, 0.60, margin=0.05)
    assert v == REPRODUCED and why == "0.5 lies in our 95% interval [0.4, 0.6] (ours: 0.48)"
    v, why = verdict(0.68, 0.55, 0.50, 0.60)
    assert v == NOT_REPRODUCED and why == "0.68 lies above our 95% interval [0.5, 0.6] (ours: 0.55)"
    v, why = verdict(0.10, 0.20, 0.15, 0.25)
    assert v == NOT_REPRODUCED and "below" in why
    # both bounds count as inside, also after a rescaling that leaves float noise:
    # 0.029 * 100 = 2.9000000000000004 (above 2.9), 0.58 * 100 = 57.99999999999999 (below 58)
    assert 0.029 * 100 > 2.9 and 0.58 * 100 < 58
    assert verdict(2.9, 3.5, 0.029 * 100, 4.0, scale="points")[0] == REPRODUCED
    assert verdict(58, 50.0, 40.0, 0.58 * 100, scale="points", margin=5)[0] == REPRODUCED
    assert verdict(13.4, 11.0, 9.9, 13.4, scale="points")[0] == REPRODUCED
    assert verdict(13.41, 11.0, 9.9, 13.4, scale="points")[0] == NOT_REPRODUCED
    # an interval handed over upside down (a negative scale) is read the right way round
    assert verdict(-0.3, -0.2, -0.1, -0.4, margin=0.1)[0] == REPRODUCED


def test_inconclusive_when_the_interval_is_too_wide_or_n_too_small():
    # default margin of a share: 0.03, so an interval wider than 0.12 cannot decide
    v, why = verdict(0.50, 0.48, 0.40, 0.60)
    assert v == INCONCLUSIVE and why == ("0.5 lies in our 95% interval [0.4, 0.6] (ours: 0.48), but the interval is "
                                         "wider than 4 margins of 0.03: too wide to decide")
    assert verdict(0.50, 0.48, 0.44, 0.56)[0] == REPRODUCED  # width 0.12: exactly four margins
    # a published value outside even a wide interval is not reproduced: the data do decide that
    assert verdict(0.90, 0.48, 0.40, 0.60)[0] == NOT_REPRODUCED
    # points: 3; ratio and count: a tenth of the published value, at least 0.03 / 1
    assert default_margin("points", 40) == 3 and default_margin("ratio", 1.3) == pytest.approx(0.13)
    assert default_margin("ratio", 0.1) == 0.03 and default_margin("count", 4) == 1 and default_margin("count", 750) == 75
    assert verdict(11.6, 11.0, 5.0, 18.0, scale="points")[0] == INCONCLUSIVE  # 13 points wide > 12
    # n below the floor (10 units by default, or the entry's min_n)
    v, why = verdict(0.5, 0.49, 0.47, 0.51, n=3)
    assert v == INCONCLUSIVE and why == "n = 3 units, below the floor of 10 (ours: 0.49)"
    assert verdict(0.5, 0.49, 0.47, 0.51, n=3, min_n=3)[0] == REPRODUCED
    # no interval, or an undefined value: the run cannot decide
    v, why = verdict(0.5, 0.52)
    assert v == INCONCLUSIVE and why == "our table gives no 95% interval for this estimate (ours: 0.52)"
    assert verdict(0.5, float("nan"), 0.4, 0.6) == (INCONCLUSIVE, "our value is undefined (NaN) in this run")


def test_the_papers_interval_by_the_rule_the_entry_names():
    # overlap: the paper's [0.40, 0.46] and ours [0.45, 0.50] share [0.45, 0.46]
    v, why = verdict(0.43, 0.47, 0.45, 0.50, published_ci=(0.40, 0.46), rule="overlap")
    assert v == REPRODUCED and why.startswith("the paper's interval [0.4, 0.46] overlaps")
    assert verdict(0.43, 0.52, 0.50, 0.55, published_ci=(0.40, 0.46), rule="overlap")[0] == NOT_REPRODUCED
    # inside (the default): the published point must lie in ours
    assert verdict(0.43, 0.47, 0.45, 0.50, published_ci=(0.40, 0.46))[0] == NOT_REPRODUCED


def test_statements_hold_on_our_rows_with_their_intervals():
    rows = [{"label": "bm25", "value": 5.1, "low": 3.0, "high": 7.2}, {"label": "dense", "value": 7.1, "low": 5.0,
                                                                      "high": 9.0}]
    v, why = statement_verdict({"all": (">", 0.0)}, rows)
    assert v == REPRODUCED and why == "holds for all 2 rows (all > 0: bm25 5.1, dense 7.1)"
    # a row whose interval straddles the bound: the run cannot say
    straddle = [*rows, {"label": "pog", "value": 1.0, "low": -0.5, "high": 2.5}]
    v, why = statement_verdict({"all": (">", 0.0)}, straddle)
    assert v == INCONCLUSIVE and why.startswith("the interval of pog straddles the bound")
    # a row wholly below it: the statement fails
    failing = [*rows, {"label": "pog", "value": -2.0, "low": -3.0, "high": -1.0}]
    assert statement_verdict({"all": (">", 0.0)}, failing)[0] == NOT_REPRODUCED
    # without intervals the values decide
    assert statement_verdict({"all": (">", 0.0)}, [{"label": "a", "value": 0.2}, {"label": "b", "value": -0.1}]) == (
        NOT_REPRODUCED, "fails for b (all > 0: a 0.2, b -0.1)")
    assert statement_verdict({"any": (">=", 0.5)}, [{"label": "a", "value": 0.2}, {"label": "b", "value": 0.5}])[0] \
        == REPRODUCED
    # between 17 and 30 (contexts per cell), every row
    assert statement_verdict({"between": (17.0, 30.0)}, [{"label": "x", "value": 17}, {"label": "y", "value": 30}])[0] \
        == REPRODUCED
    assert statement_verdict({"between": (17.0, 30.0)}, [{"label": "x", "value": 16}])[0] == NOT_REPRODUCED
    # a rank: PoG second-lowest F1 of five retrievers
    f1 = {"closed_book": 0.10, "pog": 0.12, "bm25": 0.20, "dense": 0.25, "hipporag2": 0.22}
    ranked = [{"label": k, "value": v, "named": k == "pog"} for k, v in f1.items()]
    v, why = statement_verdict({"rank": {"row": {"retriever": "pog"}, "position": 2, "order": "ascending"}}, ranked)
    assert v == REPRODUCED and why.startswith("it is 2 of 5 (ascending: closed_book 0.1, pog 0.12, bm25 0.2")
    assert statement_verdict({"rank": {"row": {"retriever": "pog"}, "position": 2, "order": "descending"}},
                             ranked) == (NOT_REPRODUCED, "it is 4 of 5 (descending: dense 0.25, hipporag2 0.22, "
                                                         "bm25 0.2, pog 0.12, closed_book 0.1)")


def test_deterministic_within_and_outside_the_tolerance():
    # the official BM25-hist nDCG@10 (.4379) against a rerun at .43794 (within half a unit of the 4th digit)
    v, why = verdict(0.4379, 0.43794, kind="deterministic", tolerance=0.00005)
    assert v == REPRODUCED and why == "|0.43794 - 0.4379| = 4e-05 is within the tolerance 5e-05"
    # Lucene's own BM25 gives .3967 (config/studies/worse_labels.yaml): off by 0.0412
    v, why = verdict(0.4379, 0.3967, kind="deterministic", tolerance=0.00005)
    assert v == NOT_REPRODUCED and "= 0.0412 exceeds the tolerance 5e-05" in why
    assert verdict(0.29, 0.295, kind="deterministic", tolerance=0.005)[0] == REPRODUCED  # on the tolerance
    assert verdict(225000, 225000, kind="deterministic", tolerance=0)[0] == REPRODUCED
    assert verdict(225000, 225001, kind="deterministic", tolerance=0)[0] == NOT_REPRODUCED
    with pytest.raises(ValueError, match="tolerance"):
        verdict(0.5, 0.5, kind="deterministic")


def test_not_comparable_cases():
    assert verdict(0.5, 0.5, 0.4, 0.6, not_comparable_reason="different data: x") == (NOT_COMPARABLE, "different data: x")
    assert verdict(0.5, None, kind="deterministic", tolerance=0.1)[0] == INCONCLUSIVE


def test_protocol_differences_are_caveats_and_the_rest_not_comparable():
    run = {"models": ["smollm2-135m"], "data": ["generated:miniworld"], "top_k": 2, "judge_model": "phi-4",
           "prompts": "own", "retrievers": ["bm25"], "primary_labeller": "qwen3-4b"}
    diffs = dict(requirement_differences({"models": ["qwen3-8b"], "judge_model": "gpt-4o-mini", "prompts": "supplied",
                                          "primary_labeller": "phi-4", "expansions": "released"}, run))
    assert diffs == {"substituted model: the paper's qwen3-8b (this run: smollm2-135m)": True,
                     "substituted judge model: the paper's gpt-4o-mini (this run: phi-4)": True,
                     "own prompt wording": True,
                     "substituted primary labeller: the paper's phi-4 (this run: qwen3-4b)": True,
                     "this run has no expansions": True}
    diffs = dict(requirement_differences({"data": ["hotpotqa"], "top_k": 5, "retrievers": ["elser"],
                                          "domains": ["banking"]}, run))
    assert not any(diffs.values()) and len(diffs) == 4
    # an entry whose only differences are caveats gets a verdict, with the caveats beside it
    e = Entry(id="x", source="§5", what="F1", value=0.5, scale="share", kind="estimate",
              ours=Ours(target="t", value="f1", where={"cell": "a"}, low="lo", high="hi"),
              requires={"models": ["qwen3-8b"], "prompts": "supplied"}, caveat="read as the final answer")
    from convrag.report.reproduction import judge_entry

    tables = {"t": "unused"}
    cache = {"t": pd.DataFrame({"cell": ["a"], "f1": [0.49], "lo": [0.46], "hi": [0.52]})}
    j = judge_entry(e, tables, run, {}, cache)
    assert j["verdict"] == REPRODUCED and j["caveats"] == [
        "substituted model: the paper's qwen3-8b (this run: smollm2-135m)", "own prompt wording",
        "read as the final answer"]
    j = judge_entry(Entry(**{**e.__dict__, "requires": {"data": ["hotpotqa"]}}), tables, run, {}, cache)
    assert j["verdict"] == NOT_COMPARABLE and j["reason"].startswith("generated data: the paper's hotpotqa")


def test_requirements_name_what_the_run_lacks():
    run = {"models": ["smollm2-135m"], "data": ["generated:miniworld"], "domains": ["clapnq", "cloud", "fiqa", "govt"],
           "retrievers": ["bm25", "dense:BAAI/bge-base-en-v1.5"], "top_k": 2, "judge_model": "phi-4"}
    unreleased = {"domains": ["banking", "telco"]}
    assert requirement_failures({"models": ["qwen3-8b", "smollm2-135m"]}, run) == [
        "substituted model: the paper's qwen3-8b (this run: smollm2-135m)"]
    assert requirement_failures({"data": ["hotpotqa"]}, run) == [
        "generated data: the paper's hotpotqa (this run: generated:miniworld)"]
    assert requirement_failures({"domains": ["clapnq", "banking", "telco"]}, run, unreleased) == [
        "unreleased domain: the paper's banking, telco (this run: clapnq, cloud, fiqa, govt)"]
    assert requirement_failures({"top_k": 5}, run) == ["different top k: the paper's 5 (this run: 2)"]
    assert requirement_failures({"judge_model": "phi-4", "retrievers": ["dense", "bm25"]}, run) == []  # stems match
    assert requirement_failures({"retrievers": ["elser"]}, run) == [
        "substituted retriever: the paper's elser (this run: bm25, dense:BAAI/bge-base-en-v1.5)"]
    assert requirement_failures({"audit": True}, run) == ["this run has no audit"]
    assert requirement_failures({"judge_model": "gpt-4o-mini", "replication_data": ["mtrag"]},
                                {**run, "replication_data": ["generated:mini_mtrag"]}) == [
        "substituted judge model: the paper's gpt-4o-mini (this run: phi-4)",
        "generated replication data: the paper's mtrag (this run: generated:mini_mtrag)"]


# ---- malformed published files ------------------------------------------------------------------


GOOD = {"id": "t.x", "source": "Table 9", "what": "gap", "value": 11.6, "ci": [9.9, 13.4], "scale": "points",
        "kind": "estimate", "ours": {"target": "t9", "where": {"dataset": "all", "policy": "history"}, "value": "gap",
                                     "low": "ci_low", "high": "ci_high", "scale": 100}}


def _write(tmp_path, entries, **top) -> Path:
    p = tmp_path / "demo.yaml"
    p.write_text(yaml.safe_dump({"study": "demo", **top, "entries": entries}, sort_keys=False))
    return p


@pytest.mark.parametrize("change, message", [
    ({"value": "11.6"}, "'value' must be a number"),
    ({"ci": [12.0, 13.4]}, "'ci' must be \\[low, high\\] around the value 11.6"),
    ({"scale": "percent"}, "'scale' must be one of points, share, correlation, kappa, ratio, count"),
    ({"scale": "share"}, "value 11.6 is off the share scale"),
    ({"scale": "correlation"}, "value 11.6 is off the correlation scale"),
    ({"scale": "kappa"}, "value 11.6 is off the kappa scale"),
    ({"kind": "deterministic"}, "a deterministic entry needs a 'tolerance'"),
    ({"tolerance": 0.1}, "'tolerance' is for deterministic entries"),
    ({"ours": None}, "'ours: null' needs a 'reason'"),
    ({"ours": {"target": "t9", "value": "gap", "low": "ci_low"}}, "both 'low' and 'high'"),
    ({"ours": {"target": "t9", "value": "gap", "scale": 0}}, "ours.scale must be a non-zero number"),
    ({"ours": {"target": "t9", "column": "gap"}}, "ours has unknown key\\(s\\) column"),
    ({"valeu": 1}, "unknown key\\(s\\) valeu"),
    ({"requires": ["models"]}, "'requires' must be a mapping"),
])
def test_a_malformed_entry_names_the_file_and_the_id(tmp_path, change, message):
    path = _write(tmp_path, [{**GOOD, **change}])
    with pytest.raises(DataError, match=re.escape(str(path)) + ": entry 't.x': .*" + message):
        load_published(path, "demo")


def test_file_level_errors(tmp_path):
    path = _write(tmp_path, [GOOD, dict(GOOD)])
    with pytest.raises(DataError, match=re.escape(str(path)) + ": entry 't.x': the id is repeated"):
        load_published(path, "demo")
    path = _write(tmp_path, [{k: v for k, v in GOOD.items() if k != "id"}])
    with pytest.raises(DataError, match=r"demo\.yaml: entries\[0\]: every entry needs an 'id'"):
        load_published(path)
    with pytest.raises(DataError, match="'study' must be 'other', not 'demo'"):
        load_published(_write(tmp_path, [GOOD]), "other")
    (tmp_path / "bad.yaml").write_text("study: demo\nentries: [{id: a, value: [}\n")
    with pytest.raises(DataError, match=r"bad\.yaml: not valid YAML"):
        load_published(tmp_path / "bad.yaml")
    loaded = load_published(_write(tmp_path, [GOOD], requires={"models": ["m1"], "top_k": 5}), "demo")
    e = loaded.entries[0]
    assert e.ci == (9.9, 13.4) and e.ours.scale == 100.0 and e.requires == {"models": ["m1"], "top_k": 5}


# ---- a reproduction table from hand-written target CSVs ---------------------------------------------


def test_reproduction_table_from_hand_written_tables(tmp_path):
    t9 = tmp_path / "t9.csv"
    pd.DataFrame({"dataset": ["hotpotqa", "all", "all"], "policy": ["history", "history", "current"],
                  "gap": [0.20, 0.110, 0.05], "ci_low": [0.1, 0.099, 0.01], "ci_high": [0.3, 0.134, 0.09],
                  "pairs": [100, 225000, 225000]}).to_csv(t9, index=False)
    dec = tmp_path / "dec.csv"
    pd.DataFrame({"retriever": ["bm25", "bm25"], "policy": ["history", "current"], "delivery_loss": [-0.05, -0.06],
                  "delivery_ci_low": [-0.08, -0.09], "delivery_ci_high": [-0.02, -0.03]}).to_csv(dec, index=False)
    (tmp_path / "empty.csv").write_text("\n")  # a target with nothing to show writes no columns
    ours9 = {"target": "t9", "where": {"dataset": "all", "policy": "history"}, "value": "gap", "low": "ci_low",
             "high": "ci_high", "scale": 100}
    entries = [
        {**GOOD, "id": "inside"},  # 11.6 in [9.9, 13.4] (0.099 and 0.134 x 100): reproduced
        {**GOOD, "id": "outside", "value": 15.0, "ci": None, "ours": ours9},
        {"id": "pairs", "source": "§B.4", "what": "pairs", "value": 225000, "scale": "count", "kind": "deterministic",
         "tolerance": 0, "ours": {**ours9, "value": "pairs", "low": None, "high": None, "scale": 1}},
        {**GOOD, "id": "substituted", "requires": {"models": ["gemma-4-31b-it"]}},
        {**GOOD, "id": "unreleased", "requires": {"domains": ["banking"]}},
        {**GOOD, "id": "absent", "ours": {**GOOD["ours"], "target": "figure9"}},
        {**GOOD, "id": "pooled", "ours": {**ours9, "where": {"dataset": "all"}}},
        {**GOOD, "id": "no_row", "ours": {**ours9, "where": {"dataset": "musique_4hop"}}},
        {**GOOD, "id": "empty", "ours": {**ours9, "target": "empty"}},
        {**GOOD, "id": "no_column", "ours": {**ours9, "value": "gap_covered"}},
        {"id": "flipped", "source": "§5.3", "what": "SHARDED minus CONCAT", "value": 5.2, "scale": "points",
         "kind": "estimate", "ours": {"target": "dec", "where": {"retriever": "bm25", "policy": "history"},
                                      "value": "delivery_loss", "low": "delivery_ci_low", "high": "delivery_ci_high",
                                      "scale": -100}},
        {**GOOD, "id": "no_counterpart", "ours": None, "reason": "a range over three retrievers"},
        {**GOOD, "id": "standing", "caveat": "the paper does not name its dense retriever"},
        {**GOOD, "id": "incomparable", "incomparable": "the paper counts both splits, the run one"},
    ]
    for e in entries:
        if e.get("ci", 1) is None:
            del e["ci"]
    path = _write(tmp_path, entries, unreleased={"domains": ["banking"]}, requires={"data": ["hotpotqa"]})
    tables = {"t9": str(t9), "dec": str(dec), "empty": str(tmp_path / "empty.csv")}
    run = {"models": ["qwen3-8b"], "data": ["hotpotqa", "2wikimultihopqa"], "domains": ["clapnq"]}
    df = reproduction_table("demo", path, tables, {"reproduction": run, "boot": {}}).set_index("id")
    assert list(df.index) == [e["id"] for e in entries]
    v, r = df["verdict"], df["reason"]
    assert v["inside"] == REPRODUCED and df.loc["inside", "ours"] == pytest.approx(11.0)
    assert (df.loc["inside", "ours_ci_low"], df.loc["inside", "ours_ci_high"]) == pytest.approx((9.9, 13.4))
    assert (df.loc["inside", "published_ci_low"], df.loc["inside", "published_ci_high"]) == (9.9, 13.4)
    assert v["outside"] == NOT_REPRODUCED and r["outside"] == "15 lies above our 95% interval [9.9, 13.4] (ours: 11)"
    assert math.isnan(df.loc["outside", "published_ci_low"])
    assert v["pairs"] == REPRODUCED and df.loc["pairs", "ours"] == 225000
    # a substituted model is a caveat: the verdict stands beside it
    assert v["substituted"] == REPRODUCED and r["substituted"] == r["inside"]
    assert df.loc["substituted", "caveats"] == "substituted model: the paper's gemma-4-31b-it (this run: qwen3-8b)"
    assert v["unreleased"] == NOT_COMPARABLE and df.loc["unreleased", "ours"] == pytest.approx(11.0)  # shown
    assert r["unreleased"] == "unreleased domain: the paper's banking (this run: clapnq)"
    assert v["absent"] == NOT_COMPARABLE and r["absent"] == "target figure9 is not built by this grid"
    assert r["pooled"] == ("2 rows of t9 have dataset=all: the published number pools what this table keeps apart")
    assert math.isnan(df.loc["pooled", "ours"])
    assert r["no_row"] == "no row of t9 has dataset=musique_4hop in this grid"
    assert r["empty"] == "empty is empty in this grid"
    assert r["no_column"] == "t9 has no column gap_covered in this grid"
    # -100 turns CONCAT - SHARDED (-0.05 [-0.08, -0.02]) into SHARDED - CONCAT 5 [2, 8]: 5.2 inside
    assert v["flipped"] == REPRODUCED and df.loc["flipped", "ours"] == pytest.approx(5.0)
    assert (df.loc["flipped", "ours_ci_low"], df.loc["flipped", "ours_ci_high"]) == pytest.approx((2.0, 8.0))
    assert r["no_counterpart"] == "a range over three retrievers" and df.loc["no_counterpart", "target"] == ""
    assert v["standing"] == REPRODUCED and df.loc["standing", "caveats"] == "the paper does not name its dense retriever"
    assert v["incomparable"] == NOT_COMPARABLE and r["incomparable"] == "the paper counts both splits, the run one"
    assert df.loc["incomparable", "ours"] == pytest.approx(11.0)
    # the run's data lacks nothing here; without a description of the run, nothing is judged
    none = reproduction_table("demo", path, tables, {}).set_index("id")
    assert set(none["verdict"]) == {NOT_COMPARABLE} and none.loc["inside", "reason"] == "this run has no data"


def test_the_target_builds_from_its_inputs_as_a_job_gives_them(tmp_path):
    """``Target.build`` gets the artifact paths (``reproduction_tables``: the target CSVs); the
    table of each target is named by its file stem."""
    stem = tmp_path / "results" / "demo" / "tables"
    stem.mkdir(parents=True)
    pd.DataFrame({"dataset": ["all"], "policy": ["history"], "gap": [0.12], "ci_low": [0.1],
                  "ci_high": [0.14]}).to_csv(stem / "t9.csv", index=False)
    path = _write(tmp_path, [GOOD])
    from convrag.report.reproduction import reproduction_target

    t = reproduction_target("demo")
    assert t.name == "reproduction" and t.kind == "table" and t.inputs == ("published", "reproduction_tables")
    df = t.build({"published": str(path), "reproduction_tables": [str(stem / "t9.csv")]},
                 {"reproduction": {"data": ["x"]}})
    assert df.loc[0, "verdict"] == REPRODUCED and df.loc[0, "ours"] == pytest.approx(12.0)


# ---- the four studies' files against their code -----------------------------------------------------


@pytest.mark.parametrize("key", STUDIES)
def test_every_published_file_loads_and_names_real_targets(key):
    pub = load_published(published_path(key), key)
    study = get_study(key)
    targets = study.targets()
    assert "reproduction" in targets and study.caption("reproduction").startswith("Reproduction of the paper's")
    for e in pub.entries:
        if e.ours is not None:
            assert e.ours.target in targets, (e.id, e.ours.target)
            assert e.ours.target != "reproduction"
    # every number of the reference is listed once (flattened), besides the few qualitative ones
    ids = {e.id for e in pub.entries}
    assert len(ids) == len(pub.entries)


def _reference_numbers(key: str) -> int:
    """The numeric leaves of ../shared/reference/published/<key>.yaml (lists of numbers count each)."""
    ref = REPO_ROOT.parent / "shared" / "reference" / "published" / f"{key}.yaml"
    if not ref.exists():
        pytest.skip(f"{ref} is not present")

    def count(x) -> int:
        if isinstance(x, bool):
            return 0
        if isinstance(x, (int, float)):
            return 1
        if isinstance(x, dict):  # an interval belongs to its value's row
            return sum(count(v) for k, v in x.items() if k != "ci" and not k.endswith("_ci"))
        if isinstance(x, list):
            return sum(count(v) for v in x)
        return 0

    values = yaml.safe_load(ref.read_text())["values"]
    skip = {"generation_settings"}  # coral §D.2: settings, not results
    return sum(count({k: v for k, v in e.items() if k not in ("id", "order")}) for e in values if e["id"] not in skip)


# added: numbers the paper states that the shared reference file lacks as values (lic_rag: §A.2's 11
# distinct shard wordings in 15 runs; §4's 750 questions and 1.5 M conversations, in its header; mtrag_un:
# the header's 666 tasks and 2,800 turns, §2's 8 turns per conversation and 75/25 stitching split, §3.2's
# 468 retrieval questions; the earlier MTRAG's 8 BM25 retrieval numbers of its repository's README, and 842
# tasks (§1); Tables 1, 3 and 4 of the paper's PDF, 6 + 6 + 14 x 6 numbers; worse_labels: the
# paper's regeneration check .453 / .546, the 72-74% dialogue-tied documents and the audit's 90 / 100%
# dialogue-tied, the <= .03 shift under dialogue resampling, MTRAG's +.07-.10 AUROC gap, "ten times" the
# copies, phi-4's 35 control contexts and §3 / §4.4's data (858 turns, 211 dialogues, 3-5 turns, 16k-121k
# documents, 4,290 contexts, 777 MTRAG turns: 8) and the 1 of 109 false misses on rejected passages; coral:
# §3.3's 8,000 conversations, 3.17 golden passages per turn, 255-token responses and 200K passages, in its
# header; §3.1's 20,000 pages and §3.3's 2,000 conversations per type (4), LDS's 3-6 turns, and SIDS / STRW /
# DTRW's 1,600 of 6-10 turns and 400 of 11-20 (6); lic_rag also: §B.4's "nearly fivefold" (19.0 / 4.0) and
# §B.3's "nearly double" (15.0 / 7.6), the text's words as its own numbers). Statements (kind: statement) are
# not numbers of the reference: counted apart.
@pytest.mark.parametrize("key, unlisted, added", [("lic_rag", 0, 5), ("mtrag_un", 0, 14 + 1 + 6 + 6 + 84),
                                                  ("coral", 0, 4 + 1 + 4 + 1 + 6), ("worse_labels", 0, 9 + 2 + 8 + 1)])
def test_every_published_number_has_a_row(key, unlisted, added):
    entries = load_published(published_path(key), key).entries
    assert len([e for e in entries if e.kind != "statement"]) == _reference_numbers(key) - unlisted + added


def _lic_rag_inputs(tmp_path) -> dict:
    """Small hand-made score tables with every column the referenced lic_rag targets read."""
    rng = np.random.default_rng(0)
    rows, turns = [], []
    for ds in ("hotpotqa", "musique_4hop"):
        for model in ("gemma-4-31b-it", "qwen3-14b"):
            for ret in ("closed_book", "bm25", "pog", "tog2"):
                closed = ret == "closed_book"
                policies = ("none",) if closed else ("history", "current")
                cells = [("FULL", "none"), ("CONCAT", "none")] + [
                    (c, p) for c in ("SHARDED", "RECAP", "SNOWBALL") for p in policies]
                for cond, pol in cells:
                    for q in range(4):
                        for run in range(2):
                            cid = f"{ds}-{model}-{ret}-{cond}-{pol}-{q}-{run}"
                            f1 = float(rng.uniform(0, 1))
                            rows.append(dict(dataset=ds, model=model, retriever=ret, condition=cond, policy=pol,
                                             qid=f"q{q}", run=run, conv_id=cid, final_f1=f1, best_f1=min(1.0, f1 + 0.1),
                                             judge_correct=float(rng.uniform(0, 1) < f1),
                                             order_kept=float(q % 2) if cond in ("SHARDED", "RECAP", "SNOWBALL") else np.nan,
                                             final_cum_recall=np.nan if closed else float(rng.choice([0.5, 1.0]))))
                            for turn in (1, 2) if cond in ("SHARDED", "RECAP", "SNOWBALL") else (1,):
                                turns.append({"dataset": ds, "model": model, "retriever": ret, "condition": cond,
                                              "policy": pol, "conv_id": cid, "qid": f"q{q}", "turn": turn,
                                              "recall@5": np.nan if closed else 0.5,
                                              "cum_recall": np.nan if closed else 0.5,
                                              "category": "answer_attempt", "retrieval_llm_calls": 2,
                                              "retrieval_prompt_tokens": 10, "retrieval_completion_tokens": 3,
                                              "retrieval_parse_failures": 0})
    pd.DataFrame(rows).to_parquet(tmp_path / "scores.parquet")
    pd.DataFrame(turns).to_parquet(tmp_path / "turns.parquet")
    var = tmp_path / "variability.json"  # two wordings of one question (shard_wording)
    var.write_text(json.dumps({"steps": 2, "samples": 2, "questions": [
        {"qid": "q0", "dataset": "hotpotqa", "question": "?",
         "samples": [{"sample": k, "shards": ["goal", f"clue {k}"], "passed": True} for k in range(2)]}]}))
    return {"scores": str(tmp_path / "scores.parquet"), "turns": str(tmp_path / "turns.parquet"),
            "shard_variability": [str(var)]}


def _columns_of_code(key: str, tmp_path) -> dict[str, set[str]]:
    """target -> the columns its code writes: built on hand-made inputs (lic_rag), or from the
    analyses' declared column lists (worse_labels, coral's Table 3), or from the table functions
    run on a small score table (Table 2 of mtrag_un and coral, whose measure columns are the
    paper configs' ir_measures names)."""
    study = get_study(key)
    if key == "lic_rag":
        inputs = _lic_rag_inputs(tmp_path)
        ctx = {"boot": {"n_resamples": 20, "seed": 0}, "analysis": {}, "closed_retrievers": ["closed_book"],
               "explorers": ["pog", "tog2"], "pog": ["pog"],
               "largest_per_family": {"gemma": "gemma-4-31b-it", "qwen": "qwen3-14b"}}
        wanted = load_published(published_path(key), key).targets()
        return {t: set(study.targets()[t].build(inputs, ctx).columns) for t in wanted}
    if key == "worse_labels":
        from convrag.studies.worse_labels import abstention as AB
        from convrag.studies.worse_labels import answer_judges as AJ
        from convrag.studies.worse_labels import label_quality as LQ
        from convrag.studies.worse_labels import followups as FU

        rungs = list(load_config(PAPER_CONFIGS[key])["worse_labels"]["slices"]["recor"]["ladder"])
        src = (REPO_ROOT / "workflow/convrag/studies/worse_labels/targets.py").read_text()
        ladder = {"slice", "rung", "turns", "ndcg10_macro", "ndcg10_macro_ci_low", "ndcg10_macro_ci_high",
                  "gold_in_topk", "gold_in_topk_ci_low", "gold_in_topk_ci_high", "weights", "weights_source"}
        body = src.split("def ladder_table")[1].split("\ndef ")[0]
        assert all(f"{c}=" in body for c in ladder)  # ladder_table's row keys (its other columns: per domain)
        from convrag.studies.worse_labels.targets import DATA_COLUMNS

        return {"ladder_retrieval": ladder, "data": set(DATA_COLUMNS), "figure2a_insufficiency": set(LQ.FIGURE2A_COLUMNS),
                "figure2b_precision": set(LQ.FIGURE2B_COLUMNS), "table1_labellers": set(LQ.table1_columns(rungs)),
                "copies": set(LQ.COPIES_COLUMNS), "negative_control": set(LQ.NEGATIVE_CONTROL_COLUMNS),
                "agreement": set(LQ.AGREEMENT_COLUMNS), "evidence": set(LQ.EVIDENCE_COLUMNS),
                "figure3_auroc": set(AB.FIGURE3_COLUMNS), "contrast_2b_2c": set(AB.CONTRAST_COLUMNS),
                "score_detectors": set(AB.SCORE_COLUMNS), "table2_false_misses": set(AB.TABLE2_COLUMNS),
                "answer_judges": set(AJ.ANSWER_JUDGES_COLUMNS), "judge_survival": set(AJ.SURVIVAL_COLUMNS),
                "table3_mtrag": set(LQ.TABLE3_COLUMNS) | set(AB.AUROC_COLUMNS_COLUMNS),
                "ladder_steps": set(FU.LADDER_STEPS_COLUMNS), "dialogue_tied": set(FU.DIALOGUE_TIED_COLUMNS),
                "false_miss_origin": set(FU.ORIGIN_COLUMNS), "changed_conclusions": set(FU.CHANGED_ALL_COLUMNS),
                "mtrag_human": set(FU.MTRAG_HUMAN_COLUMNS)}
    cfg = load_config(PAPER_CONFIGS[key])
    measures = cfg[key]["measures"]
    scores = pd.DataFrame([{"task_id": f"t{i}", "retriever": "r", "policy": "current", "domain": "d", "measure": m,
                            "value": 0.5} for i in range(2) for m in measures])
    if key == "mtrag_un":
        from convrag.studies.mtrag_un import analyses as A

        gen = pd.DataFrame([{"model": "m", "setting": "reference", "RB_alg": 0.5, "RB_llm": 0.5, "RL_F": 0.5,
                             "RougeL": 0.5, "idk": "0"}])
        return {"table2_retrieval": set(A.retrieval_table(scores).columns),
                "mtrag_retrieval": set(A.official_retrieval_table(scores).columns),
                "benchmark_statistics": set(A.benchmark_statistics([]).columns),
                "table4_generation": set(A.generation_table(gen).columns)}
    from convrag.studies.coral import analyses as A
    from convrag.studies.coral.evaluate import TABLE3_COLUMNS

    from convrag.studies.coral.cleaning import dataset_statistics

    from convrag.records import TurnTask

    one = [TurnTask(task_id="c_1", benchmark="b", conversation_id="c", turn=1, history=[], question="q",
                    labels={"flow": "LDS"})]
    return {"table2_retrieval": set(A.retrieval_table(scores).columns), "table3_generation": set(TABLE3_COLUMNS),
            "figure4_history_length": set(A.history_sweep_table(pd.DataFrame()).columns),
            "table1_statistics": set(dataset_statistics([], 0).columns),
            "table4_structure": set(A.structure_table(one).columns)}


@pytest.mark.parametrize("key", STUDIES)
def test_every_published_column_is_one_the_code_writes(key, tmp_path):
    columns = _columns_of_code(key, tmp_path)
    for e in load_published(published_path(key), key).entries:
        if e.ours is None:
            continue
        used = [*e.ours.where, e.ours.value, *([e.ours.low, e.ours.high] if e.ours.low else [])]
        missing = [c for c in used if c not in columns[e.ours.target]]
        assert not missing, f"{key} entry {e.id}: {e.ours.target} has no column {missing}"


@pytest.mark.parametrize("key", STUDIES)
def test_the_offline_default_is_not_comparable_and_says_why(key):
    """The embedded default runs SmolLM2-135M on generated data: every row is 'not comparable',
    whatever our tables hold, and the reason names the substitution."""
    from convrag.layout import layout
    from convrag.studies import active_studies

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    study = next(s for s in active_studies(cfg) if s.key == key)
    arts = study.artifacts(cfg, layout(cfg))
    # named relative to the working directory: the HTML report shows no absolute path of this machine
    assert arts["published"] == os.path.relpath(published_path(key)) and not os.path.isabs(arts["published"])
    df = reproduction_table(key, arts["published"], {}, study.context(cfg))
    assert len(df) == len(load_published(published_path(key), key).entries)
    assert set(df["verdict"]) == {NOT_COMPARABLE}
    # (mtrag_un's MTRAG retrieval numbers: the default has no MTRAG retrieval tasks, and says so)
    generated = df["reason"].str.contains("generated (?:replication )?data|this run has no mtrag retrieval data",
                                          regex=True)
    assert generated.sum() >= 0.9 * len(df)


def test_the_paper_configs_name_what_still_differs():
    """On the paper grids, the published numbers' requirements are met but for the stated
    substitutions: ELSER (mtrag_un), the unreleased domains (mtrag_un)
    and lic_rag's own prompt wording (worse_labels: none of Table 3's; its AUROC reader is the
    paper config's first reader, the paper's Qwen3-4B)."""
    ctx = {k: get_study(k).context(load_config(PAPER_CONFIGS[k]))["reproduction"] for k in STUDIES}
    reasons = {}
    for k in STUDIES:
        pub = load_published(published_path(k), k)
        reasons[k] = {e.id: requirement_failures(e.requires, ctx[k], pub.unreleased) for e in pub.entries}
    # lic_rag: only the prompts (the paper config keeps the project's wording until the user names the paper's)
    assert all(r == ["own prompt wording"] for r in reasons["lic_rag"].values())
    supplied = {**ctx["lic_rag"], "prompts": "supplied"}
    pub = load_published(published_path("lic_rag"), "lic_rag")
    assert all(not requirement_failures(e.requires, supplied, pub.unreleased) for e in pub.entries)
    assert reasons["mtrag_un"]["table2.bm25.LT.R5"] == [
        "unreleased domain: the paper's banking, telco (this run: clapnq, cloud, fiqa, govt)"]
    elser = reasons["mtrag_un"]["table2.elser.RW.R5"]
    assert any(r.startswith("substituted retriever: the paper's elser") for r in elser)
    # coral's paper config names GPT-3.5 (an API entry) for LLM4CS and runs the SFT rewriter itself
    assert reasons["coral"]["table2.llm4cs_gpt35.MRR"] == []
    assert reasons["coral"]["table2.qwen2_5_1_5b_sft.MRR"] == []
    assert reasons["coral"]["table2.kd_ance_coral.MRR"] == []
    assert reasons["worse_labels"]["ndcg10.official_baselines_exact.bm25_hist"] == []
    # Table 3's AUROC reader is the paper config's first reader, Qwen3-4B-Instruct-2507 as in the paper
    assert reasons["worse_labels"]["table3_mtrag.qwen3_4b_auroc_qrels.last_bm25"] == []


def test_artifacts_leave_out_targets_the_config_does_not_build():
    """mtrag_un's Table 2 reads the retrieval scores; without them (an artifact set to None) the
    reproduction target reads nothing, and Snakemake is asked for no such table."""
    from convrag.studies.base import Study, Target

    class Demo(Study):
        key = "coral"  # the coral file names table2_retrieval (a table), table3_generation and three more

        def targets(self):
            return {"table2_retrieval": Target("table2_retrieval", "table", lambda i, c: None, inputs=("retrieval",)),
                    "table3_generation": Target("table3_generation", "figure", lambda i, c: None,
                                                plot=lambda d, s: None, inputs=("generation",)),
                    **{t: Target(t, "table", lambda i, c: None, inputs=("other",))
                       for t in ("figure4_history_length", "table1_statistics", "table4_structure")}}

    arts = reproduction_artifacts(Demo(), Layout("r"), {"retrieval": "x.parquet", "generation": None, "other": None})
    assert arts["reproduction_tables"] == ["r/coral/tables/table2_retrieval.csv"]
    arts = reproduction_artifacts(Demo(), Layout("r"), {"retrieval": "x.parquet", "generation": ["g"], "other": None})
    assert arts["reproduction_tables"] == ["r/coral/tables/table2_retrieval.csv",
                                           "r/coral/figures/table3_generation.csv"]

    class Drifted(Demo):
        def targets(self):
            return {"table2_retrieval": super().targets()["table2_retrieval"]}

    with pytest.raises(DataError, match=r"coral\.yaml: ours\.target 'table3_generation' is not a target of coral"):
        reproduction_artifacts(Drifted(), Layout("r"), {"retrieval": "x.parquet"})


def test_published_files_do_not_edit_the_reference():
    """The project's files carry the reference's numbers: spot checks against the shared files."""
    pubs = {k: {e.id: e for e in load_published(published_path(k), k).entries} for k in STUDIES}
    assert pubs["lic_rag"]["complete_coverage_gap.gap"].ci == (9.9, 13.4)
    assert pubs["mtrag_un"]["table2.elser.RW.nDCG10"].value == 0.51
    assert pubs["coral"]["table2.qwen2_5_1_5b_sft.R100"].value == 48.6
    assert pubs["worse_labels"]["table3_mtrag.qwen3_4b_auroc_content.last_bm25"].value == 0.80
    assert pubs["worse_labels"]["copy_detection.fusion"].ci == (0.112, 0.217)
    assert pubs["lic_rag"]["pog_cost.pog_per_full_retrieval"].value == 22.1


def test_lic_rag_reproduction_target_writes_its_table_and_caption(tmp_path):
    """The real lic_rag target through the shared ``build_target`` (as ``convrag target`` runs it),
    with the paper config's run description and one hand-written figure table: closed-book FULL
    0.230 lies in [0.20, 0.25] (reproduced), SHARDED 0.190 above [0.12, 0.18] (not reproduced),
    HippoRAG2 FULL has a row per dataset but none over all datasets (not comparable), the other
    targets are absent."""
    from convrag.report.targets import build_target

    figures = tmp_path / "results" / "lic_rag" / "figures"
    figures.mkdir(parents=True)
    pd.DataFrame({"dataset": ["all", "all", "hotpotqa", "musique_4hop"],
                  "retriever": ["closed_book", "closed_book", "hipporag2", "hipporag2"],
                  "condition": ["FULL", "SHARDED", "FULL", "FULL"], "mean_f1": [0.22, 0.15, 0.5, 0.4],
                  "ci_low": [0.20, 0.12, 0.45, 0.35], "ci_high": [0.25, 0.18, 0.55, 0.45], "n": [150, 150, 150, 150]}
                 ).to_csv(figures / "delivery_conditions.csv", index=False)
    study = get_study("lic_rag")
    paper = load_config(PAPER_CONFIGS["lic_rag"])
    inputs = {"published": str(published_path("lic_rag")),
              "reproduction_tables": [str(figures / "delivery_conditions.csv")]}
    # the paper config as shipped uses the project's own prompt wording: a caveat beside each verdict
    build_target(study, "reproduction", inputs, {"reproduction": study.context(paper)["reproduction"]},
                 str(tmp_path / "own"))
    own = pd.read_csv(tmp_path / "own.csv").set_index("id")
    assert own.loc["closed_book_f1.FULL", "verdict"] == REPRODUCED
    assert own.loc["closed_book_f1.FULL", "caveats"] == "own prompt wording"
    assert set(own.prompts) == {"assistant: own wording; shard: own wording"}
    # with the paper's prompts supplied (files the user writes from its appendix), the caveat goes
    paper["lic_rag"]["prompts"] = {"assistant": "my/assistant.yaml", "shard": "my/shard.yaml"}
    ctx = {"reproduction": study.context(paper)["reproduction"]}
    build_target(study, "reproduction", inputs, ctx, str(tmp_path / "reproduction"))
    df = pd.read_csv(tmp_path / "reproduction.csv").set_index("id")
    assert set(df.prompts) == {"assistant: my/assistant.yaml; shard: my/shard.yaml"}
    assert df.loc["closed_book_f1.FULL", "verdict"] == REPRODUCED and pd.isna(df.loc["closed_book_f1.FULL", "caveats"])
    assert df.loc["closed_book_f1.SHARDED", "verdict"] == NOT_REPRODUCED
    assert df.loc["closed_book_f1.SHARDED", "reason"] == "0.19 lies above our 95% interval [0.12, 0.18] (ours: 0.15)"
    pooled = df.loc["hipporag2_full.points", "reason"]
    assert pooled == "no row of delivery_conditions has dataset=all, retriever=hipporag2, condition=FULL in this grid"
    assert df.loc["formulation_loss.bm25", "reason"] == "target decomposition is not built by this grid"
    assert (df["verdict"] == NOT_COMPARABLE).sum() == len(df) - 2
    md = (tmp_path / "reproduction.md").read_text()
    counts = f"{len(df)} published numbers: 1 reproduced, 1 not reproduced, 0 inconclusive, {len(df) - 2} not comparable"
    assert md.startswith(counts + "\n\nReproduction of the paper's published numbers") and "closed_book_f1.FULL" in md


def test_row_selectors_match_csv_types(tmp_path):
    """CSV round trips turn booleans into True/False, numbers into floats and None into empty
    cells; a selector written in YAML (false, 1, null) still finds its row."""
    from convrag.report.reproduction import Ours, lookup

    path = tmp_path / "f3.csv"
    pd.DataFrame({"rung": ["hybrid", "hybrid", None], "restricted": [False, True, False], "turn": [1.0, 2.0, 1.0],
                  "value": [0.7, 0.8, 0.9], "ci_low": [0.6, 0.7, 0.8], "ci_high": [0.75, 0.85, 0.95]}
                 ).to_csv(path, index=False)
    tables = {"f3": str(path)}
    got, why = lookup(Ours("f3", "value", {"rung": "hybrid", "restricted": False, "turn": 1}, "ci_low", "ci_high"), tables)
    assert why is None and got == {"ours": 0.7, "low": 0.6, "high": 0.75, "n": None}
    got, _ = lookup(Ours("f3", "value", {"rung": "hybrid", "restricted": True}), tables)
    assert got == {"ours": 0.8, "low": None, "high": None, "n": None}
    got, _ = lookup(Ours("f3", "value", {"rung": None}, scale=100), tables)
    assert got["ours"] == pytest.approx(90.0)


def test_a_range_over_named_rows_and_an_unavailable_entry(tmp_path):
    """A paper's range over named retrievers (min / max) or mean over named models reads every
    named row; a name without its row says so. An entry no run can give says 'unavailable'."""
    from convrag.report.reproduction import Ours, _entry, lookup

    path = tmp_path / "f5.csv"
    pd.DataFrame({"dataset": "all", "retriever": ["hipporag", "lightrag", "tog2", "bm25"],
                  "recovery": [0.9, 1.2, 1.0, 0.1]}).to_csv(path, index=False)
    tables = {"f5": str(path)}
    three = {"dataset": "all", "retriever": ["hipporag", "lightrag", "tog2"]}
    assert lookup(Ours("f5", "recovery", three, agg="min"), tables)[0]["ours"] == pytest.approx(0.9)
    assert lookup(Ours("f5", "recovery", three, agg="max"), tables)[0]["ours"] == pytest.approx(1.2)
    assert lookup(Ours("f5", "recovery", three, agg="mean", scale=100), tables)[0]["ours"] == pytest.approx(310 / 3)
    assert lookup(Ours("f5", "recovery", three, agg="max_over_min"), tables)[0]["ours"] == pytest.approx(1.2 / 0.9)
    found, why = lookup(Ours("f5", "recovery", {"retriever": ["hipporag", "pog"]}, agg="max"), tables)
    assert found is None and why == "f5: the max over retriever hipporag, pog has no row for pog in this grid"
    base = {"id": "x", "source": "§B.1", "what": "w", "value": 1.0, "scale": "ratio", "kind": "estimate"}
    with pytest.raises(DataError, match="a list needs ours.agg"):
        _entry({**base, "ours": {"target": "f5", "value": "recovery", "where": {"retriever": ["a", "b"]}}}, 0, "p", {})
    with pytest.raises(DataError, match="ours.agg must be one of min, max, mean, sum, count, max_over_min, not 'median'"):
        _entry({**base, "ours": {"target": "f5", "value": "recovery", "where": {"retriever": ["a"]}, "agg": "median"}}, 0, "p", {})
    e = _entry({**base, "ours": None, "unavailable": "the paper does not name them"}, 0, "p", {})
    assert e.unavailable and e.reason == "the paper does not name them"
    with pytest.raises(DataError, match="'unavailable'"):
        _entry({**base, "ours": {"target": "f5", "value": "recovery"}, "unavailable": "no"}, 0, "p", {})


def test_own_prompt_wording_per_role():
    """``requires: {prompts: [roles]}``: only the roles that ran in the project's wording are named."""
    from convrag.report.reproduction import own_prompts

    have = {"generation": "own", "idk": "official", "rb_llm": "my/rb.yaml"}
    assert own_prompts(["generation", "idk"], have) == ["generation"]
    assert own_prompts(["idk", "rb_llm"], have) == []
    assert own_prompts(["clarification"], have) == ["clarification"]  # not named by the run: its own wording
    assert own_prompts("supplied", "supplied") == [] and own_prompts("supplied", "own") == ["all"]
    assert requirement_failures({"prompts": ["generation", "idk"]}, {"prompts": have}) == [
        "own prompt wording (generation)"]
    assert requirement_failures({"prompts": "supplied"}, {"prompts": "own"}) == ["own prompt wording"]


def test_sum_and_count_total_the_selected_rows(tmp_path):
    """agg count: the rows 'where' selects; agg sum: their values, True/False counted 1/0 after
    the CSV round trip and an empty cell 0; lists and intervals are refused for a total."""
    from convrag.report.reproduction import Ours, _ours, lookup

    path = tmp_path / "t.csv"
    pd.DataFrame({"family": ["a", "a", "b", "b"], "changed": [True, False, True, None],
                  "n": [1.0, 2.0, 3.0, float("nan")]}).to_csv(path, index=False)
    tables = {"t": str(path)}
    assert lookup(Ours("t", "changed", {}, agg="count"), tables)[0]["ours"] == 4
    assert lookup(Ours("t", "changed", {}, agg="sum"), tables)[0]["ours"] == 2
    assert lookup(Ours("t", "changed", {"family": "b"}, agg="sum"), tables)[0]["ours"] == 1
    assert lookup(Ours("t", "n", {"family": "a"}, agg="sum", scale=10), tables)[0]["ours"] == 30
    with pytest.raises(DataError, match="totals every row"):
        _ours({"target": "t", "value": "n", "where": {"family": ["a", "b"]}, "agg": "sum"}, "x")


def test_a_statement_entry_is_held_to_the_rows_it_selects(tmp_path):
    gaps = tmp_path / "t2.csv"
    pd.DataFrame({"retriever": ["bm25", "dense", "pog", "bm25", "dense", "pog"],
                  "policy": ["history"] * 3 + ["current"] * 3, "gap": [0.05, 0.07, 0.02, 0.04, 0.06, -0.01],
                  "ci_low": [0.03, 0.05, 0.01, 0.02, 0.04, -0.03], "ci_high": [0.07, 0.09, 0.03, 0.06, 0.08, 0.01]}
                 ).to_csv(gaps, index=False)
    base = {"source": "§5.2", "kind": "statement", "scale": "points"}
    ours = {"target": "t2", "where": {"retriever": ["bm25", "dense"], "policy": ["history", "current"]},
            "value": "gap", "low": "ci_low", "high": "ci_high", "scale": 100}
    entries = [
        {**base, "id": "positive", "what": "every main retriever has a positive gap under both policies",
         "holds": {"all": "> 0"}, "ours": ours},
        {**base, "id": "with_pog", "what": "PoG too", "holds": {"all": "> 0"},
         "ours": {**ours, "where": {"retriever": ["bm25", "dense", "pog"], "policy": "current"}}},
        {**base, "id": "pog_lowest", "what": "PoG's gap is the smallest under HISTORY", "ours": {
            **ours, "where": {"policy": "history"}},
         "holds": {"rank": {"row": {"retriever": "pog"}, "position": 1, "order": "ascending"}}},
    ]
    df = reproduction_table("demo", _write(tmp_path, entries), {"t2": str(gaps)}, {"reproduction": {}}).set_index("id")
    assert df.loc["positive", "verdict"] == REPRODUCED
    assert df.loc["positive", "reason"] == ("holds for all 4 rows (all > 0: bm25/history 5, dense/history 7, "
                                            "bm25/current 4, dense/current 6)")
    assert df.loc["with_pog", "verdict"] == INCONCLUSIVE  # PoG's [-3, 1] straddles 0
    assert df.loc["pog_lowest", "verdict"] == REPRODUCED and math.isnan(df.loc["pog_lowest", "published"])
    with pytest.raises(DataError, match="a statement needs 'holds'"):
        load_published(_write(tmp_path, [{**entries[0], "holds": None}]))
    with pytest.raises(DataError, match="holds.all must be '<op> <number>'"):
        load_published(_write(tmp_path, [{**entries[0], "holds": {"all": "positive"}}]))


# ---- the page a reviewer reads (the target's Markdown) and the report's view of it ------------------

# a standing reason longer than a page line may be: once a note, wrapped; never on a row
LONG = ("the paper averages its numbers over ten LLMs, five datasets and nine retrieval settings, pooling conversations "
        "that our tables keep per cell, and it names neither the sampling temperature of the user simulator nor the "
        "sharding model's version; no table of ours holds the pooled number, and the per-cell rows of ours cannot be "
        "pooled the paper's way without its weights, which it does not publish either (its appendix gives the sizes of "
        "the question sets only, not the numbers of conversations that reached each turn)")
RUNS = "of 15 runs; ours: one run"  # a caveat that itself holds "; " (the CSV joins caveats with "; ")
SUB = "substituted model: the paper's gemma-4-31b-it (this run: qwen3-8b)"
BANKING = "unreleased domain: the paper's banking (this run: clapnq)"
SPLITS = "the paper counts both splits, the run one"
WHAT = ("the mean FULL-SHARDED F1 gap over the nine retrieval settings under HISTORY delivery, pooled over the five "
        "datasets and the ten LLMs of the grid, in points")


class _Demo:
    """What ``build_target`` asks of a study: its targets and a caption."""

    key = "demo"

    def all_targets(self):
        from convrag.report.reproduction import reproduction_target

        return {"reproduction": reproduction_target("demo")}

    def caption(self, name):
        return ("Reproduction of the demo paper's numbers, with a caption as long as the real ones: "
                + "every number beside ours, with our 95% interval where the table has one. " * 8).strip()


def _demo_page(tmp_path) -> tuple[Path, Path]:
    """The reproduction target of a hand-written published file over hand-written tables, built
    as ``convrag target`` builds it: 8 numbers in three places of the paper, Table 2's rows not
    adjacent in the file; a 477-character reason on three rows; a caveat on two rows and one
    holding "; "; a not-comparable reason of two parts, one shared with another row."""
    from convrag.report.targets import build_target

    t9 = tmp_path / "t9.csv"
    pd.DataFrame({"dataset": ["all"], "policy": ["history"], "gap": [0.11], "ci_low": [0.099], "ci_high": [0.134]}
                 ).to_csv(t9, index=False)
    ours9 = GOOD["ours"]
    entries = [
        {**GOOD, "id": "t2.inside", "source": "Table 2", "requires": {"models": ["gemma-4-31b-it"]}},
        {**GOOD, "id": "t2.outside", "source": "Table 2", "value": 15.0, "ci": [14.0, 16.0],
         "requires": {"models": ["gemma-4-31b-it"]}, "caveat": RUNS},
        {**GOOD, "id": "s51.pooled", "source": "§5.1", "ci": None, "ours": None, "reason": LONG},
        {**GOOD, "id": "s51.pooled_current", "source": "§5.1", "ci": None, "ours": None, "reason": LONG},
        {**GOOD, "id": "t2.pooled", "source": "Table 2", "what": WHAT, "ci": None, "ours": None, "reason": LONG},
        {**GOOD, "id": "f3.banking", "source": "Figure 3", "requires": {"domains": ["banking"]}, "incomparable": SPLITS},
        {**GOOD, "id": "f3.banking_only", "source": "Figure 3", "requires": {"domains": ["banking"]}},
        {**GOOD, "id": "s51.no_interval", "source": "§5.1", "ci": None,
         "ours": {k: v for k, v in ours9.items() if k not in ("low", "high")}},
    ]
    for e in entries:
        if e.get("ci", 1) is None:
            del e["ci"]
    published = _write(tmp_path, entries, unreleased={"domains": ["banking"]})
    run = {"models": ["qwen3-8b"], "domains": ["clapnq"]}
    stem = tmp_path / "results" / "demo" / "tables" / "reproduction"
    build_target(_Demo(), "reproduction", {"published": str(published), "reproduction_tables": [str(t9)]},
                 {"reproduction": run}, str(stem))
    return stem.with_suffix(".csv"), stem.with_suffix(".md")


def _notes(md: str) -> dict[int, str]:
    """The numbered notes below the tables: number -> text (continuation lines joined)."""
    notes: dict[int, str] = {}
    for line in md.split("\n## Notes\n", 1)[1].strip().splitlines():
        m = re.match(r"(\d+)\. (.*)", line)
        if m:
            notes[int(m[1])] = m[2]
        else:
            last = max(notes)
            notes[last] += " " + line.strip()
    return notes


def _rows(md: str) -> dict[str, dict[str, str]]:
    """Every table row of the page: id -> {column: cell}, and the heading it stands under."""
    rows, heading, header = {}, None, None
    for line in md.splitlines():
        if line.startswith("## "):
            heading, header = line[3:], None
        elif line.startswith("|") and not line.startswith("|-"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            if header is None:
                header = cells
            else:
                rows[cells[0]] = {**dict(zip(header, cells)), "heading": heading}
    return rows


def test_the_reproduction_page_counts_groups_and_notes_each_text_once(tmp_path):
    """The reproduction target's Markdown is the reviewer's page: the verdict counts first, rows
    under the heading of their place in the paper (Table 2's three rows together though the file
    lists §5.1 between them), each reason and caveat text once as a numbered note that rows cite
    by number, no line over 400 characters; the CSV keeps every column and text in full."""
    csv, md_path = _demo_page(tmp_path)
    md = md_path.read_text(encoding="utf-8")
    lines = md.splitlines()
    assert lines[0] == "8 published numbers: 1 reproduced, 1 not reproduced, 1 inconclusive, 5 not comparable"
    assert lines[1] == "" and lines[2].startswith("Reproduction of the demo paper's numbers")
    assert [ln for ln in lines if ln.startswith("## ")] == ["## Table 2", "## §5.1", "## Figure 3", "## Notes"]
    assert "3 published numbers: 1 reproduced, 1 not reproduced, 1 not comparable" in lines  # Table 2's own counts
    assert max(map(len, lines)) <= 400 and len(LONG) > 400
    caption = " ".join(lines[2:lines.index("## Table 2") - 1])  # wrapped; its blank-cell reasons kept
    assert ("n (3 of 8 rows: its estimate (ours) is blank; 5 of 8 rows: no unit count for this entry (the "
            "published-values map names no ours.n, or its row has none))") in caption
    rows = _rows(md)
    assert {r: rows[r]["heading"] for r in rows} == {
        "t2.inside": "Table 2", "t2.outside": "Table 2", "t2.pooled": "Table 2", "s51.pooled": "§5.1",
        "s51.pooled_current": "§5.1", "s51.no_interval": "§5.1", "f3.banking": "Figure 3",
        "f3.banking_only": "Figure 3"}
    assert rows["t2.inside"]["published"] == "11.6 [9.9, 13.4]" and rows["t2.inside"]["ours [95% CI]"] == "11 [9.9, 13.4]"
    assert rows["t2.outside"]["verdict"] == NOT_REPRODUCED and rows["s51.no_interval"]["verdict"] == INCONCLUSIVE
    notes = _notes(md)
    assert sorted(notes) == list(range(1, len(notes) + 1))
    texts = list(notes.values())
    assert len(texts) == len(set(texts))  # each text once
    number = {t: k for k, t in notes.items()}
    # a long description goes to a note; the rest of its row stays short
    assert WHAT in number and rows["t2.pooled"]["what"].endswith(f"... (note {number[WHAT]})")
    # each reason and caveat once, the rows citing it by number
    for text in (LONG, RUNS, SUB, BANKING, SPLITS):
        assert text in number, text
        assert md.count(text[:60]) == 1, text  # nowhere else on the page: not on the rows
    assert [rows[r]["reason (note)"] for r in ("t2.pooled", "s51.pooled", "s51.pooled_current")] == [str(number[LONG])] * 3
    assert rows["t2.inside"]["caveats (notes)"] == str(number[SUB])
    assert rows["t2.outside"]["caveats (notes)"] == f"{number[SUB]}, {number[RUNS]}"
    assert rows["f3.banking"]["reason (note)"] == f"{number[BANKING]}, {number[SPLITS]}"
    assert rows["f3.banking_only"]["reason (note)"] == str(number[BANKING])
    assert notes[int(rows["t2.outside"]["reason (note)"])] == "15 lies above our 95% interval [9.9, 13.4] (ours: 11)"
    # the CSV: every column, every text in full, as before
    df = pd.read_csv(csv).set_index("id")
    assert list(df.reset_index().columns) == COLUMNS
    assert df.loc["s51.pooled", "reason"] == LONG and df.loc["t2.pooled", "what"] == WHAT
    assert df.loc["t2.outside", "caveats"] == f"{SUB}; {RUNS}"
    assert df.loc["f3.banking", "reason"] == f"{BANKING}; {SPLITS}"


def test_a_page_from_the_csv_alone_notes_each_rows_texts_whole(tmp_path):
    """Read back from its CSV (no separate texts: the caveats are joined with "; "), a table
    still makes a page: each row's reason and caveats whole, each distinct one once."""
    from convrag.report.reproduction import reproduction_page

    csv, _ = _demo_page(tmp_path)
    page = reproduction_page(pd.read_csv(csv), "A caption.")
    notes = list(_notes(page).values())
    assert f"{SUB}; {RUNS}" in notes and SUB in notes and notes.count(LONG) == 1
    assert page.splitlines()[0] == "8 published numbers: 1 reproduced, 1 not reproduced, 1 inconclusive, 5 not comparable"


@pytest.mark.parametrize("key", STUDIES)
def test_every_reproduction_target_writes_its_own_page(key):
    """The page is the reproduction target's own (``Target.markdown``), not a case of its name in
    the shared machinery; every other target keeps the generic caption-and-table."""
    from convrag.report.reproduction import reproduction_page

    targets = get_study(key).all_targets()
    assert targets["reproduction"].markdown is reproduction_page
    assert [n for n, t in targets.items() if t.markdown is not None] == ["reproduction"]


def test_the_report_shows_the_page_under_its_verdict_counts(tmp_path):
    """``snakemake --report`` renders workflow/report/target.rst with the job (Jinja, trim_blocks
    and lstrip_blocks, then docutils to HTML, as snakemake.report does): it shows the Markdown file
    the job wrote (output md), read after the run, so a target with a page shows the verdict counts
    as the description's first paragraph and the page below it as text (tests/test_report_html.py:
    the other targets, whose first line is the caption)."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    _, md = _demo_page(tmp_path)
    template = (REPO_ROOT / "workflow" / "report" / "target.rst").read_text()
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    rst = env.from_string(template).render(snakemake=SimpleNamespace(output=SimpleNamespace(md=str(md))))
    shown = publish_parts(rst, writer_name="html")["body"]
    counts = "8 published numbers: 1 reproduced, 1 not reproduced, 1 inconclusive, 5 not comparable"
    assert shown.startswith(f"<p>{counts}</p>") and shown.count(counts) == 1
    block = shown.split('<pre class="literal-block">', 1)[1]
    for text in ("Reproduction of the demo paper", "## Table 2", "## §5.1", "## Figure 3", "## Notes", "t2.outside"):
        assert text in block, text
    assert "System Message" not in shown and "system-message" not in shown


def test_a_kappa_has_its_own_scale_not_a_share():
    """Cohen's and Fleiss' kappa are chance-corrected agreement coefficients (-1 to 1), not shares
    (issue 41): every kappa entry of the published maps has the scale "kappa" (a share's margin of
    0.03); raw agreement, a share of identical labels, keeps the share scale."""
    assert default_margin("kappa", 0.44) == default_margin("share", 0.44) == 0.03
    entries = [e for s in ("lic_rag", "worse_labels", "coral", "mtrag_un") for e in load_published(published_path(s), s).entries]
    kappa = [e for e in entries if re.search(r"kappa", f"{e.what} {e.ours.value if e.ours else ''}", re.I)
             or (e.ours is not None and "kappa" in str(e.ours.where.get("measure", "")))]
    assert {e.id for e in kappa} >= {"agreement.cohen_kappa_phi4_qwen14b", "agreement.binary_kappa.audit_qwen14b",
                                     "agreement.fleiss_small_judges", "agreement.kappa_small_vs_audit.min"}
    assert {e.scale for e in kappa} == {"kappa"}
    raw = next(e for e in entries if e.id == "agreement.raw_three_label.phi4_qwen14b")
    assert raw.scale == "share"


def test_a_correlation_has_its_own_scale_not_a_share():
    """A Pearson r is not a share (issue 45): the published maps give every correlation the scale
    "correlation" (|r| <= 1, a share's margin of 0.03), and no entry about a correlation says share."""
    assert default_margin("correlation", 0.94) == default_margin("share", 0.94) == 0.03
    corr = [e for s in ("lic_rag", "worse_labels", "coral", "mtrag_un") for e in load_published(published_path(s), s).entries
            if re.search(r"correlat|pearson|spearman", f"{e.what} {e.ours.value if e.ours else ''}", re.I)]
    assert {e.id for e in corr} >= {"judge_gap.r_history", "judge_gap.r_current"}
    assert {e.scale for e in corr} == {"correlation"}
    r = next(e for e in corr if e.id == "judge_gap.r_history")
    assert r.value == 0.94 and r.ours.value == "pearson_r"


# ---- a miniature run (issue 44): every row not comparable, for the miniature's reason ------------------


def test_a_miniature_run_compares_no_row_with_the_paper(tmp_path):
    """A miniature's numbers come from a cut of a few records and tiny stand-in models: a row that
    would be reproduced, one that would not, a statement, and a row already not comparable all say
    "not comparable", the miniature's reason first (other incomparabilities after it), our number
    and interval still shown, caveats kept; the page counts them all as not comparable."""
    from convrag.report.reproduction import MINIATURE, reproduction_page

    t9 = tmp_path / "t9.csv"
    pd.DataFrame({"dataset": ["all", "all"], "policy": ["history", "current"], "gap": [0.110, 0.05],
                  "ci_low": [0.099, 0.01], "ci_high": [0.134, 0.09]}).to_csv(t9, index=False)
    ours9 = {"target": "t9", "where": {"dataset": "all", "policy": "history"}, "value": "gap", "low": "ci_low",
             "high": "ci_high", "scale": 100}
    entries = [
        {**GOOD, "id": "inside"},
        {**GOOD, "id": "outside", "value": 15.0, "ci": [14.0, 16.0]},
        {**GOOD, "id": "substituted", "requires": {"models": ["gemma-4-31b-it"]}},
        {**GOOD, "id": "incomparable", "incomparable": "the paper counts both splits, the run one"},
        {"id": "positive", "source": "§5.2", "what": "both gaps positive", "kind": "statement", "scale": "points",
         "holds": {"all": "> 0"}, "ours": {**ours9, "where": {"dataset": "all", "policy": ["history", "current"]}}},
    ]
    path = _write(tmp_path, entries)
    tables = {"t9": str(t9)}
    run = {"models": ["qwen3-8b"]}
    full = reproduction_table("demo", path, tables, {"reproduction": run}).set_index("id")
    # the same rows outside a miniature: the verdict rules decide
    assert list(full["verdict"]) == [REPRODUCED, NOT_REPRODUCED, REPRODUCED, NOT_COMPARABLE, REPRODUCED]
    why = miniature_reason(load_configs([PAPER_CONFIGS["coral"], REPO_ROOT / "config" / "miniatures" / "coral.yaml"]))
    df = reproduction_table("demo", path, tables, {"reproduction": run, MINIATURE: why}).set_index("id")
    assert set(df["verdict"]) == {NOT_COMPARABLE}
    for i in ("inside", "outside", "substituted", "positive"):
        assert df.loc[i, "reason"] == why, i
    assert df.loc["incomparable", "reason"] == why + "; the paper counts both splits, the run one"
    assert df.loc["inside", "ours"] == pytest.approx(11.0)
    assert (df.loc["inside", "ours_ci_low"], df.loc["inside", "ours_ci_high"]) == pytest.approx((9.9, 13.4))
    assert df.loc["outside", "ours"] == pytest.approx(11.0)
    assert df.loc["substituted", "caveats"] == "substituted model: the paper's gemma-4-31b-it (this run: qwen3-8b)"
    page = reproduction_page(df.reset_index(), "caption")
    assert page.splitlines()[0] == ("5 published numbers: 0 reproduced, 0 not reproduced, 0 inconclusive, "
                                    "5 not comparable")
    assert page.count("miniature run (the paper config") == 1  # one note, shared by every row
    with pytest.raises(DataError, match=r"context\['miniature'\] of the demo reproduction target must be the reason"):
        reproduction_table("demo", path, tables, {"reproduction": run, MINIATURE: True})


@pytest.mark.parametrize("study", ["lic_rag", "mtrag_un", "coral", "worse_labels", "cross"])
def test_a_miniature_is_known_by_its_overlay(study):
    """The overlay's ``miniature`` block makes a run a miniature (so ``snakemake --configfile
    <paper> <overlay>`` is one too); the paper config alone is not, nor is a mirror alone."""
    paper = REPO_ROOT / "config" / "studies" / f"{study}.yaml"
    assert miniature_reason(load_configs([paper])) is None
    assert miniature_reason({**load_configs([paper]), "download_mirror": "http://127.0.0.1:9"}) is None
    cfg = load_configs([paper, REPO_ROOT / "config" / "miniatures" / f"{study}.yaml"])
    why = miniature_reason(cfg)
    assert why.startswith("miniature run (the paper config with its config/miniatures overlay): cut data")
    assert f"registry {cfg['models_registry']}" in why and "tiny stand-in models" in why
    if cfg["miniature"].get("api_model"):
        assert f"API roles answered by {cfg['miniature']['api_model']} on a loopback endpoint" in why
