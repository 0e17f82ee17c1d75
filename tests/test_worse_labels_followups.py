"""Hand-computed checks of worse_labels' followups: every ladder step, dialogue-tied false misses,
false misses by origin, MTRAG's annotator feedback and the 258 enumerated comparisons."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convrag.studies.worse_labels import followups as F

BOOT = {"n_resamples": 200, "seed": 0, "unit": "turn"}
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mtrag"


def _ctx(ladder, **kw):
    return {"ladder": ladder, "primary": "phi", "labellers": ["phi"], "boot": BOOT, "readers": kw.pop("readers", None),
            **kw}


def _c(rows):
    cols = ["slice", "task_id", "set", "no_gold", "dialogue", "domain", "doc_ids", "doc_classes"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def _l(rows):
    return pd.DataFrame(rows, columns=["slice", "task_id", "set", "labeller", "label", "support"])


def test_ladder_steps_every_pair_by_hand():
    # rung a: 4 no-gold turns, 3 judged no -> precision 3/4; b: 2 no-gold, 1 no -> 1/2; c: 2 no-gold, 0 no -> 0
    ng = {"a": [1, 1, 1, 1], "b": [1, 1, 0, 0], "c": [1, 0, 1, 0]}
    lab = {"a": ["no", "no", "no", "yes"], "b": ["no", "yes", "yes", "yes"], "c": ["yes", "yes", "partial", "yes"]}
    c = _c([("s", f"t{i}", r, bool(ng[r][i]), f"d{i}", "x", [], []) for r in "abc" for i in range(4)])
    lb = _l([("s", f"t{i}", r, "phi", lab[r][i], []) for r in "abc" for i in range(4)])
    out = F.ladder_steps(c, lb, _ctx({"s": ["a", "b", "c"]}))
    p = out[out["metric"] == "precision"].set_index(["first", "second"])
    assert list(p.index) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert p.loc[("a", "b"), "diff"] == pytest.approx(0.5 - 0.75)
    assert p.loc[("a", "c"), "diff"] == pytest.approx(0.0 - 0.75)
    assert p.loc[("b", "c"), "diff"] == pytest.approx(0.0 - 0.5)
    assert p["consecutive"].tolist() == [True, False, True]
    assert (p["n"] == 4).all()
    assert p.loc[("a", "c"), "ci_low"] <= -0.75 <= p.loc[("a", "c"), "ci_high"]
    # Youden's J of a: recall 3/4 (insufficient among no-gold); no gold-holding turn -> specificity NaN
    assert set(out["metric"]) == {"precision", "youden_j"}


def test_dialogue_tied_shares_and_discounted_precision_by_hand():
    cls = ["other_turn_gold", "other", "same_thread"]
    rows = [("s", "t0", "r", True, "d0", "x", ["u", "v", "w"], cls),    # judged no: a true miss
            ("s", "t1", "r", True, "d1", "x", ["u", "v", "w"], cls),    # yes, support 1: other-turn gold (tied)
            ("s", "t2", "r", True, "d2", "x", ["u", "v", "w"], cls),    # yes, support 2: other (not tied)
            ("s", "t3", "r", True, "d3", "x", ["u", "v", "w"], cls),    # partial, no support (not tied)
            ("s", "t4", "r", True, "d4", "x", ["u", "v", "w"], cls),    # yes, support 3: same thread (tied)
            ("s", "t5", "r", False, "d5", "x", ["g", "v", "w"], ["gold", "other", "other"])]
    lab = _l([("s", "t0", "r", "phi", "no", []), ("s", "t1", "r", "phi", "yes", [1]),
              ("s", "t2", "r", "phi", "yes", [2]), ("s", "t3", "r", "phi", "partial", []),
              ("s", "t4", "r", "phi", "yes", [3]), ("s", "t5", "r", "phi", "yes", [1])])
    out = F.dialogue_tied(_c(rows), lab, _ctx({"s": ["r"]}, strong_rungs={"s": ["r"]})).set_index("rung")
    r = out.loc["r"]
    assert (r["n_no_gold"], r["n_insufficient"], r["n_false_miss"], r["n_tied"]) == (5, 1, 4, 2)
    assert r["share_tied"] == pytest.approx(2 / 4)
    assert r["precision"] == pytest.approx(1 / 5)
    assert r["precision_discounted"] == pytest.approx(1 / (5 - 2))
    assert r["precision_tied_insufficient"] == pytest.approx(3 / 5)
    assert out.loc["strong", "n_tied"] == 2 and out.loc["strong", "rungs"] == "r"


def test_false_miss_origin_with_feedback_by_hand():
    cls = ["other_turn_gold", "other_chunk", "other", "other"]
    docs = ["a", "b", "c", "e"]
    rows = [("m", f"t{i}", "dense", True, "conv1", "x", docs, cls) for i in range(6)]
    lab = _l([("m", "t0", "dense", "phi", "yes", [1, 3]),   # other-turn gold first
              ("m", "t1", "dense", "phi", "yes", [2]),      # other chunk
              ("m", "t2", "dense", "phi", "yes", [3]),      # c: rejected by the annotators
              ("m", "t3", "dense", "phi", "partial", [4]),  # e: never shown
              ("m", "t4", "dense", "phi", "yes", []),       # unstated
              ("m", "t5", "dense", "phi", "no", [])])       # a true miss: not counted
    fb = pd.DataFrame([("conv1", 1, "conv1<::>1", "c", "rejected", "x"), ("conv1", 2, "conv1<::>2", "a", "relevant", "x")],
                      columns=F.HUMAN_COLUMNS)
    out = F.false_miss_origin(_c(rows), lab, _ctx({"m": ["dense"]}), fb).iloc[0]
    assert out["n_false_miss"] == 5
    assert (out["n_other_turn_gold"], out["n_other_chunk"], out["n_rejected"], out["n_never_seen"],
            out["n_unstated"], out["n_shown"]) == (1, 1, 1, 1, 1, 0)
    assert out["n_rejected_only"] == 1 and out["share_never_seen"] == pytest.approx(1 / 5)
    no_fb = F.false_miss_origin(_c(rows), lab, _ctx({"m": ["dense"]})).iloc[0]
    assert not no_fb["has_feedback"] and np.isnan(no_fb["n_never_seen"]) and no_fb["n_other"] == 2


@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/mtrag is absent (a fresh clone)")
def test_human_feedback_reads_mtrag_annotations():
    fb = F.human_feedback(str(SHARED / "conversations" / "conversations.sample.json"),
                          index_to_id_tsv=str(SHARED / "conversations" / "conversation_index_to_id.tsv"))
    raw = json.loads((SHARED / "conversations" / "conversations.sample.json").read_text())
    conv = raw[0]
    agent = next(m for m in conv["messages"] if m["speaker"] == "agent")
    first = agent["contexts"][0]
    who = conv["editor"] if conv["editor"] in first["feedback"]["relevant"] else conv["author"]
    want = "relevant" if first["feedback"]["relevant"][who]["value"] == "yes" else "rejected"
    assert fb.iloc[0]["doc_id"] == first["document_id"] and fb.iloc[0]["judgment"] == want
    assert fb.iloc[0]["turn"] == 1 and fb.iloc[0]["task_id"].endswith("<::>1")
    n_shown = sum(len(m.get("contexts") or []) for c in raw for m in c["messages"] if m["speaker"] == "agent")
    assert len(fb) == n_shown and set(fb["judgment"]) <= {"relevant", "rejected", "unjudged"}
    assert {"relevant", "rejected"} <= set(fb["judgment"])


def test_mtrag_human_yes_shares_by_hand():
    fb = pd.DataFrame([("c1", 1, "c1<::>1", d, j, "x") for d, j in
                       [("g1", "relevant"), ("g2", "relevant"), ("g3", "relevant"), ("r1", "rejected"),
                        ("r2", "rejected"), ("r3", "rejected"), ("r4", "rejected")]], columns=F.HUMAN_COLUMNS)
    lab = pd.DataFrame([("m", f"c1<::>1|{d}", "human", "phi", x) for d, x in
                        [("g1", "yes"), ("g2", "yes"), ("g3", "partial"), ("r1", "no"), ("r2", "no"), ("r3", "yes"),
                         ("r4", None)]], columns=["slice", "task_id", "set", "labeller", "label"])
    out = F.mtrag_human(fb, lab, _ctx({"m": []})).set_index("judgment")
    assert out.loc["relevant", "yes_share"] == pytest.approx(2 / 3) and out.loc["relevant", "n"] == 3
    assert out.loc["rejected", "yes_share"] == pytest.approx(1 / 3) and out.loc["rejected", "n_unlabelled"] == 1
    assert out.loc["rejected", "no_share"] == pytest.approx(2 / 3)


def _grid(rng, slice_, rungs, readers, n_turns=12):
    c, lab, rd = [], [], []
    for t in range(n_turns):
        for r in [*rungs, "gold"]:
            ng = r != "gold" and bool(rng.random() < 0.5)
            c.append(dict(slice=slice_, task_id=f"t{t}", set=r, dialogue=f"d{t % 4}", no_gold=ng,
                          top1_z=float(rng.normal())))
            lab.append(dict(slice=slice_, task_id=f"t{t}", set=r, labeller="phi",
                            label=rng.choice(["yes", "partial", "no"])))
            for q in readers:
                p = float(rng.random())
                rd.append(dict(slice=slice_, task_id=f"t{t}", set=r, reader=q, p_answerable=p,
                               status="ANSWERABLE" if p > 0.4 else "UNANSWERABLE"))
    return pd.DataFrame(c), pd.DataFrame(lab), pd.DataFrame(rd)


def test_changed_all_counts_258_at_the_paper_shape():
    rng = np.random.default_rng(1)
    readers = ["q1", "q2", "q3"]
    recor, mtrag = ["bm25_turn", "bm25_hist", "fusion", "dense", "hybrid"], ["qs", "last", "rw", "dense", "hybrid"]
    parts = [_grid(rng, "recor", recor, readers), _grid(rng, "mtrag", mtrag, readers)]
    c, lab, rd = (pd.concat([p[i] for p in parts], ignore_index=True) for i in range(3))
    ctx = _ctx({"recor": recor, "mtrag": mtrag}, readers=readers,
               compared_rungs={"recor": ["bm25_turn", "bm25_hist", "fusion", "hybrid"]},
               boot={"n_resamples": 20, "seed": 0, "unit": "turn"})
    out = F.changed_all(c, lab, rd, ctx)
    assert len(out) == 258
    assert out.groupby("slice").size().to_dict() == {"recor": 108, "mtrag": 150}
    assert "dense" not in set(out.loc[out["slice"] == "recor", "rung"].dropna())
    # one cell by hand: qrels AUROC of q1's p on recor/bm25_turn minus 1/2, over the contexts phi labels
    v = c[(c.slice == "recor") & (c.set == "bm25_turn")].merge(rd[(rd.reader == "q1")], on=["slice", "task_id", "set"])
    from sklearn.metrics import roc_auc_score

    want = roc_auc_score((~v["no_gold"]).astype(int), v["p_answerable"]) - 0.5
    row = out[(out.family == "auroc_chance") & (out.slice == "recor") & (out.rung == "bm25_turn") & (out.reader == "q1")]
    assert row["est_base"].iloc[0] == pytest.approx(want)
    # refusal_gap by hand under qrels: refusal on no-gold minus on gold-holding contexts
    ref = (v["status"] == "UNANSWERABLE").astype(float)
    want = ref[v["no_gold"]].mean() - ref[~v["no_gold"]].mean()
    row = out[(out.family == "refusal_gap") & (out.slice == "recor") & (out.rung == "bm25_turn") & (out.reader == "q1")]
    assert row["est_base"].iloc[0] == pytest.approx(want)
