"""worse_labels label-quality analyses (Figure 2, Tables 1 and 3, section 4.2) on frames built
and worked by hand: 2 domains, 4 dialogues, 8 turns, rungs r1 / r2, labellers j1, j2, the audit,
a panel p1-p3 and the world labeller; plus a 4-turn MTRAG-like replication slice."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from convrag.errors import DataError
from convrag.stats.agreement import fleiss_kappa, gwet_ac1, raw_agreement
from convrag.stats.detection import detector_report
from convrag.studies.worse_labels import label_quality as lq

BOOT = {"n_resamples": 200, "seed": 0, "unit": "turn"}
TURNS = [f"t{i}" for i in range(1, 9)]
# d1: dialogues A (t1, t2), B (t3, t4, t5); d2: C (t6, t7), D (t8)
DIALOGUE = dict(zip(TURNS, ["A", "A", "B", "B", "B", "C", "C", "D"]))
DOMAIN = dict(zip(TURNS, ["d1"] * 5 + ["d2"] * 3))

NO_GOLD = {"r1": [True] * 5 + [False] * 3, "r2": [True] * 2 + [False] * 6}
NDCG = {"r1": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], "r2": [0.5] * 5 + [0.9] * 3}
HAS_COPY = {"r1": [True, False, False, False, False, True, False, False], "r2": [False] * 8}
LAB = {
    ("j1", "r1"): ["no", "no", "no", "yes", "partial", "no", "yes", "yes"],
    ("j1", "r2"): ["no", "yes", "yes", "yes", "partial", "no", "yes", None],
    ("j2", "r1"): ["no", "no", "yes", "yes", "no", "no", "yes", "partial"],
    ("j2", "r2"): ["no", "no", "yes", "yes", "yes", "yes", "yes", "yes"],
    ("p1", "r1"): ["no", "no", "no", "yes", "partial", "no", "yes", "yes"],
    ("p2", "r1"): ["no", "no", "yes", "yes", "no", "no", "yes", "partial"],
    ("p3", "r1"): ["no", "yes", "no", "yes", "partial", "no", "yes", None],
    ("j1", "control"): ["yes", "no", "no", "no", "no", "partial", "no", "no"],
    ("j2", "control"): ["no"] * 8,
    ("j1", "gold"): ["yes", "yes", "no", "yes", "yes", "no", "yes", "yes"],
    ("j2", "gold"): ["yes"] * 7 + [None],
}
AUDIT = {("r1", t): x for t, x in zip(TURNS[:5], ["no", "no", "no", "yes", "yes"])}
AUDIT.update({("r2", "t1"): "no", ("r2", "t2"): "yes"})
SUPPORT = {("j1", "r1", "t4"): [1, 3], ("j1", "r2", "t2"): [1, 2]}
WORLD = {("r1", "t4"): "yes", ("r1", "t5"): "no"}


def _classes(rung, t, no_gold):
    if (rung, t) == ("r1", "t4"):
        return ["same_thread", "other", "near_duplicate", "other", "other"]
    if (rung, t) == ("r2", "t2"):
        return ["other_turn_gold", "other_chunk", "other", "other", "other"]
    return (["other"] if no_gold else ["gold"]) + ["other"] * 4


def _row(slice_, dom, dia, t, set_, no_gold, **kw):
    n_in = 0 if no_gold else 1
    return dict(slice=slice_, domain=dom, dialogue=dia, task_id=t, turn=int(t[1:]), set=set_,
                doc_ids=[f"{t}-{set_}-{k}" for k in range(5)], n_gold=1, n_gold_in=n_in,
                qrels_label="none" if no_gold else "all", no_gold=no_gold, has_copy=kw.get("has_copy", False),
                doc_classes=kw.get("doc_classes", ["other"] * 5), top1=kw.get("top1", np.nan),
                margin=np.nan, top1_z=np.nan, ndcg10=kw.get("ndcg10", np.nan))


def make_contexts():
    rows = []
    for i, t in enumerate(TURNS):
        for rung in ("r1", "r2"):
            ng = NO_GOLD[rung][i]
            rows.append(_row("recor", DOMAIN[t], DIALOGUE[t], t, rung, ng, has_copy=HAS_COPY[rung][i],
                             doc_classes=_classes(rung, t, ng), ndcg10=NDCG[rung][i], top1=1.0))
        rows.append(_row("recor", DOMAIN[t], DIALOGUE[t], t, "gold", False, doc_classes=["gold"]))
        rows.append(_row("recor", DOMAIN[t], DIALOGUE[t], t, "none", True, doc_classes=[]))
        rows.append(_row("recor", DOMAIN[t], DIALOGUE[t], t, "control", True))
    for i, u in enumerate(["u1", "u2", "u3", "u4"]):
        dia = "M1" if i < 2 else "M2"
        rows.append(_row("mtrag", "md", dia, u, "m_high", [True, False, False, False][i], ndcg10=0.6))
        rows.append(_row("mtrag", "md", dia, u, "m_low", [True, True, True, False][i], ndcg10=0.2))
    return pd.DataFrame(rows)


def make_labels():
    rows = []
    for (who, set_), labs in LAB.items():
        for t, x in zip(TURNS, labs):
            rows.append(dict(slice="recor", task_id=t, set=set_, labeller=who, label=x,
                             support=SUPPORT.get((who, set_, t), [])))
    for (set_, t), x in AUDIT.items():
        rows.append(dict(slice="recor", task_id=t, set=set_, labeller="audit", label=x, support=[]))
    for (set_, t), x in WORLD.items():
        rows.append(dict(slice="recor", task_id=t, set=set_, labeller="world", label=x, support=[]))
    for rung, labs in {"m_low": ["no", "no", "yes", "yes"], "m_high": ["yes", "no", "yes", "yes"]}.items():
        for u, x in zip(["u1", "u2", "u3", "u4"], labs):
            rows.append(dict(slice="mtrag", task_id=u, set=rung, labeller="j1", label=x, support=[]))
    return pd.DataFrame(rows)


def make_ctx(**kw):
    ctx = dict(ladder=["r1", "r2"], primary="j1", labellers=["j1", "j2", "panel"], panel_members=["p1", "p2", "p3"],
               audit=True, main_slice="recor", replication_slice="mtrag", boot=dict(BOOT))
    ctx.update(kw)
    return ctx


@pytest.fixture(scope="module")
def data():
    return make_contexts(), make_labels(), make_ctx()


def _one(df, **key):
    m = np.ones(len(df), dtype=bool)
    for k, v in key.items():
        m &= (df[k] == v).to_numpy()
    assert m.sum() == 1, (key, df)
    return df[m].iloc[0]


# ---- Figure 2a ---------------------------------------------------------------------------------

def test_figure2a_shares_ratio_and_macro_ndcg(data):
    out = lq.figure2a(*data)
    assert list(out.columns) == lq.FIGURE2A_COLUMNS
    r = _one(out, slice="recor", rung="r1", labeller="j1")
    # no gold: t1-t5 (5/8); insufficient ("no"): t1, t2, t3, t6 (4/8); ratio 1.25
    assert r.share_no_gold == pytest.approx(5 / 8) and r.share_insufficient == pytest.approx(4 / 8)
    assert r.ratio == pytest.approx(1.25) and r.share_partial == pytest.approx(1 / 8)
    # macro nDCG: d1 mean(.1..0.5) = .3, d2 mean(.6, .7, .8) = .7 -> .5 (the turn mean would be .45)
    assert r.ndcg10 == pytest.approx(0.5) and (r.n, r.n_unlabelled, r.n_contexts) == (8, 0, 8)
    assert r.n_insufficient == 4  # t1, t2, t3, t6 judged "no" (§4.1's none counts)
    # partial counted insufficient beside it (§4.1's second setting): t5 too -> 5/8, ratio (5/8) / (5/8) = 1
    assert r.ratio_partial_insufficient == pytest.approx(1.0)
    r2 = _one(out, slice="recor", rung="r2", labeller="j1")
    # t8 unparsable: 7 labelled, "no" t1, t6 (2 of 7); no gold t1, t2 of all 8 contexts (the qrels
    # label needs no judge): ratio (2/8) / (2/7)
    assert (r2.n, r2.n_unlabelled, r2.n_insufficient) == (7, 1, 2)
    assert r2.share_no_gold == pytest.approx(2 / 8) and r2.share_insufficient == pytest.approx(2 / 7)
    assert r2.ratio == pytest.approx(0.875)
    assert r2.ndcg10 == pytest.approx(0.7)
    # rung order follows the ladder; the audit's sample is the audited contexts only
    assert list(out[(out.slice == "recor") & (out.labeller == "j1")].rung) == ["r1", "r2"]
    assert _one(out, slice="recor", rung="r1", labeller="audit").n == 5
    # labellers: ctx order first, then the rest sorted ("panel" listed but absent: skipped)
    assert list(out[(out.slice == "recor") & (out.rung == "r1")].labeller) == ["j1", "j2", "audit", "p1", "p2", "p3",
                                                                               "world"]


# ---- Figure 2b ---------------------------------------------------------------------------------

def test_figure2b_precision_false_miss_youden(data):
    out = lq.figure2b(*data)
    assert list(out.columns) == lq.FIGURE2B_COLUMNS
    r = _one(out, slice="recor", rung="r1", labeller="j1")
    # no gold t1-t5: no, no, no, yes, partial. Binary metrics drop the partial t5: precision 3 / 4
    assert r.precision == pytest.approx(3 / 4) and (r.n_no_gold, r.n_no_gold_binary) == (5, 4)
    # yes / no contexts t1-t4, t6-t8: "no" t1 t2 t3 t6 (flagged t1-t3: recall 3/4); "yes" t4 t7 t8
    # (flagged t4: specificity 2/3)
    assert r.recall == pytest.approx(3 / 4) and r.specificity == pytest.approx(2 / 3)
    assert r.youden_j == pytest.approx(3 / 4 + 2 / 3 - 1) and (r.n_binary, r.n_partial) == (7, 1)
    # the false-miss share: "yes" of the five no-gold contexts; partial 1/5 beside it
    assert r.false_miss_share == pytest.approx(1 / 5) and r.partial_share_no_gold == pytest.approx(1 / 5)
    # the second setting: precision (no + partial) / no gold, false misses with partial (yes + partial)
    assert r.precision_partial_insufficient == pytest.approx(4 / 5)
    assert r.false_miss_share_with_partial == pytest.approx(2 / 5)
    assert r.precision_partial_sufficient == pytest.approx(3 / 5)
    assert (r.n, r.n_unlabelled, r.unit) == (8, 0, "turn")
    # intervals of the second setting: detector_report's with partial insufficient (same seed)
    g = data[0][(data[0].slice == "recor") & (data[0].set == "r1")]
    ref = detector_report(g["no_gold"].to_numpy(bool), LAB[("j1", "r1")], partial="insufficient",
                          n_resamples=BOOT["n_resamples"], seed=BOOT["seed"])
    assert (r.precision_partial_insufficient_ci_low, r.precision_partial_insufficient_ci_high) == pytest.approx(
        (ref["precision"]["ci_low"], ref["precision"]["ci_high"]))
    assert (r.false_miss_ci_low, r.false_miss_ci_high) == pytest.approx(
        (ref["false_miss_share"]["ci_low"], ref["false_miss_share"]["ci_high"]))
    # r2: no gold t1 (no), t2 (yes)
    assert _one(out, slice="recor", rung="r2", labeller="j1").precision == pytest.approx(1 / 2)


def test_figure2b_intervals_contain_estimates(data):
    out = lq.figure2b(*data)
    for m, lo, hi in [("precision", "precision_ci_low", "precision_ci_high"),
                      ("false_miss_share", "false_miss_ci_low", "false_miss_ci_high"),
                      ("youden_j", "youden_j_ci_low", "youden_j_ci_high")]:
        ok = out[[m, lo, hi]].dropna()
        assert len(ok) > 5
        assert (ok[lo] <= ok[m] + 1e-12).all() and (ok[m] <= ok[hi] + 1e-12).all(), ok


def _clustered():
    """10 dialogues x 6 turns, all without gold; a dialogue's turns share one label."""
    rows, labs = [], []
    for d in range(10):
        for k in range(6):
            t = f"c{d}_{k}"
            rows.append(_row("recor", "d1", f"D{d}", t, "r1", True, has_copy=d < 3))
            labs.append(dict(slice="recor", task_id=t, set="r1", labeller="j1", label="no" if d < 5 else "yes",
                             support=[]))
    return pd.DataFrame(rows), pd.DataFrame(labs)


