"""PPI (judge-corrected) means: hand-computed examples, coverage on simulated data, paired differences, errors."""

import math

import numpy as np
import pandas as pd
import pytest

from convrag.errors import ConfigError, DataError
from convrag.stats.ppi import TABLE_COLUMNS, PPIResult, ppi_mean, ppi_mean_difference, ppi_table

Z95 = 1.959963984540054  # scipy.stats.norm.ppf(0.975)

# Hand example: 12 judged items, the first 4 labelled.
F_LAB = [3, 4, 2, 5]
F_UNLAB = [4, 5, 3, 5, 4, 4, 5, 4]
F_ALL = F_LAB + F_UNLAB  # sum 14 + 34 = 48, N = 12 -> judge mean 4
Y_LAB = [2, 4, 1, 5]


def test_hand_example_plain_ppi():
    # n = 4, N = 12, lam = 1.
    # residual Y - f = [-1, 0, -1, 0]: mean -0.5, s^2 = 4 * 0.25 / 3 = 1/3
    # Y = [2, 4, 1, 5]: mean 3, s^2 = (1 + 1 + 4 + 4) / 3 = 10/3
    # estimate = mean_N(f) + mean_n(Y - f) = 4 - 0.5 = 3.5
    # se^2 = s^2(Y)/N + (1/n - 1/N) s^2(Y - f) = (10/3)/12 + (1/4 - 1/12)(1/3) = 10/36 + 2/36 = 1/3
    # interval 3.5 -+ 1.959964 * 0.577350 = [2.368414, 4.631586]
    # human only: 3 -+ 1.959964 * sqrt((10/3)/4) = 3 -+ 1.789194 = [1.210806, 4.789194]
    # judge only: f_all deviations^2 sum to 10, s^2 = 10/11, se = sqrt(10/132) = 0.275241
    r = ppi_mean(F_ALL, F_LAB, Y_LAB)
    assert isinstance(r, PPIResult)
    assert r.estimate == pytest.approx(3.5)
    assert r.se == pytest.approx(math.sqrt(1 / 3))
    assert (r.low, r.high) == pytest.approx((2.368414, 4.631586), abs=1e-6)
    assert (r.n_labelled, r.n_all, r.lam) == (4, 12, 1.0)
    assert (r.judge_mean, r.human_mean) == pytest.approx((4.0, 3.0))
    assert (r.human_low, r.human_high) == pytest.approx((1.210806, 4.789194), abs=1e-6)
    assert (r.judge_low, r.judge_high) == pytest.approx((4 - Z95 * 0.275241, 4 + Z95 * 0.275241), abs=1e-6)
    with pytest.raises(AttributeError):
        r.estimate = 0.0  # frozen


def test_hand_example_tuned_ppi():
    # Same judge scores, humans Y = [3, 3, 2, 4] (mean 3, s^2 = 2/3).
    # f_lab = [3, 4, 2, 5]: mean 3.5, Var = (0.25 + 0.25 + 2.25 + 2.25)/3 = 5/3
    # Cov(f, Y) = (-0.5*0 + 0.5*0 + -1.5*-1 + 1.5*1)/3 = 1  ->  lam = 1 / (5/3) = 0.6
    # Y - 0.6 f = [1.2, 0.6, 0.8, 1.0]: mean 0.9, s^2 = (0.09 + 0.09 + 0.01 + 0.01)/3 = 1/15
    # estimate = 0.6 * 4 + 0.9 = 3.3; se^2 = (2/3)/12 + (1/6)(1/15) = 5/90 + 1/90 = 1/15
    y = [3, 3, 2, 4]
    r = ppi_mean(F_ALL, F_LAB, y, tuned=True)
    assert r.lam == pytest.approx(0.6)
    assert r.estimate == pytest.approx(3.3)
    assert r.se == pytest.approx(math.sqrt(1 / 15))
    assert (r.low, r.high) == pytest.approx((3.3 - Z95 * math.sqrt(1 / 15), 3.3 + Z95 * math.sqrt(1 / 15)))
    # Untuned on the same data: residual [0, -1, 0, -1], s^2 = 1/3; se^2 = (2/3)/12 + (1/6)(1/3) = 1/9.
    plain = ppi_mean(F_ALL, F_LAB, y)
    assert (plain.estimate, plain.se) == pytest.approx((3.5, 1 / 3))
    assert r.se < plain.se
    # The first hand example's slope is 7/5 = 1.4 (Cov = 7/3, Var = 5/3): clipped to 1, i.e. plain PPI.
    clipped = ppi_mean(F_ALL, F_LAB, Y_LAB, tuned=True)
    assert clipped.lam == 1.0 and clipped.estimate == pytest.approx(3.5)
    # A judge that is constant on the labelled items carries no information: lam = 0, the human mean.
    flat = ppi_mean([2, 2, 2, 9, 9], [2, 2, 2], [1, 2, 3], tuned=True)
    assert flat.lam == 0.0 and flat.estimate == pytest.approx(2.0)


