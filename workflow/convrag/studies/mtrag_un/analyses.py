"""mtrag_un analyses: the benchmark's statistics, the retrieval tables (Table 2: Recall and
nDCG per domain with the macro average over domains the paper reports and the task-weighted
"all" row the official script computes; Table 3: standalone vs non-standalone), and the
paired comparison of query policies.

Retrieval scores are per task (ir_measures on the TREC runs): a task whose ranking is empty
scores 0 and counts; tasks without qrels (unanswerable, underspecified) are not retrieval
tasks, as in the paper.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from convrag.stats.bootstrap import paired_cluster_bootstrap
from convrag.studies.mtrag_un.plan import POLICY_LABELS


SCORE_LABELS = ("standalone", "answerability", "multi_turn")  # the task labels Table 2's breakdowns read


def score_runs(tasks, runs: list[dict], measures: list[str]) -> pd.DataFrame:
    """One row per (task, retriever, policy, measure) with MTRAG-UN's task labels (what the
    rule's ``convrag score-retrieval --labels`` writes)."""
    from convrag.metrics.registry import score_task_runs

    return score_task_runs(tasks, runs, measures, labels=SCORE_LABELS)


def retrieval_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Table 2: mean of each measure per (retriever, policy, domain), then the macro average
    over domains (the paper's) and the task-weighted average (the official script's 'all')."""
    if scores.empty:
        return pd.DataFrame()
    per = (scores.groupby(["retriever", "policy", "domain", "measure"], sort=True)
           .agg(tasks=("task_id", "nunique"), value=("value", "mean")).reset_index())
    macro = per.groupby(["retriever", "policy", "measure"], sort=True).agg(tasks=("tasks", "sum"),
                                                                           value=("value", "mean")).reset_index()
    weighted = (scores.groupby(["retriever", "policy", "measure"], sort=True)
                .agg(tasks=("task_id", "nunique"), value=("value", "mean")).reset_index())
    out = pd.concat([per, macro.assign(domain="macro"), weighted.assign(domain="all (weighted)")], ignore_index=True)
    wide = out.pivot_table(index=["retriever", "policy", "domain", "tasks"], columns="measure", values="value",
                           sort=False)[list(scores.measure.unique())].reset_index()
    wide.columns.name = None
    wide.insert(2, "query", wide.policy.map(POLICY_LABELS).fillna(wide.policy))
    return wide


MISSING_RANKING = "zero-scored, counted"  # the mtrag_retrieval table's statement of the official rule


def official_retrieval_table(scores: pd.DataFrame, empty: dict | None = None) -> pd.DataFrame:
    """MTRAG's retrieval numbers (target mtrag_retrieval) aggregated as IBM's
    ``scripts/evaluation/run_retrieval_eval.py`` does: per domain (the script's collection) the
    mean over its scored tasks, rounded to 5 decimals; ``all (weighted)`` weights each domain's
    rounded mean by its number of tasks (the script's "all" row); ``macro`` is the plain mean of the
    domain means (what the papers call a macro average). ``scores``: per-task rows of
    ``score_runs``; ``empty``: (retriever, policy, domain) -> tasks whose ranking was empty (no line
    in the run), already zero-scored and counted in ``scores``, as the script scores a task with an
    empty context list (it skips only tasks absent from its input, which the retrieve stage never
    leaves out)."""
    if scores.empty:
        return pd.DataFrame()
    empty = empty or {}
    measures = list(scores.measure.unique())
    per = (scores.groupby(["retriever", "policy", "domain", "measure"], sort=True)
           .agg(tasks=("task_id", "nunique"), value=("value", "mean")).reset_index())
    per["value"] = per.value.round(5)
    per["empty_rankings"] = [empty.get((r, p, d), 0) for r, p, d in zip(per.retriever, per.policy, per.domain)]
    keys = ["retriever", "policy", "measure"]
    macro = per.groupby(keys, sort=True).agg(tasks=("tasks", "sum"), value=("value", "mean"),
                                             empty_rankings=("empty_rankings", "sum")).reset_index()
    weighted = (per.assign(w=per.value * per.tasks).groupby(keys, sort=True)
                .agg(tasks=("tasks", "sum"), w=("w", "sum"), empty_rankings=("empty_rankings", "sum")).reset_index())
    weighted = weighted.assign(value=weighted.w / weighted.tasks).drop(columns="w")
    out = pd.concat([per, macro.assign(domain="macro"), weighted.assign(domain="all (weighted)")], ignore_index=True)
    wide = out.pivot_table(index=["retriever", "policy", "domain", "tasks", "empty_rankings"], columns="measure",
                           values="value", sort=False)[measures].reset_index()
    wide.columns.name = None
    wide.insert(2, "query", wide.policy.map(POLICY_LABELS).fillna(wide.policy))
    return wide.assign(missing_ranking=MISSING_RANKING)


def standalone_table(scores: pd.DataFrame, measure: str = "R@5") -> pd.DataFrame:
    """Table 3: ``measure`` on standalone vs non-standalone tasks, macro over domains."""
    s = scores[(scores.measure == measure) & scores.standalone.notna()]
    if s.empty:
        return pd.DataFrame()
    s = s.assign(standalone=s.standalone.map(lambda v: "standalone" if v else "non-standalone"))
    per = s.groupby(["retriever", "policy", "standalone", "domain"], sort=True).agg(
        tasks=("task_id", "nunique"), value=("value", "mean")).reset_index()
    out = per.groupby(["retriever", "policy", "standalone"], sort=True).agg(
        tasks=("tasks", "sum"), value=("value", "mean")).reset_index()
    wide = out.pivot_table(index=["retriever", "policy"], columns="standalone", values="value").reset_index()
    wide.columns.name = None
    counts = out.pivot_table(index=["retriever", "policy"], columns="standalone", values="tasks").astype(int)
    counts = counts.add_suffix("_tasks")
    return wide.merge(counts.reset_index(), on=["retriever", "policy"]).assign(measure=measure)


def policy_gain(scores: pd.DataFrame, base: str, other: str, boot: dict) -> pd.DataFrame:
    """``other`` minus ``base`` policy per (retriever, measure) on the same tasks, with a paired
    bootstrap that resamples conversations (turns of one conversation are not independent)."""
    rows = []
    for (ret, m), g in scores.groupby(["retriever", "measure"], sort=True):
        a = g[g.policy == base].set_index("task_id")
        b = g[g.policy == other].set_index("task_id")
        common = a.index.intersection(b.index)
        if common.empty:
            continue
        res = paired_cluster_bootstrap(b.loc[common, "value"].to_numpy(), a.loc[common, "value"].to_numpy(),
                                       a.loc[common, "conversation_id"].to_numpy(),
                                       n_resamples=boot["n_resamples"], seed=boot["seed"])
        rows.append({"retriever": ret, "measure": m, "base": base, "other": other, "tasks": res["n"],
                     "conversations": res["n_clusters"], f"{base}": res["mean_b"], f"{other}": res["mean_a"],
                     "gain": res["mean_diff"], "ci_low": res["ci_low"], "ci_high": res["ci_high"]})
    return pd.DataFrame(rows)


def corpus_statistics(tasks, corpora: dict[str, str]) -> pd.DataFrame:
    """Table 1: per domain, passages and their length, conversations, tasks, tasks with qrels."""
    from convrag.io import iter_jsonl

    rows = []
    for dom, path in corpora.items():
        words = [len(rec.get("text", "").split()) for _, rec in iter_jsonl(path)]
        ts = [t for t in tasks if t.labels.get("domain") == dom]
        rows.append({"domain": dom, "passages": len(words), "mean_words_per_passage": float(np.mean(words)) if words else 0.0,
                     "conversations": len({t.conversation_id for t in ts}), "tasks": len(ts),
                     "tasks_with_qrels": sum(1 for t in ts if t.gold_docs),
                     "mean_gold_per_task": float(np.mean([len(t.gold_docs) for t in ts if t.gold_docs]))
                     if any(t.gold_docs for t in ts) else 0.0})
    return pd.DataFrame(rows)


STATISTICS_COLUMNS = ["benchmark", "role", "statistic", "value", "count", "of"]


def benchmark_statistics(tasks, name: str = "", compared: dict | None = None) -> pd.DataFrame:
    """The benchmark's size and task mix (§2, §2.3, §3.2), one row per benchmark and statistic
    (``benchmark``: its config name; ``role``: ``studied`` for the study's benchmark ``tasks``,
    ``compared`` for each benchmark of ``compared`` (name -> its tasks: the earlier MTRAG the
    paper compares with, ``mtrag_un.statistics_benchmarks``); ``value``; ``count`` = the
    numerator of a share, ``of`` = its denominator). Every benchmark is counted the same way,
    over all its tasks (MTRAG: one task per user turn, first turns included):

    - tasks, conversations;
    - turns: user questions, per conversation its latest task's turn (the released conversations
      end at their task); utterances: user and agent messages up to and including that question;
      mean_turns_per_conversation, mean_utterances_per_conversation;
    - retrieval_tasks: tasks with gold passages (answerable and partial: the retrieval tasks);
    - shares of tasks: unanswerable_or_partial, clarification (multi-turn type Clarification),
      underspecified, first_turn (turn 1), nonstandalone (of the tasks with a standalone label;
      NaN when none has one, as in the released MTRAG-UN files; MTRAG's conversations carry one
      only on the few turns with a rewritten alternative, 7 of 842, so there it is no share of
      the benchmark's questions: ``of`` says how many were labelled).
    """
    parts = [_statistics(tasks).assign(benchmark=name, role="studied")]
    parts += [_statistics(ts).assign(benchmark=n, role="compared") for n, ts in (compared or {}).items()]
    out = pd.concat(parts, ignore_index=True)[STATISTICS_COLUMNS]
    # a share row always has its denominator (``_statistics``' share()); counts and means have none
    not_share = (lambda row: "a count or mean, not a share (count / of: a share's numerator and denominator)"
                 if pd.isna(row["of"]) else None)
    out.attrs["blank_reasons"] = {
        "count": not_share, "of": not_share,
        "value": lambda row: ("a share over 0 tasks (of = 0)" if row["of"] == 0
                              else "a mean over no conversations" if row["statistic"].startswith("mean_") else None)}
    return out


def _statistics(tasks) -> pd.DataFrame:
    """One benchmark's rows of ``benchmark_statistics``."""
    rows = [{"statistic": "tasks", "value": float(len(tasks))}]
    latest: dict = {}
    for t in tasks:
        if t.conversation_id not in latest or t.turn > latest[t.conversation_id].turn:
            latest[t.conversation_id] = t
    turns = [t.turn for t in latest.values()]
    utter = [len(t.history) + 1 for t in latest.values()]
    rows += [{"statistic": "conversations", "value": float(len(latest))},
             {"statistic": "turns", "value": float(sum(turns))},
             {"statistic": "utterances", "value": float(sum(utter))},
             {"statistic": "mean_turns_per_conversation", "value": float(np.mean(turns)) if turns else np.nan},
             {"statistic": "mean_utterances_per_conversation", "value": float(np.mean(utter)) if utter else np.nan},
             {"statistic": "retrieval_tasks", "value": float(sum(1 for t in tasks if t.gold_docs))}]

    def share(name, hits, of):
        rows.append({"statistic": name, "value": hits / of if of else np.nan, "count": hits, "of": of})

    lab = [t.labels for t in tasks]
    share("unanswerable_or_partial", sum(1 for x in lab if x.get("answerability") in ("UNANSWERABLE", "PARTIAL")),
          len(tasks))
    share("clarification", sum(1 for x in lab if x.get("multi_turn") == "Clarification"), len(tasks))
    share("underspecified", sum(1 for x in lab if x.get("answerability") == "UNDERSPECIFIED"), len(tasks))
    share("first_turn", sum(1 for t in tasks if t.turn == 1), len(tasks))
    labelled = [x["standalone"] for x in lab if x.get("standalone") is not None]
    share("nonstandalone", sum(1 for v in labelled if not v), len(labelled))
    return pd.DataFrame(rows, columns=["statistic", "value", "count", "of"])


def task_distribution(tasks, facets=("answerability", "multi_turn", "question_type", "domain")) -> pd.DataFrame:
    """Figure 2: the share of tasks per value of each label."""
    rows = []
    for f in facets:
        vals = pd.Series([str(t.labels.get(f)) for t in tasks])
        for v, n in vals.value_counts().sort_index().items():
            rows.append({"facet": f, "value": v, "tasks": int(n), "share": n / len(tasks)})
    return pd.DataFrame(rows)


def turn_distribution(tasks) -> pd.DataFrame:
    """Figure 4: tasks per conversational turn, by answerability."""
    df = pd.DataFrame([{"turn": t.turn, "answerability": t.labels.get("answerability")} for t in tasks])
    if df.empty:
        return df
    return df.groupby(["turn", "answerability"], sort=True).size().rename("tasks").reset_index()


# ---- generation ---------------------------------------------------------------------------------

GEN_METRICS = ("RB_alg", "RB_llm", "RL_F")  # conditioned, as the official scorer reports them


def read_generation(paths) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


def generation_table(gen: pd.DataFrame, bertscore=None) -> pd.DataFrame:
    """Table 4: per (model, setting) the task mean of each conditioned metric (NaN, e.g. a
    faithfulness without statements, left out of the mean and counted), their harmonic mean
    (the MTRAGEval ranking score), the raw ROUGE-L and the IDK rate."""
    from convrag.metrics.mtrag import harmonic_mean

    if gen.empty:
        return pd.DataFrame()
    rows = []
    for (model, setting), g in gen.groupby(["model", "setting"], sort=True):
        row = {"model": model, "setting": setting, "tasks": len(g)}
        present = [m for m in GEN_METRICS if m in g]
        for m in present:
            row[m] = float(g[m].mean())
            row[f"{m}_nan"] = int(g[m].isna().sum())
        row["harmonic_mean"] = harmonic_mean([row[m] for m in present]) if present else float("nan")
        row["RougeL_raw"] = float(g["RougeL"].mean())
        row["idk_rate"] = float((g["idk"] == "1").mean())
        if "rb_llm_fallback" in g:  # ratings the parser could not read (scored 0.5, as the official parser does)
            row["RB_llm_fallbacks"] = int(g["rb_llm_fallback"].fillna(False).sum())
        if "faithfulness_status" in g:
            row["RL_F_unparsed"] = int(g["faithfulness_status"].str.startswith("unparsed").sum())
        row["judge_model"] = ", ".join(sorted(g["judge_model"].unique())) if "judge_model" in g else None
        if bertscore is not None:
            from convrag.studies.mtrag_un.evaluate import bertscore_config

            row["bertscore"] = bertscore_config(bertscore)["model_type"]
        rows.append(row)
    return pd.DataFrame(rows)


def setting_gain(gen: pd.DataFrame, boot: dict, base: str = "reference", other: str = "rag") -> pd.DataFrame:
    """RAG minus reference per (model, metric) on the same tasks, with a paired bootstrap over
    conversations (the paper: reference > RAG for every model)."""
    rows = []
    if gen.empty or not {base, other} <= set(gen.setting):
        return pd.DataFrame()
    for model, g in gen.groupby("model", sort=True):
        for m in GEN_METRICS:
            if m not in g:
                continue
            a = g[g.setting == base].set_index("task_id")[[m, "conversation_id"]].dropna()
            b = g[g.setting == other].set_index("task_id")[[m]].dropna()
            common = a.index.intersection(b.index)
            if common.empty:
                continue
            res = paired_cluster_bootstrap(b.loc[common, m].to_numpy(), a.loc[common, m].to_numpy(),
                                           a.loc[common, "conversation_id"].to_numpy(),
                                           n_resamples=boot["n_resamples"], seed=boot["seed"])
            rows.append({"model": model, "metric": m, "tasks": res["n"], "conversations": res["n_clusters"],
                         base: res["mean_b"], other: res["mean_a"], "gain": res["mean_diff"],
                         "ci_low": res["ci_low"], "ci_high": res["ci_high"]})
    return pd.DataFrame(rows)


def by_label(gen: pd.DataFrame, label: str, metric: str = "RB_alg", setting: str = "reference") -> pd.DataFrame:
    """Figure 3: ``metric`` in ``setting`` per value of ``label`` (answerability, multi-turn
    type, domain) and model, with the task count of each bar."""
    g = gen[(gen.setting == setting)] if not gen.empty else gen
    if g.empty or label not in g:
        return pd.DataFrame()
    g = g.assign(**{label: g[label].astype(str)})
    return (g.groupby(["model", label], sort=True).agg(tasks=("task_id", "nunique"), value=(metric, "mean"))
            .reset_index().assign(metric=metric, setting=setting))


NEW_DOMAINS = ("banking", "telco")  # Figure 3c's named bars; the others are shown as their mean
OTHER_DOMAINS = "others (mean)"


def by_domain(gen: pd.DataFrame, metric: str = "RB_alg", setting: str = "reference") -> pd.DataFrame:
    """Figure 3c: ``by_label`` per domain plus, per model, the bar the paper shows beside Banking
    and Telco: the unweighted mean of the per-domain values of the other domains (``OTHER_DOMAINS``;
    ``tasks`` = their sum), whichever of them the run has."""
    df = by_label(gen, "domain", metric, setting)
    if df.empty:
        return df
    rest = df[~df.domain.isin(NEW_DOMAINS)]
    avg = rest.groupby("model", sort=True).agg(tasks=("tasks", "sum"), value=("value", "mean")).reset_index()
    return pd.concat([df, avg.assign(domain=OTHER_DOMAINS, metric=metric, setting=setting)[df.columns]],
                     ignore_index=True)


def underspecified_types(gen: pd.DataFrame) -> pd.DataFrame:
    """Table 5: the type of each model's replies to UNDERSPECIFIED questions by the
    underspecified-type judge (asks what the user means / answers several readings / answers one),
    per model and setting: tasks of each type and their share of the validly judged tasks (every
    type listed, 0 included); ``judged`` = the UNDERSPECIFIED tasks, ``invalid`` = replies of the
    judge naming no type or several (recorded, counted, left out of the shares)."""
    from convrag.studies.mtrag_un.judges import UNDERSPECIFIED_TYPES

    if gen.empty or "underspecified_type" not in gen:
        return pd.DataFrame()
    u = gen[gen.answerability == "UNDERSPECIFIED"]
    rows = []
    for (model, setting), g in u.groupby(["model", "setting"], sort=True):
        valid = g.underspecified_type.dropna()
        for typ in UNDERSPECIFIED_TYPES:
            n = int((valid == typ).sum())
            rows.append({"model": model, "setting": setting, "response_type": typ, "tasks": n,
                         "share": n / len(valid) if len(valid) else np.nan, "judged": len(g),
                         "invalid": int(len(g) - len(valid))})
    return pd.DataFrame(rows)


def underspecified_responses(gen: pd.DataFrame) -> pd.DataFrame:
    """The underspecified outcomes (the official verdicts, not Table 5's taxonomy): how each
    model responds to UNDERSPECIFIED questions: asks for clarification (the clarification judge
    said yes), says it cannot answer (IDK yes), or answers anyway (everything else, including
    unparsed verdicts, which are also counted)."""
    u = gen[gen.answerability == "UNDERSPECIFIED"] if not gen.empty else gen
    if u.empty:
        return pd.DataFrame()

    def kind(r):
        if r.clarification == 1:
            return "asks for clarification"
        if r.idk == "1":
            return "says it cannot answer"
        return "answers"

    u = u.assign(response_type=u.apply(kind, axis=1), unparsed=u.clarification.isna() | (u.clarification == 0.5))
    out = (u.groupby(["model", "setting", "response_type"], sort=True).size().rename("tasks").reset_index())
    out["share"] = out.tasks / out.groupby(["model", "setting"]).tasks.transform("sum")
    unp = u.groupby(["model", "setting"]).unparsed.sum().rename("clarification_unparsed").reset_index()
    return out.merge(unp, on=["model", "setting"])
