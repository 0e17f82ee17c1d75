"""Why a worse_labels table or figure has a blank cell, per target (``convrag.report.blanks``).

``reasons(name, df, inputs, ctx)`` gives the ``df.attrs["blank_reasons"]`` of a target: column ->
a function of the row that returns the reason it can prove from the row (a count of 0, a row kind
the column does not apply to, one class only for an AUROC) or from the run (the audit off, no
annotator feedback, no weights file), else None so the shared rules are asked. Each reason follows
from how the builder computes the column (its docstring); none is written without that check.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

Reason = Callable[[pd.Series], "str | None"]

AUDIT_OFF = "the audit is off (worse_labels.judges.audit.model is null)"


def _nan(x) -> bool:
    return x is None or (not isinstance(x, str) and pd.isna(x))


def _zero(row, col: str) -> bool:
    return col in row.index and not _nan(row[col]) and row[col] == 0


def _one_class(row, n: str, n_pos: str, what: str) -> str | None:
    """The AUROC's blank when its contexts hold one class (n_pos 0 or all of n), or none (n 0)."""
    if _zero(row, n):
        return f"no contexts to compute it from ({n} = 0)"
    if _nan(row.get(n)) or _nan(row.get(n_pos)):
        return None
    if row[n_pos] == 0:
        return f"one class only ({n_pos} = 0: no context {what}): the AUROC is undefined"
    if row[n_pos] == row[n]:
        return f"one class only ({n_pos} = {n}: every context {what}): the AUROC is undefined"
    return None


def _same(cols, why: Reason) -> dict:
    return {c: why for c in cols}


# ---- label_quality ------------------------------------------------------------------------------

_PAIRWISE = ("cohen_kappa", "binary_kappa", "raw_agreement")


def _agreement(df, inputs, ctx):
    def ci(r):
        if r["measure"] not in _PAIRWISE:
            return f"only the pairwise measures ({', '.join(_PAIRWISE)}) are bootstrapped"
        if _zero(r, "n"):
            return "no item both labellers labelled (n = 0)"
        return None

    def value(r):
        if r["measure"] == "binary_kappa" and _zero(r, "n"):
            return "every item both labelled is partial under one of them: no yes / no decision to compare (n = 0)"
        return None
    return {"labeller_b": lambda r: ("gold_labelled_no counts one labeller's labels: there is no second labeller"
                                     if r["measure"] == "gold_labelled_no" else None),
            "ci_low": ci, "ci_high": ci, "value": value}


def _copies(df, inputs, ctx):
    def why(r):
        return "no context without gold at this rung (n_no_gold = 0)" if _zero(r, "n_no_gold") else None

    def ratio(r):
        if _zero(r, "n_no_gold"):
            return why(r)
        first = df[(df["slice"] == r["slice"]) & (df["rung"] == r["first_rung"])]
        if len(first) and (_zero(first.iloc[0], "n_copy") or _zero(first.iloc[0], "n_no_gold")):
            return (f"the first rung ({r['first_rung']}) has no no-gold context holding a copy: the ratio to its "
                    "share has no denominator")
        return None
    return {**_same(("share_copy", "ci_low", "ci_high"), why), **_same(("ratio_to_first", "ratio_ci_low",
                                                                         "ratio_ci_high"), ratio)}


def _no_false_miss(r):
    return "no false misses at this rung (n_false_miss = 0)" if _zero(r, "n_false_miss") else None


def _evidence(df, inputs, ctx):
    def world(r):
        if _zero(r, "n_false_miss"):
            return _no_false_miss(r)
        return ("the world labeller (the generated benchmark's ground truth) labels none of the false misses "
                "(n_world = 0)" if _zero(r, "n_world") else None)

    def stackexchange(r):
        if _zero(r, "n_false_miss"):
            return _no_false_miss(r)
        return ("no false miss in RECOR's StackExchange domains (n_false_miss_stackexchange = 0)"
                if _zero(r, "n_false_miss_stackexchange") else None)

    def copies(r):
        return ("no near-verbatim copy of gold in the rung's labelled contexts (n_copy_docs = 0)"
                if _zero(r, "n_copy_docs") else None)
    out = _same([c for c in df.columns if c.startswith("share_") and c not in
                 ("share_world_sufficient", "share_same_thread_stackexchange", "share_copy_docs_named")],
                _no_false_miss)
    out["share_world_sufficient"] = world
    out["share_same_thread_stackexchange"] = stackexchange
    out.update(_same(("share_copy_docs_named", "copy_docs_named_ci_low", "copy_docs_named_ci_high"), copies))
    return out