def test_limits_all_labelled_and_perfect_judge():
    # n = N: the estimate is the human mean and the interval the classical one, whatever the judge.
    r = ppi_mean(F_LAB, F_LAB, Y_LAB)
    assert r.estimate == pytest.approx(3.0)
    assert (r.low, r.high) == pytest.approx((r.human_low, r.human_high))
    # A perfect judge (f = Y on the labelled items): the judge mean over all N, se^2 = s^2(Y)/N.
    r = ppi_mean(F_ALL, F_LAB, F_LAB)
    assert r.estimate == pytest.approx(4.0)
    assert r.se == pytest.approx(math.sqrt((5 / 3) / 12))


def _biased_judge_sample(rng, n_all, n_lab):
    truth = rng.normal(0.6, 0.2, n_all)
    judge = truth + 0.3 + rng.normal(0.0, 0.1, n_all)  # biased by +0.3
    return judge, judge[:n_lab], truth[:n_lab]


def test_coverage_with_biased_judge():
    rng = np.random.default_rng(20240515)
    true_mean, reps = 0.6, 200
    cover = {"ppi": 0, "tuned": 0, "judge": 0, "human": 0}
    widths = {"ppi": [], "human": []}
    for _ in range(reps):
        f_all, f_lab, y_lab = _biased_judge_sample(rng, 1000, 100)
        r = ppi_mean(f_all, f_lab, y_lab)
        t = ppi_mean(f_all, f_lab, y_lab, tuned=True)
        cover["ppi"] += r.low <= true_mean <= r.high
        cover["tuned"] += t.low <= true_mean <= t.high
        cover["judge"] += r.judge_low <= true_mean <= r.judge_high
        cover["human"] += r.human_low <= true_mean <= r.human_high
        widths["ppi"].append(r.high - r.low)
        widths["human"].append(r.human_high - r.human_low)
    rate = {k: v / reps for k, v in cover.items()}
    assert 0.90 <= rate["ppi"] <= 0.99, rate
    assert 0.90 <= rate["tuned"] <= 0.99, rate
    assert 0.90 <= rate["human"] <= 0.99, rate
    assert rate["judge"] < 0.5, rate  # the judge alone is off by 0.3 with se ~0.007: it (almost) never covers
    # the judge tracks the truth (residual sd 0.1 vs truth sd 0.2), so PPI is narrower than human-only
    assert np.mean(widths["ppi"]) < 0.75 * np.mean(widths["human"])


