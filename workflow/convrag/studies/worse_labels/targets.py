"""The named tables and figures of worse_labels (captions in ``workflow/report/worse_labels/``),
named after the paper's numbers (``../shared/reference/published/worse_labels.yaml``); the
sections' other numbers are tables of their own (copies, negative control, agreement, evidence,
2b/2c contrast, score detectors, Kitagawa, changed conclusions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.report.reproduction import reproduction_target
from convrag.studies.base import Target

LABEL_COLUMNS = ["slice", "task_id", "set", "labeller", "label", "support"]
READ_COLUMNS = ["slice", "task_id", "set", "reader", "status", "p_answerable", "answer", "correctness", "correct"]


def _split(context_id: str) -> tuple[str, str]:
    set_, task = context_id.split("|", 1)
    return set_, task


def _paths(x) -> list[str]:
    return [] if not x else ([x] if isinstance(x, str) else list(x))


def load_contexts(inputs) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in _paths(inputs["contexts"])], ignore_index=True)


def load_labels(inputs, ctx) -> pd.DataFrame:
    """Every labeller's labels, long: the content judges (value {label, support} or None when
    unparsable), the panel's majority, the audit's final label (with the documents its deciding
    run names), and the world's truth where the benchmark has it."""
    from convrag.io import read_jsonl
    from convrag.studies.worse_labels.judges import panel_label

    rows = []
    for p in _paths(inputs.get("labels")):
        s = Path(p).parent.name
        for v in read_jsonl(p):
            set_, task = _split(v["item_id"])
            val = v["value"] if isinstance(v["value"], dict) else {}
            rows.append(dict(slice=s, task_id=task, set=set_, labeller=v["judge_model"], label=val.get("label"),
                             support=list(val.get("support") or [])))
    for p in _paths(inputs.get("audit")):
        for v in read_jsonl(p):
            set_, task = _split(v["context_id"])
            # the documents the final label rests on: the adjudicating run's, else the holistic run's
            support = v.get("support_adjudicated") if v.get("adjudicated") is not None else v.get("support_holistic")
            rows.append(dict(slice=Path(p).stem, task_id=task, set=set_, labeller="audit", label=v["final"],
                             support=list(support or [])))
    df = pd.DataFrame(rows, columns=LABEL_COLUMNS)
    members = ctx.get("panel_members") or []
    if members and not df.empty:
        wide = df[df["labeller"].isin(members)].pivot_table(index=["slice", "task_id", "set"], columns="labeller",
                                                             values="label", aggfunc="first", dropna=False)
        panel = [dict(slice=s, task_id=t, set=x, labeller="panel",
                      label=panel_label([None if pd.isna(v) else v for v in row]), support=[])
                 for (s, t, x), row in zip(wide.index, wide.reindex(columns=members).values)]
        df = pd.concat([df, pd.DataFrame(panel, columns=LABEL_COLUMNS)], ignore_index=True)
    c = load_contexts(inputs)
    world = c[c["world_label"].notna()]
    if not world.empty:
        df = pd.concat([df, pd.DataFrame(dict(slice=world["slice"], task_id=world["task_id"], set=world["set"],
                                              labeller="world", label=world["world_label"],
                                              support=[list(x) for x in world["world_support"]]))],
                       ignore_index=True)
    return df


CORRECTNESS_COLUMNS = ["slice", "reader", "item_id", "judge", "correctness"]


def load_correctness(inputs) -> pd.DataFrame:
    """Every answer judge's verdicts, long: one row per (slice, reader, item_id, judge) with the
    correctness (1-5, None when not scored). A correctness file holds every judge of its job
    (``judge_model``); a verdict without one is the single judge of an older file (judge None)."""
    from convrag.errors import DataError
    from convrag.io import read_jsonl

    rows, seen = [], set()
    for p in _paths(inputs.get("correctness")):
        s, reader = Path(p).parent.name, Path(p).stem
        for v in read_jsonl(p):
            key = (s, reader, v["item_id"], v.get("judge_model"))
            if key in seen:
                raise DataError(f"{p}: item {v['item_id']} has two verdicts of judge {v.get('judge_model')}")
            seen.add(key)
            rows.append(dict(zip(CORRECTNESS_COLUMNS, (*key, v["value"]))))
    return pd.DataFrame(rows, columns=CORRECTNESS_COLUMNS, dtype=object)