def test_dialogue_bootstrap_is_wider_when_clusters_matter():
    c, lab = _clustered()
    turn = _one(lq.figure2b(c, lab, make_ctx()), rung="r1", labeller="j1")
    dia = _one(lq.figure2b(c, lab, make_ctx(boot={**BOOT, "unit": "dialogue"})), rung="r1", labeller="j1")
    assert turn.precision == dia.precision == pytest.approx(0.5) and dia.unit == "dialogue"
    assert (dia.precision_ci_high - dia.precision_ci_low) > 1.5 * (turn.precision_ci_high - turn.precision_ci_low)
    ct = _one(lq.copies(c, lab, make_ctx()), rung="r1")
    cd = _one(lq.copies(c, lab, make_ctx(boot={**BOOT, "unit": "dialogue"})), rung="r1")
    assert ct.share_copy == cd.share_copy == pytest.approx(0.3)
    assert (cd.ci_high - cd.ci_low) > 1.5 * (ct.ci_high - ct.ci_low)


# ---- Table 1 -----------------------------------------------------------------------------------

def test_table1_precision_change_kappa_control_unparsable(data):
    out = lq.table1(*data)
    assert list(out.columns) == lq.table1_columns(["r1", "r2"])
    r = _one(out, labeller="j1")
    # partial dropped: r1 no gold t1-t4 judged yes / no (3 no), r2 t1 no, t2 yes
    assert r.precision_r1 == pytest.approx(0.75) and r.precision_r2 == pytest.approx(0.5)
    assert (r.n_no_gold_r1, r.n_no_gold_r2) == (4, 2)
    assert r.precision_r1_ci_low <= 0.75 <= r.precision_r1_ci_high
    # paired over t1-t7 (t8 unparsable under r2), the partial t5 left out at each rung: 0.5 - 0.75
    assert (r.first_rung, r.last_rung, r.change_n) == ("r1", "r2", 7)
    assert r.change == pytest.approx(-0.25) and r.change_ci_low <= r.change <= r.change_ci_high
    # Youden over t1-t7 but t5: r1 recall 3/4 (t1-t3 of t1 t2 t3 t6), specificity 1/2 (t7 of t4 t7);
    # r2 recall 1/2 (t1 of t1 t6), specificity 3/4 (t3 t4 t7 of t2 t3 t4 t7): both 1/4
    assert r.youden_change == pytest.approx(0.0)
    # kappa with the audit over its 7 contexts (r1 t1-t5, r2 t1-t2)
    mine = LAB[("j1", "r1")][:5] + LAB[("j1", "r2")][:2]
    audit = [AUDIT[("r1", t)] for t in TURNS[:5]] + [AUDIT[("r2", "t1")], AUDIT[("r2", "t2")]]
    assert r.kappa_audit == pytest.approx(cohen_kappa_score(mine, audit, labels=["yes", "partial", "no"]))
    assert r.n_audit == 7
    # control: 1 yes of 8 (the partial does not count as yes), over every control context asked
    assert r.control_yes_share == pytest.approx(1 / 8) and r.n_control == 8 and r.n_control_yes == pytest.approx(1)
    assert r.control_yes_ci_low <= 1 / 8 <= r.control_yes_ci_high
    assert r.n_control_yes_ci_high == pytest.approx(8 * r.control_yes_ci_high)
    assert (r.n_unparsable, r.n_unparsable_max_set) == (1, 1)
    j2 = _one(out, labeller="j2")
    assert j2.control_yes_share == 0.0 and j2.n_unparsable == 1  # its gold t8
    a = _one(out, labeller="audit")
    assert math.isnan(a.kappa_audit)
    # the audit's change: its r2 sample (t1 no, t2 yes: 1/2) minus its r1 sample (t1-t3 no, t4 t5
    # yes, all without gold: 3/5), not paired by turn (the audit draws each rung's contexts apart)
    assert a.change == pytest.approx(0.5 - 0.6) and a.change_n == 7
    assert a.change_ci_low <= a.change <= a.change_ci_high
    no_audit = lq.table1(data[0], data[1], make_ctx(audit=False))
    assert "audit" not in set(no_audit.labeller) and no_audit.kappa_audit.isna().all()