def test_se_accounts_for_labelled_items_inside_the_judge_mean():
    # Half the items labelled and a shrunk judge (f = 0.3 Y + noise): Cov(f, Y - f) > 0, so ignoring
    # the overlap of the labelled items with the judge mean (s^2(f)/N + s^2(Y - f)/n) understates se.
    # True variance: sigma_Y^2/N + (1/n - 1/N) Var(Y - f) = 0.04/200 + (1/100 - 1/200)(0.49*0.04 + 0.05^2).
    n_all, n_lab, reps = 200, 100, 2000
    true_var = 0.04 / n_all + (1 / n_lab - 1 / n_all) * (0.49 * 0.04 + 0.05**2)
    rng = np.random.default_rng(11)
    est, var_ppi, var_naive = [], [], []
    for _ in range(reps):
        y = rng.normal(0.5, 0.2, n_all)
        f = 0.3 * y + rng.normal(0.0, 0.05, n_all)
        r = ppi_mean(f, f[:n_lab], y[:n_lab])
        est.append(r.estimate)
        var_ppi.append(r.se**2)
        var_naive.append(np.var(f, ddof=1) / n_all + np.var(y[:n_lab] - f[:n_lab], ddof=1) / n_lab)
    assert np.mean(est) == pytest.approx(0.5, abs=3 * math.sqrt(true_var / reps))  # unbiased
    assert np.mean(var_ppi) == pytest.approx(true_var, rel=0.05)
    assert np.mean(var_naive) < 0.85 * true_var  # the formula this module avoids
    assert np.var(est) == pytest.approx(true_var, rel=0.12)


def _two_systems(rng, n_all, n_lab, judge_gap, human_gap):
    """Long table: per item a quality q; humans see B = A + human_gap, the judge sees A = B + judge_gap."""
    q = rng.normal(0.5, 0.2, n_all)
    y_a = q + rng.normal(0.0, 0.05, n_all)
    y_b = y_a + human_gap + rng.normal(0.0, 0.05, n_all)
    f_a = q + judge_gap + rng.normal(0.0, 0.05, n_all)
    f_b = q + rng.normal(0.0, 0.05, n_all)
    labelled = np.arange(n_all) < n_lab
    rows = [{"task_id": f"t{i}", "system": s, "judge": f[i], "human": y[i] if labelled[i] else np.nan}
            for i in range(n_all) for s, f, y in (("A", f_a, y_a), ("B", f_b, y_b))]
    return pd.DataFrame(rows)


def test_paired_difference_removed_by_ppi():
    # The judge prefers A by 0.3 (self-preference); humans see no difference.
    df = _two_systems(np.random.default_rng(3), 400, 80, judge_gap=0.3, human_gap=0.0)
    diff = ppi_table(df, "system", "judge", "human", item="task_id", pairs=[("A", "B")]).iloc[-1]
    assert (diff["row"], diff["system"], diff["baseline"]) == ("difference", "A", "B")
    assert diff["judge_low"] > 0.25  # the judge's difference looks certain...
    assert diff["low"] < 0.0 < diff["high"]  # ...and does not survive the correction
    assert abs(diff["estimate"]) < 0.05


def test_paired_difference_recovered_by_ppi():
    # The reverse: the judge cannot tell A from B, humans rate B higher by 0.2.
    df = _two_systems(np.random.default_rng(4), 400, 80, judge_gap=0.0, human_gap=0.2)
    diff = ppi_table(df, "system", "judge", "human", pairs="all").iloc[-1]
    assert diff["judge_low"] < 0.0 < diff["judge_high"]
    assert diff["high"] < 0.0  # A - B < 0: B is better
    assert diff["estimate"] == pytest.approx(-0.2, abs=0.05)


def test_paired_difference_is_ppi_on_per_item_differences():
    fa, fb = np.array([3.0, 4, 2, 5, 4, 3]), np.array([2.0, 4, 3, 3, 4, 4])
    ya, yb = np.array([2.0, 4, 1, 5]), np.array([2.0, 3, 2, 3])
    r = ppi_mean_difference(fa, fb, fa[:4], fb[:4], ya, yb)
    # per-item differences: judge [1, 0, -1, 2, 0, -1] (mean 1/6), labelled human [0, 1, -1, 2] (mean 0.5)
    # residual d_Y - d_f = [-1, 1, 0, 0]: mean 0, s^2 = 2/3; s^2(d_Y) = (0.25 + 0.25 + 2.25 + 2.25)/3 = 5/3
    # estimate = 1/6 + 0 = 1/6; se^2 = (5/3)/6 + (1/4 - 1/6)(2/3) = 5/18 + 1/18 = 1/3
    assert r.estimate == pytest.approx(1 / 6)
    assert r.se == pytest.approx(math.sqrt(1 / 3))
    assert r == ppi_mean(fa - fb, fa[:4] - fb[:4], ya - yb)
    with pytest.raises(DataError, match="same items"):
        ppi_mean_difference(fa, fb[:5], fa[:4], fb[:4], ya, yb)