def load_reads(inputs, judge: str | None = None) -> pd.DataFrame:
    """Every reader's responses with one answer judge's correctness (1-5) and ``correct``
    (answered and correctness >= 4): ``judge`` (the config's first answer judge), or, when None,
    the first judge of each correctness file."""
    from convrag.io import read_jsonl
    from convrag.studies.worse_labels.judges import is_correct

    score = {}
    cor = load_correctness(inputs)
    for (s, reader), g in cor.groupby(["slice", "reader"], sort=False, dropna=False):
        use = judge if judge is not None else g["judge"].iloc[0]
        g = g[g["judge"].isna()] if pd.isna(use) else g[g["judge"] == use]
        score.update({(s, reader, i): None if pd.isna(v) else int(v) for i, v in zip(g["item_id"], g["correctness"])})
    rows = []
    for p in _paths(inputs.get("reads")):
        s, reader = Path(p).parent.name, Path(p).stem
        for r in read_jsonl(p):
            set_, task = _split(r["item_id"])
            sc = score.get((s, reader, r["item_id"]))
            rows.append(dict(slice=s, task_id=task, set=set_, reader=r["reader"], status=r["status"],
                             p_answerable=r["p_answerable"], answer=r.get("answer") or "", correctness=sc,
                             correct=is_correct(r["status"], sc) if score else None))
    return pd.DataFrame(rows, columns=READ_COLUMNS)


def _macro(values: np.ndarray, domains: np.ndarray) -> float:
    """The mean over domains of the per-domain mean (``domains``: integer codes)."""
    counts = np.bincount(domains)
    sums = np.bincount(domains, weights=values)
    have = counts > 0
    return float(np.mean(sums[have] / counts[have])) if have.any() else float("nan")


def ladder_table(inputs, ctx) -> pd.DataFrame:
    """Section 3: nDCG@10 per domain and macro over domains, and the share of turns with a gold
    document in the top k, per slice and rung (every rung, the retrieval-only ones too: the
    Query2doc-only check of §3), with percentile intervals from resampling the turns (``boot``;
    the macro mean recomputed in each resample); with each fused rung's weights and their
    source."""
    from convrag.io import read_json
    from convrag.stats.bootstrap import bootstrap_ci, bootstrap_statistic

    c = load_contexts(inputs)
    boot = ctx.get("boot") or {}
    kw = {"n_resamples": int(boot.get("n_resamples", 1000)), "seed": int(boot.get("seed", 0))}
    weights = {(Path(p).parent.name, Path(p).stem): read_json(p) for p in _paths(inputs.get("weights"))}
    rows = []
    for s, ladder in ctx["ladders"].items():
        for r in ladder:
            sub = c[(c["slice"] == s) & (c["set"] == r)]
            if sub.empty:
                continue
            per_domain = sub.groupby("domain")["ndcg10"].mean()
            nd = sub["ndcg10"].to_numpy(float)
            codes = pd.factorize(sub["domain"].astype(str))[0]
            ci = bootstrap_statistic([nd, codes], _macro, **kw)
            hit = bootstrap_ci((~sub["no_gold"].astype(bool)).to_numpy(float), **kw)
            w = weights.get((s, r))
            rows.append(dict(slice=s, rung=r, turns=len(sub), ndcg10_macro=float(per_domain.mean()),
                             ndcg10_macro_ci_low=ci["ci_low"], ndcg10_macro_ci_high=ci["ci_high"],
                             gold_in_topk=hit["mean"], gold_in_topk_ci_low=hit["ci_low"],
                             gold_in_topk_ci_high=hit["ci_high"],
                             **{f"ndcg10_{d}": float(v) for d, v in per_domain.items()},
                             weights=None if w is None else " ".join(f"{n}={x:.2f}" for n, x in
                                                                    zip(w["components"], w["weights"])),
                             weights_source=None if w is None else w["source"]))
    return pd.DataFrame(rows)


DATA_COLUMNS = ["slice", "domain", "turns", "dialogues", "turns_per_dialogue_min", "turns_per_dialogue_max",
                "corpus_documents", "corpus_documents_min", "corpus_documents_max", "contexts_judged", "sets_judged"]


