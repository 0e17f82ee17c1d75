"""lic_rag, round two (issue 42): the pools the paper's text describes, its statements as
entries with verdicts, its families, and the pooled rows a single-dataset run keeps.

Each hand-made frame's numbers are worked out in the comments; the published entries are the
real ones of resources/published/lic_rag.yaml, judged on small tables written here."""

import json

import numpy as np
import pandas as pd
import pytest

from convrag.config import load_config
from convrag.records import Conversation, Question, write_records
from convrag.report.reproduction import (INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, judge_entry, load_published,
                                         lookup, published_path)
from convrag.resources import REPO_ROOT
from convrag.studies import get_study
from convrag.studies.lic_rag import analyses as L

BOOT = {"n_resamples": 200, "seed": 0}
PAPER = REPO_ROOT / "config" / "studies" / "lic_rag.yaml"
MAIN = ["bm25", "dense", "raptor", "hipporag", "hipporag2", "tog2", "lightrag"]
TEN = ["llama-3.1-8b-instruct", "llama-3.3-70b-instruct", "qwen3-4b-instruct-2507", "qwen3-8b", "qwen3-14b",
       "qwen3.6-27b", "gemma-3-12b-it", "gemma-4-31b-it", "luna-5.6", "gpt-4o-mini"]


def _entries() -> dict:
    return {e.id: e for e in load_published(published_path("lic_rag"), "lic_rag").entries}


@pytest.fixture(scope="module")
def paper_run():
    """What the paper config's run uses (against each entry's ``requires``)."""
    return get_study("lic_rag").context(load_config(PAPER))["reproduction"]


def _cell(retriever, full, sharded, model="m", policy="history", qid="q1", **extra) -> list[dict]:
    return [dict(dataset="d", model=model, retriever=retriever, condition=c, policy=p, qid=qid, run=0, final_f1=f,
                 conv_id=f"{model}/{retriever}/{c}_{p}/{qid}", **extra)
            for c, p, f in (("FULL", "none", full), ("SHARDED", policy, sharded))]


# ---- pools ------------------------------------------------------------------------------------


def test_a_pool_with_and_without_pog_gives_different_gaps():
    """§5.2's gap pools the paper's main methods. One question: BM25 FULL .8 -> SHARDED .4 (gap
    .4), PoG .5 -> .4 (gap .1), closed book .3 -> .2. Pooled over every retriever that retrieves
    (PoG in): gap (.4 + .1) / 2 = .25, FULL .65, relative (.4 - .65) / .65; over the pool the
    config names (BM25): gap .4, relative -.5. PoG keeps its own row, gap .1."""
    s = pd.DataFrame(_cell("bm25", 0.8, 0.4) + _cell("pog", 0.5, 0.4)
                     + _cell("closed_book", 0.3, 0.2, policy="none"))
    with_pog = L.table2(s, 200, 0, closed_retrievers=["closed_book"])
    pool = {"retrievers": ["bm25"], "models": ["m"]}
    without = L.table2(s, 200, 0, closed_retrievers=["closed_book"], pool=pool)

    def row(t, model, ret):
        return t[(t.dataset == "all") & (t.model == model) & (t.retriever == ret) & (t.policy == "history")].iloc[0]

    assert row(with_pog, "all", "all").gap == pytest.approx(0.25)
    assert row(with_pog, "all", "all").rel_gap == pytest.approx((0.65 - 0.4) / 0.65)
    assert row(without, "all", "all").gap == pytest.approx(0.4) and row(without, "all", "all").rel_gap == 0.5
    assert row(without, "m", "all").gap == pytest.approx(0.4)  # per LLM over the pool too
    assert row(without, "all", "pog").gap == pytest.approx(0.1)  # PoG's own row
    # Figure 8: PoG is its own group, not "with retrieval"
    f8 = L.ceiling_and_floor(s, BOOT, {}, ["closed_book"], pool=pool)
    assert set(f8.retrieval) == {"closed book", "with retrieval", "pog"}
    # the pooled LLMs: a model outside the pool leaves the rows over all LLMs
    s2 = pd.concat([s, pd.DataFrame(_cell("bm25", 1.0, 0.0, model="m2"))], ignore_index=True)
    assert row(L.table2(s2, 200, 0, closed_retrievers=["closed_book"], pool=pool), "all", "all").gap == pytest.approx(0.4)
    both = {"retrievers": ["bm25"], "models": ["m", "m2"]}
    assert row(L.table2(s2, 200, 0, closed_retrievers=["closed_book"], pool=both), "all", "all").gap == pytest.approx(0.7)