def test_table_rows_against_hand_example():
    df = pd.DataFrame({
        "task_id": [f"t{i}" for i in range(12)] * 2,
        "system": ["S"] * 12 + ["R"] * 12,
        "score": F_ALL + [x - 1 for x in F_ALL],
        "human": Y_LAB + [np.nan] * 8 + [y - 1 for y in Y_LAB] + [np.nan] * 8,
    }).sample(frac=1.0, random_state=0)  # row order must not matter beyond first appearance
    table = ppi_table(df, "system", "score", "human", pairs=[("S", "R")])
    assert list(table.columns) == TABLE_COLUMNS
    s = table[(table["row"] == "system") & (table["system"] == "S")].iloc[0]
    assert s["estimate"] == pytest.approx(3.5) and s["se"] == pytest.approx(math.sqrt(1 / 3))
    assert (s["judge_mean"], s["human_mean"], s["n_labelled"], s["n_all"]) == (4.0, 3.0, 4, 12)
    assert s["judge_bias"] == pytest.approx(0.5)  # mean(f - Y) = (1 + 0 + 1 + 0) / 4
    # Pearson: Cov = 7/3, Var f = 5/3, Var Y = 10/3 -> (7/3) / sqrt(50/9) = 7 / sqrt(50); ranks agree exactly
    assert s["pearson_r"] == pytest.approx(7 / math.sqrt(50))
    assert s["spearman_rho"] == pytest.approx(1.0)
    r = table[(table["row"] == "system") & (table["system"] == "R")].iloc[0]
    assert r["estimate"] == pytest.approx(2.5)  # shifting judge and human by -1 shifts the estimate
    d = table[table["row"] == "difference"].iloc[0]
    # S - R is exactly 1 on every item for judge and human: estimate 1, se 0, agreement undefined
    assert (d["estimate"], d["se"], d["judge_mean"], d["human_mean"]) == pytest.approx((1.0, 0.0, 1.0, 1.0))
    assert math.isnan(d["pearson_r"]) and math.isnan(d["spearman_rho"])
    assert len(table) == 3 and list(table["row"]) == ["system", "system", "difference"]


def test_errors():
    with pytest.raises(DataError, match="no labelled items"):
        ppi_mean([1, 2, 3], [], [])
    with pytest.raises(DataError, match="judge_labelled has 3 scores but human_labelled 2"):
        ppi_mean([1, 2, 3], [1, 2, 3], [1, 2])
    with pytest.raises(DataError, match="only 1 labelled item"):
        ppi_mean([1, 2, 3], [1], [1])
    with pytest.raises(DataError, match="human_labelled has 1 NaN"):
        ppi_mean([1, 2, 3], [1, 2], [1, np.nan])
    with pytest.raises(DataError, match="judge_all has 1 NaN or infinite value.*position 2"):
        ppi_mean([1, 2, np.nan], [1, 2], [1, 2])
    with pytest.raises(DataError, match="judge_all has 2 items but 3 are labelled"):
        ppi_mean([1, 2], [1, 2, 3], [1, 2, 3])
    with pytest.raises(DataError, match="numeric"):
        ppi_mean(["a", "b"], [1, 2], [1, 2])
    with pytest.raises(ConfigError, match="alpha"):
        ppi_mean([1, 2, 3], [1, 2], [1, 2], alpha=1.5)