# ---- copies, negative control ------------------------------------------------------------------

def test_copies_share(data):
    out = lq.copies(*data)
    assert list(out.columns) == lq.COPIES_COLUMNS
    r1 = _one(out, slice="recor", rung="r1")
    # of the 5 no-gold contexts, t1 holds a copy (t6's copy sits in a context with gold)
    assert r1.share_copy == pytest.approx(1 / 5) and (r1.n_copy, r1.n_no_gold, r1.n_contexts) == (1, 5, 8)
    assert r1.ci_low <= r1.share_copy <= r1.ci_high
    r2 = _one(out, slice="recor", rung="r2")
    assert r2.share_copy == 0.0
    # over the first rung's share: 1 for r1 itself, 0 / (1/5) for r2
    assert (r1.ratio_to_first, r2.ratio_to_first, r2.first_rung) == (1.0, 0.0, "r1")


def test_negative_control_shares_and_raw_correction(data):
    out = lq.negative_control(*data)
    assert list(out.columns) == lq.NEGATIVE_CONTROL_COLUMNS
    r = _one(out, slice="recor", labeller="j1", rung="r1")
    assert r.control_yes_share == pytest.approx(1 / 8) and r.control_partial_share == pytest.approx(1 / 8)
    assert r.control_no_share == pytest.approx(6 / 8) and r.n_control == 8
    # the false-miss share: "yes" of the five no-gold contexts of r1 (t4)
    assert r.false_miss_share == pytest.approx(0.2)
    assert r.corrected_false_miss_share == pytest.approx(0.2 - 0.125)  # raw difference
    assert r.corrected_false_miss_share_rescaled == pytest.approx((0.2 - 0.125) / 0.875)
    r2 = _one(out, slice="recor", labeller="j2", rung="r2")
    assert r2.control_yes_share == 0.0 and r2.corrected_false_miss_share == r2.false_miss_share == 0.0
    assert set(out.labeller) == {"j1", "j2"}  # only labellers with control labels