def data_table(inputs, ctx) -> pd.DataFrame:
    """Section 3's data (and §4.4's for MTRAG): per slice and domain, then the slice as a whole
    (domain ``all``), the turns audited (those with gold: RECOR dev's 858, MTRAG's 777), their
    dialogues (211) and turns per dialogue (3-5), the documents of the domain's corpus (16k-121k;
    from the corpus's gold check, ``gold`` reports; the whole slice: their total, fewest and
    most) and the contexts the judges label for the paper's analyses: the analysed rungs' and
    the gold contexts (858 x 5 = 4,290). Dialogues are counted per domain (an id may repeat
    across domains)."""
    from convrag.io import read_json

    c = load_contexts(inputs)
    docs = {}
    for p in _paths(inputs.get("gold")):
        rep = read_json(p)
        docs[(str(rep.get("benchmark")), str(rep.get("domain")))] = rep.get("passages")
    rows = []
    for s, ladder in ctx["ladder"].items():
        cs = c[c["slice"] == s]
        turns = cs[cs["set"] == "gold"]
        if turns.empty:
            continue
        judged = [*ladder, "gold"]
        bench = ctx.get("benchmarks", {}).get(s)

        def row(domain, t, sub):
            per = t.groupby(t["domain"].astype(str) + "/" + t["dialogue"].astype(str)).size()
            n_docs = [docs.get((str(bench), str(d))) for d in sorted(set(t["domain"].astype(str)))]
            n_docs = [x for x in n_docs if x is not None]
            return {"slice": s, "domain": domain, "turns": int(len(t)), "dialogues": int(len(per)),
                    "turns_per_dialogue_min": int(per.min()), "turns_per_dialogue_max": int(per.max()),
                    "corpus_documents": float(sum(n_docs)) if n_docs else float("nan"),
                    "corpus_documents_min": float(min(n_docs)) if n_docs else float("nan"),
                    "corpus_documents_max": float(max(n_docs)) if n_docs else float("nan"),
                    "contexts_judged": int(sub["set"].isin(judged).sum()), "sets_judged": " ".join(judged)}
        for d in sorted(set(turns["domain"].astype(str))):
            rows.append(row(d, turns[turns["domain"].astype(str) == d], cs[cs["domain"].astype(str) == d]))
        rows.append(row("all", turns, cs))
    return pd.DataFrame(rows, columns=DATA_COLUMNS)


def _frames(inputs, ctx, reads=False):
    c = load_contexts(inputs)
    out = [c, load_labels(inputs, ctx)]
    return (*out, load_reads(inputs, (ctx.get("answer_judges") or [None])[0])) if reads else tuple(out)


def primary_for(labels: pd.DataFrame, ctx: dict, slice_: str) -> str:
    """The slice's primary labeller: the configured one where it labelled the slice (the world's
    ground truth exists only on a generated benchmark), else the first content judge."""
    has = labels[(labels["slice"] == slice_) & (labels["labeller"] == ctx["primary"])]
    return ctx["primary"] if not has.empty else ctx["labellers"][0]


def per_slice(fn, frames: tuple, ctx: dict) -> pd.DataFrame:
    """``fn`` on each slice's rows with that slice's primary labeller, concatenated."""
    labels = frames[1]
    parts = []
    for s in ctx["ladders"]:
        sub = [f[f["slice"] == s] for f in frames]
        parts.append(fn(*sub, {**ctx, "primary": primary_for(labels, ctx, s)}))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else fn(*[f.iloc[0:0] for f in frames], ctx)


def _lq(fn_name):
    def build(inputs, ctx):
        from convrag.studies.worse_labels import label_quality

        return per_slice(getattr(label_quality, fn_name), _frames(inputs, ctx), ctx)
    return build


def _ab(fn_name):
    def build(inputs, ctx):
        from convrag.studies.worse_labels import abstention

        return per_slice(getattr(abstention, fn_name), _frames(inputs, ctx, reads=True), ctx)
    return build