def test_table_errors():
    df = pd.DataFrame({"task_id": ["a", "b", "c"], "system": ["S"] * 3, "judge": [1.0, 2, 3],
                       "human": [1.0, 2, np.nan]})
    with pytest.raises(DataError, match=r"missing column\(s\) \['score'\]"):
        ppi_table(df, "system", "score", "human")
    with pytest.raises(DataError, match="without a judge score.*'c'"):
        ppi_table(df.assign(judge=[1.0, 2, np.nan]), "system", "judge", "human")
    with pytest.raises(DataError, match="share a"):
        ppi_table(pd.concat([df, df.iloc[:1]]), "system", "judge", "human")
    with pytest.raises(DataError, match="system 'S': only 1 labelled item"):
        ppi_table(df.assign(human=[1.0, np.nan, np.nan]), "system", "judge", "human")
    with pytest.raises(ConfigError, match="unknown: \\['X'\\]"):
        ppi_table(df, "system", "judge", "human", pairs=[("S", "X")])
    other = df.assign(system="T", task_id=["x", "y", "z"])
    with pytest.raises(DataError, match="'S' and 'T' share no 'task_id'"):
        ppi_table(pd.concat([df, other]), "system", "judge", "human", pairs="all")
    with pytest.raises(ConfigError, match="pairs must be"):
        ppi_table(df, "system", "judge", "human", pairs="some")


# ---- stratified PPI ------------------------------------------------------------------------------

# Two strata; A: 6 judged items, the first 3 labelled; B: 4 judged items, the first 2 labelled.
STRATA = {"A": ([1, 1, 0, 1, 0, 1], [1, 1, 0], [1, 0, 0]), "B": ([0, 0, 1, 0], [0, 0], [1, 0])}


def test_stratified_hand_example():
    from convrag.stats.ppi import StratifiedPPIResult, ppi_mean_stratified

    # A: judge mean 4/6 = 2/3; residual Y - f = [0, -1, 0]: mean -1/3, s^2 = (1/9 + 4/9 + 1/9) / 2 = 1/3;
    #    Y = [1, 0, 0]: mean 1/3, s^2 = 1/3. estimate 2/3 - 1/3 = 1/3; se^2 = (1/3)/6 + (1/3 - 1/6)(1/3) = 1/9.
    # B: judge mean 1/4; residual [1, 0]: mean 1/2, s^2 = 1/2; Y = [1, 0]: mean 1/2, s^2 = 1/2.
    #    estimate 1/4 + 1/2 = 3/4; se^2 = (1/2)/4 + (1/2 - 1/4)(1/2) = 1/4.
    # weights N_h/N = 6/10, 4/10: estimate 0.6/3 + 0.4 * 3/4 = 0.5; se^2 = 0.36/9 + 0.16/4 = 0.08.
    # judge: mean 5/10 = 0.5; s^2(f_A) = (4 * 1/9 + 2 * 4/9)/5 = 4/15, s^2(f_B) = (3/16 + 9/16)/3 = 1/4
    #   -> var 0.36 * (4/15)/6 + 0.16 * (1/4)/4 = 0.016 + 0.01 = 0.026.
    # human only: 0.6 * 1/3 + 0.4 * 1/2 = 0.4; var 0.36 * (1/3)/3 + 0.16 * (1/2)/2 = 0.08.
    r = ppi_mean_stratified(STRATA)
    assert isinstance(r, StratifiedPPIResult)
    assert r.estimate == pytest.approx(0.5) and r.se == pytest.approx(math.sqrt(0.08))
    assert (r.low, r.high) == pytest.approx((0.5 - Z95 * math.sqrt(0.08), 0.5 + Z95 * math.sqrt(0.08)))
    assert r.judge_mean == pytest.approx(0.5)
    assert (r.judge_low, r.judge_high) == pytest.approx((0.5 - Z95 * math.sqrt(0.026), 0.5 + Z95 * math.sqrt(0.026)))
    assert r.human_mean == pytest.approx(0.4)
    assert (r.human_low, r.human_high) == pytest.approx((0.4 - Z95 * math.sqrt(0.08), 0.4 + Z95 * math.sqrt(0.08)))
    assert (r.n_labelled, r.n_all, r.lam) == (5, 10, 1.0)
    assert r.weights == pytest.approx((0.6, 0.4)) and r.names == ("A", "B")
    assert [s.estimate for s in r.strata] == pytest.approx([1 / 3, 3 / 4])
    # a single stratum is plain PPI; an empty stratum is left out; a sequence names strata by position
    one = ppi_mean_stratified({"A": STRATA["A"], "empty": ([], [], [])})
    assert one.estimate == pytest.approx(ppi_mean(*STRATA["A"]).estimate) and one.names == ("A",)
    assert one.se == pytest.approx(math.sqrt(1 / 9))
    assert ppi_mean_stratified(list(STRATA.values())).names == (0, 1)
    # tuned: each stratum its own lam; the combined lam is NaN when they differ
    t = ppi_mean_stratified(STRATA, tuned=True)
    assert [s.lam for s in t.strata] == pytest.approx([0.5, 0.0]) and math.isnan(t.lam)