def _figure2b(df, inputs, ctx):
    def labelled(r):
        return "no labelled context at this rung (n = 0)" if _zero(r, "n") else None

    def no_gold(r):
        if _zero(r, "n"):
            return labelled(r)
        return "no labelled context without gold at this rung (n_no_gold = 0)" if _zero(r, "n_no_gold") else None

    def binary_no_gold(r):
        if _zero(r, "n") or _zero(r, "n_no_gold"):
            return no_gold(r)
        return ("every labelled context without gold is judged partial, which the binary metrics drop "
                "(n_no_gold_binary = 0)" if _zero(r, "n_no_gold_binary") else None)

    def binary(r):
        if _zero(r, "n"):
            return labelled(r)
        return ("every labelled context is judged partial, which the binary metrics drop (n_binary = 0)"
                if _zero(r, "n_binary") else None)

    def specificity(r):
        if _zero(r, "n") or _zero(r, "n_binary"):
            return binary(r)
        return ("no context is judged yes, so specificity = tn / (tn + fp) has no denominator"
                if _nan(r["specificity"]) else None)

    def recall(r):
        if _zero(r, "n") or _zero(r, "n_binary"):
            return binary(r)
        return ("no context is judged no, so recall = tp / (tp + fn) has no denominator"
                if _nan(r["recall"]) else None)

    def youden(r):
        if _zero(r, "n") or _zero(r, "n_binary"):
            return binary(r)
        if _nan(r["specificity"]):
            return "specificity is undefined: " + specificity(r)
        if _nan(r["recall"]):
            return "recall is undefined: " + recall(r)
        return None
    cols = ("false_miss_share", "false_miss_ci_low", "false_miss_ci_high", "precision_partial_insufficient",
            "precision_partial_insufficient_ci_low", "precision_partial_insufficient_ci_high",
            "false_miss_share_with_partial", "false_miss_with_partial_ci_low", "false_miss_with_partial_ci_high",
            "precision_partial_sufficient", "partial_share_no_gold")
    return {**_same(cols, no_gold), **_same(("precision", "precision_ci_low", "precision_ci_high"), binary_no_gold),
            "specificity": specificity, "recall": recall,
            **_same(("youden_j", "youden_j_ci_low", "youden_j_ci_high"), youden)}


def _table1(df, inputs, ctx):
    def youden(r):
        if _zero(r, "change_n"):
            return "no turn labelled under both the first and the last rung (change_n = 0)"
        if not _nan(r.get("change_n")) and _nan(r["youden_change"]):
            return (f"Youden's J is undefined at {r['first_rung']} or {r['last_rung']}: of the turns labelled under "
                    "both, none is judged sufficient there, or none insufficient (specificity or recall has no "
                    "denominator)")
        return None

    def control(r):
        if not _zero(r, "n_control"):
            return None
        if r.get("labeller") == "audit":
            return "the audit labels only its sample of the rung contexts, no control context (n_control = 0)"
        return "no control context labelled by this labeller (n_control = 0)"
    return {"youden_change": youden, **_same(("control_yes_share", "control_yes_ci_low", "control_yes_ci_high",
                                              "n_control_yes", "n_control_yes_ci_low", "n_control_yes_ci_high"),
                                             control)}


def _table3(df, inputs, ctx):
    def no_gold(r):
        if _zero(r, "n"):
            return "no labelled context at this rung (n = 0)"
        return ("no context without gold at this rung (share_no_gold = 0)"
                if _zero(r, "share_no_gold") else None)
    return {**_same(("false_miss_share", "precision", "precision_ci_low", "precision_ci_high"), no_gold),
            "auroc_qrels": lambda r: _one_class(r, "n_qrels", "n_pos_qrels", "answerable under qrels"),
            "auroc_content": lambda r: _one_class(r, "n_content", "n_pos_content", "answerable under the label")}


# ---- abstention -----------------------------------------------------------------------------------

_TABLE2_GROUPS = {"false_miss": "false miss (no gold, judged sufficient)",
                  "true_miss": "true miss (no gold, judged insufficient)",
                  "no_docs": "no-document read of a false-miss turn"}