# ---- agreement ---------------------------------------------------------------------------------

def _pairs(a, b):
    """The two labellers' labels of the items both labelled: the rung and the gold contexts."""
    xa = LAB[(a, "r1")] + LAB[(a, "r2")] + LAB[(a, "gold")]
    xb = LAB[(b, "r1")] + LAB[(b, "r2")] + LAB[(b, "gold")]
    keep = [(x, y) for x, y in zip(xa, xb) if x is not None and y is not None]
    return [x for x, _ in keep], [y for _, y in keep]


def test_agreement_pairs_panel_and_gold(data):
    out = lq.agreement(*data)
    assert list(out.columns) == lq.AGREEMENT_COLUMNS
    a, b = _pairs("j1", "j2")
    # items: r1 (8), r2 (7: j1's t8 unparsable) and gold (7: j2's t8 unparsable)
    k = _one(out, slice="recor", measure="cohen_kappa", labeller_a="j1", labeller_b="j2")
    assert k.value == pytest.approx(cohen_kappa_score(a, b, labels=["yes", "partial", "no"])) and k.n == 22
    assert k.ci_low <= k.value <= k.ci_high
    # the binary yes / no decision: items either labeller calls partial are dropped
    bk = _one(out, slice="recor", measure="binary_kappa", labeller_a="j1", labeller_b="j2")
    yn = [(x, y) for x, y in zip(a, b) if "partial" not in (x, y)]
    assert bk.n == len(yn) == 19  # r1 t5, t8 and r2 t5 hold a partial
    assert bk.value == pytest.approx(cohen_kappa_score([x for x, _ in yn], [y for _, y in yn]))
    raw = _one(out, slice="recor", measure="raw_agreement", labeller_a="j1", labeller_b="j2")
    assert raw.value == pytest.approx(np.mean([x == y for x, y in zip(a, b)]))
    ka = _one(out, slice="recor", measure="cohen_kappa", labeller_a="j1", labeller_b="audit")
    assert ka.n == 7
    # panel: items r1 t1-t8 x p1-p3 (p3 misses t8)
    table = pd.DataFrame({p: LAB[(p, "r1")] for p in ("p1", "p2", "p3")}).astype(object)
    cats = ["yes", "partial", "no"]
    fk = _one(out, slice="recor", measure="fleiss_kappa")
    assert fk.value == pytest.approx(fleiss_kappa(table, cats)["value"]) and fk.n == 8
    assert fk.labeller_a == "panel_members" and fk.labeller_b == "p1+p2+p3"
    assert _one(out, slice="recor", measure="gwet_ac1").value == pytest.approx(gwet_ac1(table, cats)["value"])
    assert _one(out, slice="recor", measure="panel_raw_agreement").value == pytest.approx(
        raw_agreement(table, cats)["value"])
    g1 = _one(out, slice="recor", measure="gold_labelled_no", labeller_a="j1")
    g2 = _one(out, slice="recor", measure="gold_labelled_no", labeller_a="j2")
    assert (g1.value, g1.n, g2.value, g2.n) == (2, 8, 0, 7)