def test_stratified_errors():
    from convrag.stats.ppi import ppi_mean_stratified

    with pytest.raises(DataError, match="stratum 'B'.*only 1 labelled"):
        ppi_mean_stratified({"A": STRATA["A"], "B": ([0, 1], [0], [1])})
    with pytest.raises(DataError, match="stratum 'B'.*no labelled items"):
        ppi_mean_stratified({"A": STRATA["A"], "B": ([0, 1], [], [])})
    with pytest.raises(DataError, match="no stratum has any item"):
        ppi_mean_stratified({"A": ([], [], [])})
    with pytest.raises(DataError, match="stratum 'A' must be"):
        ppi_mean_stratified({"A": ([1, 0],)})


def test_stratified_coverage_where_pooled_ppi_fails():
    """Disproportionate strata (40 labelled of 2000, 40 of 500, 40 of 500) with a judge biased
    only in the big stratum: stratified PPI covers the population mean about 95% of the time; one
    PPI over the pooled labelled items (each stratum's residual weighted 1/3 instead of N_h/N) is
    biased by about 0.1 and covers far less, so this check can fail."""
    from convrag.stats.ppi import ppi_mean_stratified

    rng = np.random.default_rng(7)
    sizes, n_lab, p_true = (2000, 500, 500), 40, (0.2, 0.7, 0.9)
    flip_up = (0.4, 0.05, 0.05)  # P(judge says 1 | human 0) per stratum: the big stratum's judge is lenient
    truth = sum(n * p for n, p in zip(sizes, p_true)) / sum(sizes)
    reps, cover, cover_pooled, est = 400, 0, 0, []
    for _ in range(reps):
        strata, pooled_f, pooled_fl, pooled_y = {}, [], [], []
        for h, (n_h, p, up) in enumerate(zip(sizes, p_true, flip_up)):
            y = (rng.random(n_h) < p).astype(float)
            f = np.where(y == 1, (rng.random(n_h) < 0.9), (rng.random(n_h) < up)).astype(float)
            lab = rng.choice(n_h, n_lab, replace=False)
            strata[h] = (f, f[lab], y[lab])
            pooled_f.append(f), pooled_fl.append(f[lab]), pooled_y.append(y[lab])
        r = ppi_mean_stratified(strata)
        est.append(r.estimate)
        cover += r.low <= truth <= r.high
        p = ppi_mean(np.concatenate(pooled_f), np.concatenate(pooled_fl), np.concatenate(pooled_y))
        cover_pooled += p.low <= truth <= p.high
    assert 0.92 <= cover / reps <= 0.98, cover / reps
    assert np.mean(est) == pytest.approx(truth, abs=0.005)
    assert cover_pooled / reps < 0.6, cover_pooled / reps