def _table2(df, inputs, ctx):
    """The generic rule would blame ``n_unscored_<group> = 0`` (the longest ``n_`` column sharing
    the suffix) for a blank share whose group is empty: the cause is ``n_<group> = 0``; the no-document
    reads are of the false-miss turns, so they are empty when the false misses are."""
    def no_false_miss(r, then: str):
        return f"no false misses at this rung (n_false_miss = 0), so {then}" if _zero(r, "n_false_miss") else None

    def correct(name: str):
        def why(r):
            if name == "no_docs" and (w := no_false_miss(r, "no turn to read with no documents (n_no_docs = 0)")):
                return w
            n, unscored = f"n_{name}", f"n_unscored_{name}"
            if _zero(r, n):
                return f"no {_TABLE2_GROUPS[name]} context at this rung ({n} = 0)"
            if not _nan(r.get(unscored)) and not _nan(r.get(n)) and r[unscored] == r[n]:
                return (f"none of the {int(r[n])} {_TABLE2_GROUPS[name]} contexts has a correctness score "
                        f"({unscored} = {n})")
            return None
        return why

    def diff(r):
        if not _zero(r, "n_paired"):
            return None
        if w := no_false_miss(r, "no turn to pair (n_paired = 0)"):
            return w
        return "no false-miss turn is scored both with the rung's context and with no documents (n_paired = 0)"

    def abstain(r):
        if w := no_false_miss(r, "no turn to read with no documents (n_no_docs = 0)"):
            return w
        if _zero(r, "n_status_no_docs"):
            return "no no-document read of a false-miss turn has a status line (n_status_no_docs = 0)"
        return None

    def share_no_status(r):
        return "the reader read no context at this rung (n_reads = 0)" if _zero(r, "n_reads") else None
    return {"diff": diff, **{f"correct_{k}": correct(k) for k in _TABLE2_GROUPS}, "abstain_no_docs": abstain,
            "share_no_status": share_no_status}


def _figure3(df, inputs, ctx):
    def value(r):
        if r["measure"] == "auroc":
            return _one_class(r, "n", "n_pos", f"answerable under {r['label']}")
        if r["measure"] == "gap":
            if _zero(r, "n"):
                return "no context with a p(answerable) that either label keeps (n = 0)"
            bad = [x for x in ("auroc_content", "auroc_qrels") if _nan(r[x])]
            if bad:
                return f"{' and '.join(bad)} on these contexts is undefined (one class only)"
        return None

    def gap_only(r):
        return "only the gap rows carry it (measure auroc)" if r["measure"] == "auroc" else None

    def ci(r):
        return ("an AUROC row has no interval (only the gap rows are bootstrapped)" if r["measure"] == "auroc"
                else None)

    def auroc_of(label: str):
        def why(r):
            if r["measure"] == "auroc":
                return gap_only(r)
            n = "n_content" if label == "primary content" else "n_qrels"
            if _zero(r, n):
                return f"no context with a p(answerable) that the {label} label keeps ({n} = 0)"
            return f"the {label} label gives the contexts it keeps one class only: the AUROC is undefined"
        return why
    return {"value": value, "ci_low": ci, "ci_high": ci, "n_resamples_used": gap_only,
            "auroc_content": auroc_of("primary content"), "auroc_qrels": auroc_of("qrels"),
            "n_content": gap_only, "n_qrels": gap_only}


def _score_detectors(df, inputs, ctx):
    def value(r):
        return _one_class(r, "n", "n_pos", f"insufficient under {r['label']}")

    def auroc_row(r):
        return ("an AUROC row has no interval (only the top1_z_minus_reader rows are bootstrapped)"
                if r["measure"] == "auroc" else None)

    def not_bootstrapped(r):
        return ("an AUROC row is not bootstrapped (only the top1_z_minus_reader rows are)"
                if r["measure"] == "auroc" else None)
    return {"value": value, "ci_low": auroc_row, "ci_high": auroc_row, "n_resamples_used": not_bootstrapped}


# ---- the changed conclusions (followups.changed_all) -----------------------------------------------

_AUROC_FAMILIES = ("auroc_rungs", "auroc_readers", "auroc_chance")
_KITAGAWA = ("at one of the two rungs no context has both a status line and a {label} label that keeps it "
             "(sufficient or insufficient): a Kitagawa term is undefined")