def test_small_judges_below_large_and_families_on_the_decline_by_hand():
    # rungs a, b; four no-gold turns each; precision of "no gold", partial dropped:
    #        a                          b
    # L1  no no no yes  -> 3/4      no yes yes yes      -> 1/4
    # L2  no no yes yes -> 1/2      no no yes partial   -> 2/3
    # S1  no yes yes yes -> 1/4     yes yes yes yes     -> 0     below both large judges at a and b
    # S2  no no no no   -> 1        no yes yes yes      -> 1/4   not below L1's 1/4 at b
    labs = {"L1": ("no no no yes", "no yes yes yes"), "L2": ("no no yes yes", "no no yes partial"),
            "S1": ("no yes yes yes", "yes yes yes yes"), "S2": ("no no no no", "no yes yes yes")}
    c = pd.DataFrame([_row("s", "d", f"D{i}", f"t{i}", r, True) for r in "ab" for i in range(4)])
    lab = pd.DataFrame([dict(slice="s", task_id=f"t{i}", set=r, labeller=who, label=x, support=[])
                        for who, (la, lb) in labs.items() for r, ls in zip("ab", (la, lb))
                        for i, x in enumerate(ls.split())])
    ctx = make_ctx(ladder=["a", "b"], labellers=["L1", "L2"], content_judges=["L1", "L2"], panel_members=["S1", "S2"],
                   families={"L1": "phi", "L2": "qwen", "S1": "phi", "S2": "smol"})
    out = lq.agreement(c, lab, ctx)
    b = _one(out, measure="small_judges_below_large")
    assert (b.value, b.n, b.labeller_b) == (1.0, 2, "L1+L2")
    # falling a -> b: L1, S1 (phi: both), S2 (smol); L2 rises (qwen): 2 of 3 families
    f = _one(out, measure="families_on_decline")
    assert (f.value, f.n, f.labeller_b) == (2.0, 3, "a->b")