def _table3(inputs, ctx):
    from convrag.studies.worse_labels import abstention, label_quality

    s = ctx["replication_slice"]
    c, lab, rd = _frames(inputs, ctx, reads=True)
    if s is None:
        return label_quality.table3(c.iloc[0:0], lab.iloc[0:0], ctx)
    c, lab, rd = c[c["slice"] == s], lab[lab["slice"] == s], rd[rd["slice"] == s]
    ctx = {**ctx, "primary": primary_for(lab, ctx, s)}
    t = label_quality.table3(c, lab, ctx)
    if t.empty or not ctx["readers"]:
        return t
    au = abstention.auroc_columns(c, lab, rd, ctx, ctx["readers"][0], slice=s)
    return t.merge(au, on=["slice", "rung"], how="left", suffixes=("", "_auroc"))


def _judge_frames(inputs, ctx):
    """(contexts, labels, reads of each answer judge...) and the judges, in the config's order."""
    judges = list(ctx.get("answer_judges") or [])
    c, lab = _frames(inputs, ctx)
    return (c, lab, *[load_reads(inputs, j) for j in judges]), judges


def _answer_judges_table(inputs, ctx):
    from convrag.studies.worse_labels import answer_judges as AJ

    frames, judges = _judge_frames(inputs, ctx)

    def fn(*args):
        c, lab, *reads, cx = args
        return AJ.answer_judges(c, lab, dict(zip(judges, reads)), cx)
    return per_slice(fn, frames, ctx)


def _judge_survival(inputs, ctx):
    """The refusal-based rows of the enumerated comparisons (``followups.changed_all``, qrels -> the
    primary content label) checked under each answer judge."""
    from convrag.studies.worse_labels import answer_judges as AJ
    from convrag.studies.worse_labels import followups

    _, judges = _judge_frames(inputs, ctx)
    changed = per_slice(followups.changed_all, _frames(inputs, ctx, reads=True), ctx)
    return AJ.judge_survival(changed, _answer_judges_table(inputs, ctx), judges)


NO_GOLD = "no gold (qrels label)"


def _fig2a(df, stem):
    """The paper's pair per rung: the share of contexts without gold (the qrels label, one black
    line) beside each labeller's share judged insufficient, against the rung's nDCG@10; each
    rung's name above its points."""
    from convrag.report import figures

    rungs = df.drop_duplicates(["slice", "rung"])
    d = pd.concat([df[["slice", "rung", "labeller", "ndcg10", "share_insufficient"]],
                   rungs.assign(labeller=NO_GOLD, share_insufficient=rungs["share_no_gold"])[
                       ["slice", "rung", "labeller", "ndcg10", "share_insufficient"]]], ignore_index=True)
    figures.lines(d, stem, x="ndcg10", y="share_insufficient", group=["labeller"], panel="slice",
                  xlabel="nDCG@10 of the rung's first stage", legend_title="labeller",
                  ylabel='share insufficient ("no"; no gold for the qrels label)', ylim=(0, 1.08),
                  styles={(NO_GOLD,): {"color": "black", "ls": "-", "marker": "s", "lw": 2.2, "ms": 5}},
                  point_labels="rung")


def _fig2b(df, stem):
    from convrag.report import figures

    figures.grouped_bars(df, stem, x="rung", hue="labeller", y="precision", lo="precision_ci_low",
                         hi="precision_ci_high", panel="slice",
                         ylabel='precision of "no gold"', ylim=(0, 1))


def _signed(v: float) -> str:
    """A difference as the paper prints it: sign, no leading zero (+.10, −.08)."""
    t = f"{abs(v):.2f}".lstrip("0") if abs(v) < 1 else f"{abs(v):.2f}"
    return ("−" if round(v, 2) < 0 else "+") + t if round(v, 2) != 0 else t