_REFUSAL = {"refusal_rungs": "at one of the two rungs no context insufficient under the {label} label has a status line",
            "refusal_readers": "for one of the two readers no context insufficient under the {label} label has a status line",
            "refusal_gap": "no context insufficient, or none sufficient, under the {label} label has a status line",
            "contrast_2b_2c": "of the contexts insufficient under the {label} label, none has a status line with the "
                              "rung's context or none with the gold documents"}


def _contrast(df, inputs, ctx):
    """abstention.contrast_2b_2c: the pooled contrast is a difference of two refusal rates over
    the responses with a status line (failed retrievals: n_rung; the gold setting: n_gold); the
    within-turn one a paired mean over the n_paired turns with a status line in both."""
    def pooled(r):
        if _zero(r, "n_turns"):
            return f"no turn whose context the {r['label']} label calls a failed retrieval (n_turns = 0)"
        if _zero(r, "n_rung"):
            return (f"none of the {int(r['n_turns'])} failed retrievals under the {r['label']} label has a "
                    "response with a status line (n_rung = 0)")
        if _zero(r, "n_gold"):
            return "no response with the gold documents has a status line (n_gold = 0)"
        return None

    def within(r):
        if _zero(r, "n_paired"):
            return (f"no failed retrieval under the {r['label']} label has a status line both with its context "
                    "and with the gold of its turn (n_paired = 0)")
        return None
    return {**_same(("pooled_diff", "pooled_ci_low", "pooled_ci_high"), pooled),
            **_same(("within_diff", "within_ci_low", "within_ci_high"), within)}


def _kitagawa(df, inputs, ctx):
    """abstention.kitagawa_table: every column needs parsed, labelled contexts at both rungs
    (n_from, n_to); a stratum's refusal rate needs a context in that stratum at that rung."""
    def both(r):
        for side in ("from", "to"):
            if _zero(r, f"n_{side}"):
                return (f"no context at the {side} rung ({r[f'{side}_rung']}) has both a status line and a "
                        f"primary label (n_{side} = 0)")
        return None

    def stratum(side: str, kind: str) -> Reason:
        def why(r):
            if both(r):
                return both(r)
            share = r.get(f"share_sufficient_{side}")
            if _nan(share):
                return None
            if kind == "sufficient" and share == 0:
                return (f"no context at the {side} rung ({r[f'{side}_rung']}) is judged sufficient "
                        f"(share_sufficient_{side} = 0): an empty stratum has no refusal rate")
            if kind == "insufficient" and share == 1:
                return (f"every context at the {side} rung ({r[f'{side}_rung']}) is judged sufficient "
                        f"(share_sufficient_{side} = 1): an empty stratum has no refusal rate")
            return None
        return why
    out = _same(("total", "composition", "rate", "refusal_from", "refusal_to", "share_sufficient_from",
                 "share_sufficient_to"), both)
    for side in ("from", "to"):
        for kind in ("sufficient", "insufficient"):
            out[f"refusal_{kind}_{side}"] = stratum(side, kind)
    return out


def _changed(df, inputs, ctx):
    def estimate(side: str):
        def why(r):
            n, label = f"n_{side}", r[f"{side}_label"]
            if _zero(r, n):
                return f"no items to compute it from ({n} = 0)"
            fam = r["family"]
            if fam == "auroc_rungs":
                return f"at one of the two rungs the {label} label gives the compared turns one class only: an AUROC is undefined"
            if fam in _AUROC_FAMILIES:
                return f"the {label} label gives the compared contexts one class only: an AUROC is undefined"
            if fam in _REFUSAL:
                return _REFUSAL[fam].format(label=label) + ": a refusal rate is undefined"
            if fam in ("kitagawa_composition", "kitagawa_rate"):
                return _KITAGAWA.format(label=label)
            return None
        return why

    def interval(side: str):
        def why(r):
            return estimate(side)(r) if _nan(r[f"est_{side}"]) else None
        return why

    def pair_or_cell(col):
        def why(r):
            fam = r["family"]
            if col == "rung" and fam in ("auroc_rungs", "refusal_rungs", "kitagawa_composition", "kitagawa_rate"):
                return "a comparison between two rungs (first, second)"
            if col == "reader" and fam in ("auroc_readers", "refusal_readers"):
                return "a comparison between two readers (first, second)"
            if col in ("first", "second") and fam in ("auroc_chance", "refusal_gap", "contrast_2b_2c"):
                return "a comparison within one reader and rung: nothing is compared pairwise"
            return None
        return why
    out = {c: pair_or_cell(c) for c in ("rung", "reader", "first", "second")}
    for side in ("base", "other"):
        out[f"est_{side}"] = estimate(side)
        out[f"ci_low_{side}"] = out[f"ci_high_{side}"] = interval(side)
    return out