def test_the_pools_of_table8_recall_and_categories_leave_pog_out():
    """Table 8 pooled over the pool and per retrieval method (PoG its own row); Recall@k's
    retriever "all" over the pool; the pooled response categories over the pool's turns."""
    runs = {"bm25": ([1.0, 0.0], [0.5, 0.5]), "pog": ([0.5, 0.5], [1.0, 0.0])}  # (FULL runs, SHARDED runs)
    rows = []
    for ret, (full, sh) in runs.items():
        for run, (f, x) in enumerate(zip(full, sh)):
            for cond, pol, v, rec in (("FULL", "none", f, 0.5), ("SHARDED", "history", x, 1.0)):
                rows.append(dict(dataset="d", model="m", retriever=ret, condition=cond, policy=pol, qid="q1", run=run,
                                 final_f1=v, final_cum_recall=rec if ret == "bm25" else 0.0,
                                 conv_id=f"{ret}/{cond}/{run}"))
    s = pd.DataFrame(rows)
    pool = {"retrievers": ["bm25"], "models": ["m"]}
    t8 = L.aptitude_unreliability(s, BOOT, {}, ["closed_book"], pool)
    pooled = t8[(t8.dataset == "all") & (t8.condition == "SHARDED")].set_index(["model", "retriever"])
    # unreliability (P90 - P10 of two runs [1, 0]) = .8: BM25 falls .8 -> 0, PoG rises 0 -> .8
    assert pooled.loc[("all", "all"), "unreliability_rise"] == pytest.approx(-0.8)
    assert pooled.loc[("all", "bm25"), "unreliability_rise"] == pytest.approx(-0.8)
    assert pooled.loc[("all", "pog"), "unreliability_rise"] == pytest.approx(0.8)
    rs = L.recall_summary(s, ["closed_book"], BOOT, pool).set_index(["dataset", "retriever", "condition"])
    assert rs.loc[("all", "all", "FULL"), "recall"] == pytest.approx(0.5)  # BM25's alone (PoG's 0 left out)
    # SHARDED minus FULL over the same units: 1 - .5; PoG's own row 0 - 0
    assert rs.loc[("all", "all", "SHARDED"), "vs_full"] == pytest.approx(0.5)
    assert rs.loc[("all", "pog", "SHARDED"), "vs_full"] == pytest.approx(0.0)
    turns = pd.DataFrame({"dataset": "d", "model": "m", "qid": "q1", "retriever": ["bm25", "pog"],
                          "condition": "SHARDED", "policy": "history", "category": ["answer_attempt", "hedge"]})
    rc = L.response_categories(turns, ["closed_book"], BOOT, pool).set_index("retriever")
    assert rc.loc["all", "answer_attempt"] == 1.0 and rc.loc["all", "hedge"] == 0.0


def test_the_paper_config_pools_its_main_methods_and_counts_four_families():
    """The paper config's pool: its seven main methods (PoG apart) and its ten LLMs; the default
    pool (no key) is every retriever that retrieves but PoG. Families as the paper counts them
    (four), from the registry: the largest of each family of known size, and the four smallest."""
    from convrag.schema import config_registry
    from convrag.studies.lic_rag.wiring import largest_per_family, model_sizes, pool

    paper = load_config(PAPER)
    assert pool(paper) == {"retrievers": MAIN, "models": TEN}
    reg = config_registry(paper)
    assert {reg[m].model_family() for m in TEN} == {"llama", "qwen", "gemma", "api"}
    # the API family (luna-5.6, gpt-4o-mini) has no size: no largest of it
    assert largest_per_family(paper) == {"llama": "llama-3.3-70b-instruct", "qwen": "qwen3.6-27b",
                                         "gemma": "gemma-4-31b-it"}
    sizes = model_sizes(paper)
    smallest = sorted((b, m) for m, b in sizes.items() if b is not None)[:4]
    assert [m for _, m in smallest] == ["qwen3-4b-instruct-2507", "llama-3.1-8b-instruct", "qwen3-8b", "gemma-3-12b-it"]
    default = load_config(REPO_ROOT / "config" / "config.yaml")
    assert pool(default) == {"retrievers": ["bm25", "dense", "hipporag2", "raptor"], "models": ["smollm2-135m"]}