def _fig3(df, stem):
    """AUROC bars per rung and label, and above each rung the paper's number: content minus
    qrels with its paired interval, bold when the interval excludes zero."""
    from convrag.report import figures

    restricted = df["restricted"].astype(bool)
    gaps = df[(df["measure"] == "gap") & ~restricted]
    df = df[(df["measure"] == "auroc") & ~restricted]
    # one panel per slice and reader: the slices' ladders share rung names (dense), which must not pool
    panel = df["slice"] + " / " + df["reader"]
    notes, judges = {}, list(dict.fromkeys(gaps["label"]))
    for _, g in gaps.iterrows():
        if pd.isna(g["value"]):
            continue
        text = "Δ " + _signed(g["value"])
        has_ci = pd.notna(g["ci_low"]) and pd.notna(g["ci_high"])
        if has_ci:
            text += f"\n[{_signed(g['ci_low'])}, {_signed(g['ci_high'])}]"
        notes[(f"{g['slice']} / {g['reader']}", g["rung"])] = (
            text, bool(has_ci and (g["ci_low"] > 0 or g["ci_high"] < 0)))
    label = (f"Δ above each rung: AUROC under the content label of {', '.join(map(str, judges))} minus under the "
             f"qrels label, with its paired 95% bootstrap interval; bold where the interval excludes zero."
             if notes else "")
    figures.grouped_bars(df.assign(panel=panel), stem, x="rung", hue="label", y="value", panel="panel",
                         ylabel="AUROC of p(answerable)", ylim=(0, 1.12), xlabel="rung (retriever)",
                         legend_title="label", hue_labels={"qrels": "qrels (all vs none)"}, notes=notes,
                         notes_label=label)


def _judge_corrected(inputs, ctx):
    from convrag.studies.worse_labels.corrected import judge_corrected

    c, lab = _frames(inputs, ctx)
    return judge_corrected(c, lab, ctx)


def _followup(fn_name):
    def build(inputs, ctx):
        from convrag.studies.worse_labels import followups

        return per_slice(getattr(followups, fn_name), _frames(inputs, ctx), ctx)
    return build


def _false_miss_origin(inputs, ctx):
    """Also reads MTRAG's annotator feedback when the artifact ``human_feedback`` is given (parquets
    of ``followups.human_feedback``); without it the feedback-based origins are NaN."""
    from convrag.studies.worse_labels import followups

    fb = [pd.read_parquet(p) for p in _paths(inputs.get("human_feedback"))]
    fb = pd.concat(fb, ignore_index=True) if fb else None
    return per_slice(lambda c, lab, cx: followups.false_miss_origin(c, lab, cx, fb), _frames(inputs, ctx), ctx)


def load_human_labels(inputs) -> pd.DataFrame:
    """The content judge's labels of MTRAG's single human-judged passages (``human_labels``): one
    row per item, task_id ``<task_id>|<doc_id>``, set ``human``, label None when unparsable."""
    from convrag.errors import DataError
    from convrag.io import read_jsonl

    rows = []
    for p in _paths(inputs.get("human_labels")):
        for v in read_jsonl(p):
            set_, task = _split(v["item_id"])
            if set_ != "human":
                raise DataError(f"{p}: item {v['item_id']} is not a human-judged passage (set {set_})")
            val = v["value"] if isinstance(v["value"], dict) else {}
            rows.append(dict(slice="human", task_id=task, set=set_, labeller=v["judge_model"], label=val.get("label"),
                             support=list(val.get("support") or [])))
    return pd.DataFrame(rows, columns=LABEL_COLUMNS)


def _mtrag_human(inputs, ctx):
    """Section 4.2: the content judge's "yes" share on the single passages MTRAG's annotators
    accepted and rejected (``followups.mtrag_human``)."""
    from convrag.studies.worse_labels import followups

    fb = [pd.read_parquet(p) for p in _paths(inputs.get("human_feedback"))]
    fb = pd.concat(fb, ignore_index=True) if fb else pd.DataFrame(columns=followups.HUMAN_COLUMNS)
    return followups.mtrag_human(fb, load_human_labels(inputs), ctx)


def _agreement(inputs, ctx):
    """``label_quality.agreement`` and the audit's two procedures compared (``followups.audit_procedures``)."""
    from convrag.io import read_jsonl
    from convrag.studies.worse_labels import followups

    out = _lq("agreement")(inputs, ctx)
    recs = [{**r, "slice": Path(p).stem} for p in _paths(inputs.get("audit")) for r in read_jsonl(p)]
    extra = followups.audit_procedures(pd.DataFrame(recs)) if recs and ctx.get("audit", True) else None
    return out if extra is None or extra.empty else pd.concat([out, extra], ignore_index=True)