# ---- the other followups ---------------------------------------------------------------------------

def _ladder_steps(df, inputs, ctx):
    def undefined(r, which: str) -> str | None:
        if r["n"] - r["n_unlabelled"] == 0:
            return "no turn labelled under both rungs"
        if r["metric"] == "precision":
            return "no compared turn lacks gold at that rung: the precision of \"no gold\" is undefined there"
        if r["metric"] == "youden_j":
            return "Youden's J is undefined at that rung: no compared turn there is judged sufficient, or none insufficient"
        return None

    def value(which):
        return lambda r: undefined(r, which)

    def diff(r):
        bad = [w for w in ("first", "second") if _nan(r[f"value_{w}"])]
        if not bad or not undefined(r, bad[0]):
            return None
        return (f"the {r['metric']} is undefined at the {' and the '.join(bad)} rung "
                f"({', '.join('value_' + w for w in bad)} blank)")

    def interval(r):
        why = diff(r) if _nan(r["diff"]) else None
        return f"its estimate (diff) is blank: {why}, so in every resample too" if why else None
    return {"value_first": value("first"), "value_second": value("second"), "diff": diff,
            **_same(("ci_low", "ci_high", "ci_low_alt", "ci_high_alt", "ci_shift"), interval)}


def _dialogue_tied(df, inputs, ctx):
    def no_gold(r):
        return ("no context without gold judged yes or no (n_no_gold = 0; partial is dropped)"
                if _zero(r, "n_no_gold") else None)

    def discounted(r):
        if _zero(r, "n_no_gold"):
            return no_gold(r)
        if not _nan(r.get("n_tied")) and r["n_tied"] == r["n_no_gold"]:
            return "every no-gold context is a dialogue-tied false miss (n_tied = n_no_gold): nothing left to divide by"
        return None

    def audit(r):
        if not _zero(r, "n_audit_false_miss"):
            return None
        if not ctx.get("audit"):
            return f"{AUDIT_OFF}, so the audit has no false miss here (n_audit_false_miss = 0)"
        return "the audit judges none of its audited no-gold contexts here 'yes' (n_audit_false_miss = 0)"
    return {"share_tied": _no_false_miss, "precision": no_gold, "precision_tied_insufficient": no_gold,
            **_same(("precision_discounted", "precision_discounted_ci_low", "precision_discounted_ci_high"),
                    discounted),
            "share_audit_tied": audit,
            "share_docs_tied": lambda r: ("no context without gold (n_docs_no_gold = 0)"
                                          if _zero(r, "n_docs_no_gold") else None)}


FEEDBACK_ORIGINS = ("rejected", "shown", "never_seen")


def _false_miss_origin(df, inputs, ctx):
    given = bool(inputs.get("human_feedback"))

    def feedback(r):
        if bool(r["has_feedback"]):
            return None
        if not given:
            return "no annotator feedback in this run (worse_labels.human_feedback is not set; has_feedback False)"
        return "the annotator feedback covers no conversation of this slice (has_feedback False)"

    def feedback_share(r):
        return feedback(r) or _no_false_miss(r)
    out = {c: _no_false_miss for c in df.columns if c.startswith("share_")}
    out.update({f"n_{o}": feedback for o in FEEDBACK_ORIGINS})
    out.update({f"share_{o}": feedback_share for o in FEEDBACK_ORIGINS})
    out["n_rejected_only"] = feedback
    return out


# ---- judge_corrected and ladder_retrieval ---------------------------------------------------------

_PPI = ("estimate", "low", "high", "se", "audit_mean", "audit_low", "audit_high", "lam")
_AGREE = ("judge_bias", "agreement", "pearson_r")