def test_a_closed_book_retriever_in_the_pool_is_refused():
    from convrag.config import validate_config
    from convrag.errors import ConfigError
    from convrag.io import read_yaml

    raw = read_yaml(REPO_ROOT / "config" / "config.yaml")
    raw["lic_rag"]["analysis"] = {"pooled_retrievers": ["bm25", "closed_book"]}
    with pytest.raises(ConfigError, match="pooled_retrievers': closed_book is closed book"):
        validate_config(raw, source="c.yaml")
    raw["lic_rag"]["analysis"] = {"pooled_retrievers": ["bm25", "tog2"]}  # not in lic_rag.retrievers
    with pytest.raises(ConfigError, match="pooled_retrievers"):
        validate_config(raw, source="c.yaml")


# ---- "up to" and the statements ---------------------------------------------------------------


def test_up_to_21_percent_is_the_largest_of_table2s_settings(tmp_path):
    """'up to 21%' over a small Table 2: the eight settings' pooled rows (dataset, model = all)
    under each policy, drops .05 ... .19; a per-cell row (a single dataset and LLM) dropping .60
    and PoG's pooled row dropping .30 are not among them. The largest: .19."""
    rows = [{"dataset": "all", "model": "all", "retriever": r, "policy": p, "rel_gap": 0.05 + 0.01 * i}
            for i, (r, p) in enumerate((r, p) for r in MAIN for p in ("history", "current"))]
    rows += [{"dataset": "all", "model": "all", "retriever": "closed_book", "policy": "none", "rel_gap": 0.17},
             {"dataset": "all", "model": "all", "retriever": "pog", "policy": "current", "rel_gap": 0.30},
             {"dataset": "hotpotqa", "model": "qwen3-8b", "retriever": "bm25", "policy": "current", "rel_gap": 0.60}]
    path = tmp_path / "table2_full_vs_sharded.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    e = _entries()["max_relative_drop"]
    got, missing = lookup(e.ours, {"table2_full_vs_sharded": str(path)})
    assert missing is None and got["ours"] == pytest.approx(0.05 + 0.01 * 13)  # lightrag, current: the 14th


def test_the_four_smallest_over_a_small_figure9(tmp_path, paper_run):
    """§B.4's four smallest LLMs by the registry's sizes (size_rank 1-4): declines .17, .19, .18,
    .175; rank 5 (.04) and an API model of undisclosed size (blank rank, .30) are not among them:
    min 17, max 19 points; their retention .74-.78 holds 'about three quarters' (0.70-0.80)."""
    rows = [{"model": m, "policy": "history", "gap_covered": g, "retention": r, "size_rank": k}
            for m, g, r, k in (("a", 0.17, 0.76, 1), ("b", 0.19, 0.74, 2), ("c", 0.18, 0.75, 3), ("d", 0.175, 0.78, 4),
                               ("e", 0.04, 0.95, 5), ("api", 0.30, 0.6, None))]
    path = tmp_path / "figure9_coverage_decline_by_llm.csv"
    pd.DataFrame(rows).to_csv(path, index=False)  # size_rank reads back as floats (1.0): matched as numbers
    tables = {"figure9_coverage_decline_by_llm": str(path)}
    entries = _entries()
    assert lookup(entries["complete_coverage_by_llm.four_smallest.min"].ours, tables)[0]["ours"] == pytest.approx(17)
    assert lookup(entries["complete_coverage_by_llm.four_smallest.max"].ours, tables)[0]["ours"] == pytest.approx(19)
    j = judge_entry(entries["complete_coverage_by_llm.four_smallest.retention"], tables, paper_run, {})
    assert j["verdict"] == REPRODUCED and "holds for all 4 rows" in j["reason"]
    assert "not necessarily the paper's" in " ".join(j["caveats"])