def _changed_all(inputs, ctx):
    """The enumerated comparisons under the qrels label and the primary content label; with two content
    judges, the same comparisons again under the first and the second (the paper's judge swap,
    ``base_label`` / ``other_label`` say which rows are which)."""
    from convrag.studies.worse_labels import followups

    frames = _frames(inputs, ctx, reads=True)
    out = per_slice(followups.changed_all, frames, ctx)
    pair = followups.swap_pair(ctx)
    if pair is None:
        return out
    swap = per_slice(lambda c, lab, rd, cx: followups.changed_all(c, lab, rd, cx, base=pair[0], other=pair[1]),
                     frames, ctx)
    return pd.concat([out, swap], ignore_index=True)


def _followup_targets():
    """followups.py's tables: ladder_steps and dialogue_tied read contexts (no_gold, dialogue,
    domain, doc_classes) and labels (label, support); false_miss_origin also doc_ids;
    changed_conclusions also top1_z and the reads (status, p_answerable)."""
    base = ("gold", "contexts", "labels", "audit")
    return [Target("ladder_steps", "table", _followup("ladder_steps"), inputs=base),
            Target("dialogue_tied", "table", _followup("dialogue_tied"), inputs=base),
            Target("false_miss_origin", "table", _false_miss_origin, inputs=(*base, "human_feedback")),
            Target("mtrag_human", "table", _mtrag_human, inputs=("human_feedback", "human_labels")),
            Target("changed_conclusions", "table", _changed_all, inputs=(*base, "reads"))]


def _explained(t: Target) -> Target:
    """``t`` whose build also records why its blank cells are blank (``blank_reasons``), on the
    frame it returns, after every merge and concatenation."""
    from dataclasses import replace

    from convrag.studies.worse_labels.blank_reasons import REASONS, attach

    if t.name not in REASONS:
        return t
    return replace(t, build=lambda inputs, ctx: attach(t.name, t.build(inputs, ctx), inputs, ctx))


TARGETS = {t.name: _explained(t) for t in [
    Target("ladder_retrieval", "table", ladder_table, inputs=("gold", "contexts", "weights")),
    Target("data", "table", data_table, inputs=("gold", "contexts")),
    Target("figure2a_insufficiency", "figure", _lq("figure2a"), _fig2a, inputs=("gold", "contexts", "labels", "audit")),
    Target("figure2b_precision", "figure", _lq("figure2b"), _fig2b, inputs=("gold", "contexts", "labels", "audit")),
    Target("table1_labellers", "table", _lq("table1"), inputs=("gold", "contexts", "labels", "audit")),
    Target("copies", "table", _lq("copies"), inputs=("gold", "contexts", "labels", "audit")),
    Target("negative_control", "table", _lq("negative_control"), inputs=("gold", "contexts", "labels", "audit")),
    Target("agreement", "table", _agreement, inputs=("gold", "contexts", "labels", "audit")),
    Target("evidence", "table", _lq("evidence"), inputs=("gold", "contexts", "labels", "audit")),
    Target("table2_false_misses", "table", _ab("table2"), inputs=("gold", "contexts", "labels", "audit", "reads", "correctness")),
    Target("figure3_auroc", "figure", _ab("figure3"), _fig3, inputs=("gold", "contexts", "labels", "audit", "reads")),
    Target("contrast_2b_2c", "table", _ab("contrast_2b_2c"), inputs=("gold", "contexts", "labels", "audit", "reads")),
    Target("score_detectors", "table", _ab("score_detectors"), inputs=("gold", "contexts", "labels", "audit", "reads")),
    Target("kitagawa", "table", _ab("kitagawa_table"), inputs=("gold", "contexts", "labels", "audit", "reads")),
    Target("answer_judges", "table", _answer_judges_table,
           inputs=("gold", "contexts", "labels", "audit", "reads", "correctness", "correctness_compared")),
    Target("judge_survival", "table", _judge_survival,
           inputs=("gold", "contexts", "labels", "audit", "reads", "correctness", "correctness_compared")),
    Target("table3_mtrag", "table", _table3, inputs=("gold", "contexts", "labels", "audit", "reads")),
    Target("judge_corrected", "table", _judge_corrected, inputs=("gold", "contexts", "labels", "audit")),
    *_followup_targets(),
    reproduction_target("worse_labels"),
]}

__all__ = ["TARGETS", "load_contexts", "load_labels", "load_reads", "np"]