def _judge_corrected(df, inputs, ctx):
    """A row whose ``reason`` is set lacks the audit's columns for that reason (a difference row
    then lacks every estimate); the judge's own share is blank only without judged contexts."""
    audit_cols = (*_PPI, "n_labelled", "n_audit_unread", *_AGREE, "judge_excludes_0", "ppi_excludes_0")

    def why(col):
        def f(r):
            reason = r["reason"] if isinstance(r.get("reason"), str) and r["reason"].strip() else None
            system = r["row"] == "system"
            if col == "baseline" and system:
                return "a system row has no baseline (only difference rows do)"
            if not system and col in (*_AGREE, "n_audit_unread", "n_unjudged"):
                return "not computed for a difference of two systems"
            if system and col in ("judge_excludes_0", "ppi_excludes_0"):
                return "only difference rows test whether the interval excludes 0"
            if col in _AGREE and _zero(r, "n_labelled"):
                return "no audited context (n_labelled = 0)"
            share_only = _nan(r.get("n_labelled"))  # built without the audit's labels
            if reason and (not system or (share_only and col in audit_cols) or col in _PPI):
                return reason
            if col == "pearson_r" and not share_only and not _nan(r.get("agreement")):
                return "the judge's or the audit's score is constant on the audited contexts: no correlation"
            if system and col in ("judge_mean", "judge_low", "judge_high") and _zero(r, "n_all"):
                return "no judged context (n_all = 0)"
            if system and col in ("judge_low", "judge_high") and not _nan(r.get("n_all")) and r["n_all"] == 1:
                return "one judged context: no interval"
            return None
        return f
    cols = ("baseline", *audit_cols, "n_all", "n_unjudged", "judge_mean", "judge_low", "judge_high")
    return {c: why(c) for c in cols}


def _files(x) -> list[str]:
    """An input given as one path or a list (this module is below targets.py: no import back)."""
    return [] if not x else ([x] if isinstance(x, str) else list(x))


def _ladder_retrieval(df, inputs, ctx):
    from pathlib import Path

    weighted = {(Path(p).parent.name, Path(p).stem) for p in _files(inputs.get("weights"))}
    c = pd.concat([pd.read_parquet(p, columns=["slice", "set", "domain"]) for p in _files(inputs["contexts"])],
                  ignore_index=True)
    present = set(zip(c["slice"].astype(str), c["set"].astype(str), c["domain"].astype(str)))

    def weights(r):
        return (None if (r["slice"], r["rung"]) in weighted else
                "no weights file for this rung (only expansion and fusion rungs have weights)")

    def domain(d):
        return lambda r: (None if (r["slice"], r["rung"], d) in present else
                          f"no context of this rung is in domain {d}")
    return {"weights": weights, "weights_source": weights,
            **{col: domain(col.removeprefix("ndcg10_")) for col in df.columns
               if col.startswith("ndcg10_") and col != "ndcg10_macro"}}


def _data(df, inputs, ctx):
    def corpus(r):
        return ("no gold-in-corpus report for this domain's corpus in the run's gold checks (the benchmark's "
                "corpus rule writes one per domain)")
    return _same(("corpus_documents", "corpus_documents_min", "corpus_documents_max"), corpus)


REASONS = {"data": _data, "agreement": _agreement, "copies": _copies, "evidence": _evidence, "figure2b_precision": _figure2b,
           "table1_labellers": _table1, "table3_mtrag": _table3, "table2_false_misses": _table2,
           "figure3_auroc": _figure3, "score_detectors": _score_detectors, "changed_conclusions": _changed,
           "ladder_steps": _ladder_steps, "dialogue_tied": _dialogue_tied, "false_miss_origin": _false_miss_origin,
           "judge_corrected": _judge_corrected, "ladder_retrieval": _ladder_retrieval,
           "contrast_2b_2c": _contrast, "kitagawa": _kitagawa}


def attach(name: str, df: pd.DataFrame, inputs: dict, ctx: dict) -> pd.DataFrame:
    """``df`` with target ``name``'s reasons in ``attrs["blank_reasons"]`` (a build's own kept)."""
    if name in REASONS and isinstance(df, pd.DataFrame) and not df.empty:
        df.attrs["blank_reasons"] = {**REASONS[name](df, inputs, ctx), **(df.attrs.get("blank_reasons") or {})}
    return df