def _table2_frame(gaps: dict) -> pd.DataFrame:
    """Pooled Table 2 rows: (retriever, policy) -> (gap, ci_low, ci_high), F1 0-1."""
    return pd.DataFrame([{"dataset": "all", "model": "all", "retriever": r, "policy": p, "gap": g, "gap_ci_low": lo,
                          "gap_ci_high": hi, "f1_sharded": 0.3 + g} for (r, p), (g, lo, hi) in gaps.items()])


def test_a_statement_entry_true_false_and_undecided(tmp_path, paper_run):
    """§5.2: every retrieval method has a positive mean gap under both policies. Fourteen rows
    with intervals above 0: reproduced; one interval wholly below 0 (dense, CURRENT): not
    reproduced, naming it; one straddling 0: inconclusive. Own prompt wording stays a caveat."""
    e = _entries()["retrieval_gap.every_method_positive"]
    good = {(r, p): (0.05, 0.02, 0.08) for r in MAIN for p in ("history", "current")}
    path = tmp_path / "table2_full_vs_sharded.csv"

    def judge(gaps):
        _table2_frame(gaps).to_csv(path, index=False)
        return judge_entry(e, {"table2_full_vs_sharded": str(path)}, paper_run, {})

    j = judge(good)
    assert j["verdict"] == REPRODUCED and "holds for all 14 rows" in j["reason"]
    assert "own prompt wording" in j["caveats"]
    j = judge({**good, ("dense", "current"): (-0.04, -0.06, -0.01)})
    assert j["verdict"] == NOT_REPRODUCED and "fails for dense/current" in j["reason"]
    assert judge({**good, ("dense", "current"): (0.01, -0.02, 0.04)})["verdict"] == INCONCLUSIVE


def test_a_rank_statement_pog_second_to_last(tmp_path, paper_run):
    """§B.2: PoG ranks second to last in SHARDED F1 under HISTORY. SHARDED F1 = .3 + gap: BM25
    lowest (gap 0), PoG next (.01): reproduced; PoG lowest: not reproduced."""
    e = _entries()["pog.second_to_last_sharded_history"]
    gaps = {(r, "history"): (0.02 + 0.01 * i, 0.0, 0.1) for i, r in enumerate(MAIN)}
    gaps[("bm25", "history")] = (0.0, 0.0, 0.1)
    path = tmp_path / "table2_full_vs_sharded.csv"
    for pog, want in ((0.01, REPRODUCED), (-0.05, NOT_REPRODUCED)):
        _table2_frame({**gaps, ("pog", "history"): (pog, 0.0, 0.1)}).to_csv(path, index=False)
        j = judge_entry(e, {"table2_full_vs_sharded": str(path)}, paper_run, {})
        assert j["verdict"] == want, j
    assert "it is 1 of 8" in j["reason"]


# ---- the new columns the statements read --------------------------------------------------------