# ---- evidence ----------------------------------------------------------------------------------

def test_evidence_class_shares_and_world(data):
    out = lq.evidence(*data)
    assert list(out.columns) == lq.EVIDENCE_COLUMNS
    r1 = _one(out, slice="recor", rung="r1")
    # false misses of j1 on r1 (no gold, judged yes): t4 only (t5 is partial: neither false nor true
    # miss). Its best evidence document is the first it names, position 1: same_thread
    assert r1.labeller == "j1" and r1.n_false_miss == 1
    assert r1.share_same_thread == 1.0 and r1.share_near_duplicate == r1.share_unstated == 0.0
    assert r1.share_tied == 1.0 and (r1.n_world, r1.share_world_sufficient) == (1, 1.0)  # world: t4 yes
    # the copies of gold in r1's labelled contexts: t4's document 3, which j1 names
    assert (r1.n_copy_docs, r1.n_copy_docs_named, r1.share_copy_docs_named) == (1, 1, 1.0)
    r2 = _one(out, slice="recor", rung="r2")
    # t2 (yes; support 1, 2): the first named is another turn's gold (one class per false miss)
    assert r2.n_false_miss == 1 and r2.share_other_turn_gold == 1.0 and r2.share_other_chunk == 0.0
    assert r2.share_unstated == 0.0 and r2.n_world == 0 and math.isnan(r2.share_world_sufficient)
    assert r2.n_copy_docs == 0 and math.isnan(r2.share_copy_docs_named)