def test_history_gain_reversals_and_significant_datasets():
    """HISTORY minus CURRENT SHARDED F1 (§5.2): BM25 .4 vs .6 -> -.2. A reversal (§B.5): a
    configuration whose F1 gap is a significant decline and whose judge gap a significant
    improvement: q1, q2 F1 1 -> 0 (gap 1), judge 0 -> 1 (gap -1) under HISTORY; CURRENT none."""
    rows = []
    for q in ("q1", "q2"):
        rows += [dict(dataset="d", model="m", retriever="bm25", condition="FULL", policy="none", qid=q, run=0,
                      final_f1=1.0, judge_correct=0.0),
                 dict(dataset="d", model="m", retriever="bm25", condition="SHARDED", policy="history", qid=q, run=0,
                      final_f1=0.4 if q == "q1" else 0.0, judge_correct=1.0),
                 dict(dataset="d", model="m", retriever="bm25", condition="SHARDED", policy="current", qid=q, run=0,
                      final_f1=0.6 if q == "q1" else 0.2, judge_correct=0.0)]
    s = pd.DataFrame(rows)
    t2 = L.table2(s, 200, 0, closed_retrievers=[])
    h = t2[(t2.dataset == "all") & (t2.retriever == "bm25") & (t2.policy == "history")].iloc[0]
    assert h.history_gain == pytest.approx(-0.2) and h.history_gain_ci_high == pytest.approx(-0.2)
    summary, pairs = L.judge_gap_correlation(s, BOOT)
    by = summary.set_index("policy")
    # HISTORY: F1 gaps .6 and 1 (interval [.6, 1] > 0), judge gaps -1, -1: reversed; CURRENT: judge gap 0
    assert by.loc["history", "reversals"] == 1 and by.loc["current", "reversals"] == 0 and by.loc["all", "reversals"] == 1
    assert pairs.set_index("policy").loc["history", "f1_gap_ci_low"] == pytest.approx(0.6)
    # Table 9's count of datasets with a significant decline, on the rows over all datasets
    t9 = pd.DataFrame([dict(dataset=d, model="m", retriever="bm25", condition=c, policy=p, qid=q, run=0,
                            best_f1=f, final_f1=f, final_cum_recall=1.0)
                       for d, drop in (("d1", 0.5), ("d2", 0.0)) for q in ("q1", "q2")
                       for c, p, f in (("FULL", "none", 1.0), ("SHARDED", "history", 1.0 - drop))])
    out = L.complete_coverage_by_dataset(t9, BOOT).set_index("dataset")
    assert out.loc["d1", "significant"] and not out.loc["d2", "significant"]
    assert out.loc["all", "significant_datasets"] == 1 and np.isnan(out.loc["d1", "significant_datasets"])


def test_figure9_retention_and_size_rank():
    """Per LLM under complete coverage: FULL 1 -> SHARDED .75 keeps .75 (a), 1 -> .95 keeps .95
    (b); sizes a 8B, b 4B, c undisclosed: ranks b 1, a 2, c blank; 'nearly fivefold' divides the
    largest decline by the smallest: .25 / .05 = 5."""
    rows = []
    for m, sh in (("a", 0.75), ("b", 0.95), ("c", 0.5)):
        rows += [dict(dataset="d", model=m, retriever="bm25", condition=c, policy=p, qid="q1", run=0, final_f1=f,
                      best_f1=f, final_cum_recall=1.0) for c, p, f in (("FULL", "none", 1.0), ("SHARDED", "history", sh))]
    f9 = L.coverage_decline_by_model(pd.DataFrame(rows), BOOT, sizes={"a": 8.0, "b": 4.0, "c": None}).set_index("model")
    assert f9.loc["a", "retention"] == pytest.approx(0.75) and f9.loc["b", "retention"] == pytest.approx(0.95)
    assert f9.loc["b", "size_rank"] == 1 and f9.loc["a", "size_rank"] == 2 and pd.isna(f9.loc["c", "size_rank"])
    assert f9.loc["a", "gap_covered"] / f9.loc["b", "gap_covered"] == pytest.approx(5.0)


def test_simulated_wording_counts_forms_and_openings(tmp_path):
    """§A.2 over a question's first N SHARDED conversations: three conversations send shard 2 as
    'Where was X born?', 'where was x born' (the same wording once normalised) and 'Birthplace of
    X?', so 2 forms; shard 3 once; the opening (shard 1) is the same in all. With N = 2 only the
    first two (by conversation id) count: 1 form."""
    from convrag.studies.lic_rag.score import score_conversations

    q = Question(qid="q1", dataset="d", question="Who?", answers=["A"], supporting_doc_ids=["d/1"], hops=2)
    convs = []
    for i, (two, three) in enumerate((("Where was X born?", "It is in Y."), ("where was x born", None),
                                      ("Birthplace of X?", None))):
        turns = [{"role": "user", "text": "I want to know who.", "shard_id": 1},
                 {"role": "assistant", "text": "?", "answer": None, "answered": False},
                 {"role": "user", "text": two, "shard_id": 2},
                 {"role": "assistant", "text": "?", "answer": None, "answered": False}]
        if three:
            turns += [{"role": "user", "text": three, "shard_id": 3},
                      {"role": "assistant", "text": "Answer: A", "answer": "A", "answered": True}]
        convs.append(Conversation(conv_id=f"c{i}", study="lic_rag", qid="q1", dataset="d", condition="SHARDED",
                                  policy="history", retriever="bm25", model="m", run=i, turns=turns))
    write_records(tmp_path / "q.jsonl", [q])
    write_records(tmp_path / "c.jsonl", convs)
    scores, _ = score_conversations([str(tmp_path / "c.jsonl")], [str(tmp_path / "q.jsonl")], recall_k=5)
    assert json.loads(scores.shard_forms[0]).keys() == {"1", "2", "3"} and scores.opening.nunique() == 1
    w = L.simulated_wording(scores, BOOT, simulations=15).set_index("qid")
    assert w.loc["q1", "simulations"] == 3 and w.loc["q1", "max_distinct_forms"] == 2
    assert w.loc["q1", "most_varied_shard"] == "2" and w.loc["q1", "distinct_openings"] == 1
    assert w.loc["all", "opening_identical"] == 1.0 and w.loc["all", "distinct_openings"] == 1
    assert L.simulated_wording(scores, BOOT, simulations=2).set_index("qid").loc["q1", "max_distinct_forms"] == 1


# ---- a default-shaped run keeps every pooled row the published map selects -------------------------


def test_a_single_dataset_run_keeps_every_pooled_row_the_published_map_selects(tmp_path):
    """The embedded default (config/config.yaml: one dataset, miniworld) built from score tables
    of its shape: every entry's row selector, less the names the default grid does not have (the
    paper's datasets, LLMs and retrievers), still selects a row, so no entry is left blank because
    a target dropped its rows over all datasets (``dataset: all``), all LLMs or all retrievers."""
    from convrag.report.targets import build_target

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    study = get_study("lic_rag")
    lic = cfg["lic_rag"]
    assert lic["datasets"] == ["miniworld"]
    inputs = study.rehearsal_inputs(cfg, tmp_path / "inputs", questions=3, runs=2, seed=0)
    ctx = {**study.context(cfg), "boot": {"n_resamples": 20, "seed": 0}}
    pub = load_published(published_path("lic_rag"), "lic_rag")
    tables = {}
    for name in pub.targets():
        t = study.targets()[name]
        if not set(t.inputs) <= set(inputs):
            assert name == "shard_wording"  # built only with sharding.variability on (off in the default)
            continue
        stem = str(tmp_path / name)
        build_target(study, name, {k: inputs[k] for k in t.inputs}, ctx, stem)
        tables[name] = pd.read_csv(stem + ".csv")
    grid = {"dataset": set(lic["datasets"]), "model": set(lic["models"]), "retriever": set(lic["retrievers"])}
    pooled_markers = {"all", "largest_per_family"}
    checked = pooled = 0
    for e in pub.entries:
        if e.ours is None or e.ours.target not in tables:
            continue
        df = tables[e.ours.target]
        mask = pd.Series(True, index=df.index)
        for col, val in e.ours.where.items():
            vals = val if isinstance(val, list) else [val]
            if col in grid:  # the paper's names this grid does not have
                vals = [v for v in vals if v in grid[col] or v in pooled_markers]
                if not vals:
                    continue
            mask &= df[col].astype(str).isin([str(v) for v in vals])
        assert mask.any(), f"{e.id}: no row of {e.ours.target} has {e.ours.where} (less the paper's names)"
        checked += 1
        pooled += any(v in pooled_markers for v in e.ours.where.values() if not isinstance(v, list))
    assert checked == sum(1 for e in pub.entries if e.ours is not None and e.ours.target != "shard_wording")
    assert pooled >= 60  # the entries that read a row over all datasets, LLMs or retrievers