def test_evidence_same_thread_share_in_the_stackexchange_domains_by_hand():
    # false misses of j1 (no gold, yes): law t1 (same thread), law t3 (no support), biology t4 (same
    # thread: a BRIGHT domain, not counted); politics t2 is partial, law t5 judged no: neither
    cls = ["same_thread", "other", "other", "other", "other"]
    c = pd.DataFrame([_row("recor", dom, f"D{i}", f"t{i}", "r1", True, doc_classes=cls)
                      for i, dom in enumerate(["law", "politics", "law", "biology", "law"], start=1)])
    lab = pd.DataFrame([dict(slice="recor", task_id=f"t{i}", set="r1", labeller="j1", label=x, support=sp)
                        for i, (x, sp) in enumerate([("yes", [1]), ("partial", [2]), ("yes", []), ("yes", [1]),
                                                     ("no", [])], start=1)])
    row = _one(lq.evidence(c, lab, make_ctx(ladder=["r1"])), slice="recor", rung="r1")
    assert row.n_false_miss == 3 and row.share_same_thread == pytest.approx(2 / 3)
    assert row.n_false_miss_stackexchange == 2 and row.share_same_thread_stackexchange == pytest.approx(1 / 2)
    # no false miss in a StackExchange domain: NaN
    none = _one(lq.evidence(c.assign(domain="biology"), lab, make_ctx(ladder=["r1"])), slice="recor", rung="r1")
    assert none.n_false_miss_stackexchange == 0 and math.isnan(none.share_same_thread_stackexchange)


def test_evidence_support_out_of_range_names_the_row(data):
    lab = data[1].copy()
    i = lab.index[(lab.labeller == "j1") & (lab.set == "r1") & (lab.task_id == "t4")][0]
    lab.at[i, "support"] = [9]
    with pytest.raises(DataError, match=r"task_id t4.*support position 9"):
        lq.evidence(data[0], lab, data[2])


# ---- Table 3 -----------------------------------------------------------------------------------

def test_table3_replication(data):
    out = lq.table3(*data)
    assert list(out.columns) == lq.TABLE3_COLUMNS
    # the replication slice has none of the ladder's rungs: its own, in nDCG order
    assert list(out.rung) == ["m_low", "m_high"] and set(out.slice) == {"mtrag"}
    lo, hi = _one(out, rung="m_low"), _one(out, rung="m_high")
    assert (lo.ndcg10, lo.share_no_gold, lo.share_content_no) == pytest.approx((0.2, 0.75, 0.5))
    assert lo.precision == pytest.approx(2 / 3) and lo.false_miss_share == pytest.approx(1 / 3)
    assert lo.precision_ci_low <= lo.precision <= lo.precision_ci_high
    assert (hi.ndcg10, hi.share_no_gold, hi.share_content_no) == pytest.approx((0.6, 0.25, 0.25))
    assert hi.precision == 0.0 and hi.false_miss_share == 1.0
    assert lq.table3(data[0], data[1], make_ctx(replication_slice=None)).empty
    # an explicit per-slice ladder wins over nDCG order
    rev = lq.table3(data[0], data[1], make_ctx(ladder={"recor": ["r1", "r2"], "mtrag": ["m_high", "m_low"]}))
    assert list(rev.rung) == ["m_high", "m_low"]


# ---- empty inputs, errors ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(lq.TARGETS))
def test_empty_inputs_give_empty_frames_with_columns(name, data):
    f = lq.TARGETS[name]
    out = f(data[0].iloc[0:0], data[1].iloc[0:0], data[2])
    assert out.empty
    expected = {"figure2a": lq.FIGURE2A_COLUMNS, "figure2b": lq.FIGURE2B_COLUMNS, "copies": lq.COPIES_COLUMNS,
                "negative_control": lq.NEGATIVE_CONTROL_COLUMNS, "agreement": lq.AGREEMENT_COLUMNS,
                "evidence": lq.EVIDENCE_COLUMNS, "table3": lq.TABLE3_COLUMNS,
                "table1": lq.table1_columns(["r1", "r2"])}[name]
    assert list(out.columns) == expected
    assert list(f(pd.DataFrame(), pd.DataFrame(), data[2]).columns) == expected


def test_missing_rung_is_skipped(data):
    c = data[0][data[0].set != "r2"]
    out = lq.figure2b(c, data[1], data[2])
    assert set(out[out.slice == "recor"].rung) == {"r1"}
    t1 = lq.table1(c, data[1], data[2])
    assert "precision_r2" not in t1.columns and t1.change.isna().all()


def test_missing_columns_are_named(data):
    with pytest.raises(DataError, match="no_gold"):
        lq.figure2b(data[0].drop(columns=["no_gold"]), data[1], data[2])
    with pytest.raises(DataError, match="support"):
        lq.evidence(data[0], data[1].drop(columns=["support"]), data[2])
    with pytest.raises(DataError, match="has_copy"):
        lq.copies(data[0].drop(columns=["has_copy"]), data[1], data[2])


def test_bad_label_and_duplicates_are_named(data):
    lab = data[1].copy()
    lab.loc[lab.index[0], "label"] = "maybe"
    with pytest.raises(DataError, match="'maybe'"):
        lq.figure2a(data[0], lab, data[2])
    dup = pd.concat([data[1], data[1].iloc[:1]], ignore_index=True)
    with pytest.raises(DataError, match="two rows"):
        lq.figure2a(data[0], dup, data[2])
    # labels are compared after strip().lower()
    up = data[1].copy()
    up["label"] = up["label"].map(lambda x: f" {x.upper()} " if isinstance(x, str) else x)
    pd.testing.assert_frame_equal(lq.figure2a(data[0], up, data[2]), lq.figure2a(*data))
