"""The named tables and figures of mtrag_un (captions in ``workflow/report/mtrag_un/``), named
after the paper's numbers (``../shared/reference/published/mtrag_un.yaml``)."""

from __future__ import annotations

import pandas as pd

from convrag.report.reproduction import reproduction_target
from convrag.studies.base import Target
from convrag.studies.mtrag_un import analyses as A


def _tasks(inputs):
    from convrag.records import TurnTask, read_records

    return read_records(inputs["tasks"], TurnTask)


def _benchmark_statistics(inputs, ctx):
    """The study's benchmark's statistics, then those of each ``statistics_benchmarks`` entry
    (MTRAG's conversations: the numbers the paper compares with)."""
    from convrag.records import TurnTask, read_records

    names, paths = ctx.get("statistics_benchmarks") or [], inputs.get("statistics_tasks") or []
    if len(names) != len(paths):
        from convrag.errors import DataError

        raise DataError(f"benchmark_statistics: {len(paths)} task files for the statistics benchmarks "
                        f"{', '.join(names) or '(none)'}")
    return A.benchmark_statistics(_tasks(inputs), ctx.get("benchmark", ""),
                                  {n: read_records(p, TurnTask) for n, p in zip(names, paths)})


def _scores(inputs):
    return pd.read_parquet(inputs["retrieval"])


def _fig_distribution(df, stem):
    from convrag.report import figures

    figures.grouped_bars(df.assign(what="tasks"), stem, x="value", hue="what", y="share", panel="facet",
                         ylabel="share of tasks", ylim=(0, 1))


def _fig_turns(df, stem):
    from convrag.report import figures

    figures.grouped_bars(df, stem, x="turn", hue="answerability", y="tasks", ylabel="tasks")


def _rewrite_gain(inputs, ctx):
    s = _scores(inputs)
    base, others = ctx["gain_base"], [p for p in ctx["policies"] if p != ctx["gain_base"]]
    if s.empty or base not in ctx["policies"] or not others:
        return pd.DataFrame()
    return pd.concat([A.policy_gain(s, base, o, ctx["boot"]) for o in others], ignore_index=True)


def _mtrag_retrieval(inputs):
    """MTRAG's retrieval tasks scored and aggregated as its official script does; empty rankings
    counted per (retriever, policy, domain) from the runs (``.../<retriever>/<policy>/<domain>.trec``)."""
    from pathlib import Path

    from convrag.metrics.retrieval import read_trec_run

    s = pd.read_parquet(inputs["mtrag_retrieval"])
    empty = {}
    for path in inputs["mtrag_retrieval_runs"]:
        retriever, policy, domain = Path(path).parts[-3], Path(path).parts[-2], Path(path).stem
        ranked = {q for q, docs in read_trec_run(path).items() if docs}
        tasks = set(s[(s.retriever == retriever) & (s.policy == policy) & (s.domain == domain)].task_id)
        empty[(retriever, policy, domain)] = len(tasks - ranked)
    return A.official_retrieval_table(s, empty)


def _gen(inputs):
    return A.read_generation(inputs["generation"])


def _fig_label(label):
    def plot(df, stem):
        from convrag.report import figures

        figures.grouped_bars(df, stem, x=label, hue="model", y="value", ylabel="RB_alg (reference setting)",
                             ylim=(0, 1))

    return plot


def _fig_human(df, stem):
    from convrag.report import figures

    figures.grouped_bars(df, stem, x="human", hue="metric", y="rho", ylabel="weighted Spearman rho", ylim=(-1, 1))


def _judge_human(inputs, ctx):
    """The project's re-scored metrics beside the official shipped ones, on the paper's subset."""
    from convrag.studies.mtrag_un.human import FIGURE5_METRICS, figure5_table

    df = pd.read_parquet(inputs["human"])
    metrics = [c for c in ("RB_alg", "RB_llm", "RL_F") if c in df] + list(FIGURE5_METRICS.values())
    return figure5_table(df, metrics, n_resamples=ctx["boot"]["n_resamples"], seed=ctx["boot"]["seed"])


def _judge_corrected(inputs, ctx):
    """Judge mean beside the prediction-powered estimate on a seeded share of human labels."""
    from convrag.studies.mtrag_un.corrected import judge_corrected_table

    p = ctx["ppi"]
    return judge_corrected_table(pd.read_parquet(inputs["human"]), labelled_share=p["labelled_share"], seed=p["seed"],
                                 alpha=p["alpha"], tuned=p["tuned"])


def _table4(inputs, ctx):
    """Table 4 with a ``flags`` column: the row's RB_llm when most of its ratings are the parser's
    0.5 fallback, and a judge under 1B parameters (issue 45: a small model's or a fallback's
    numbers say so in the table itself)."""
    from convrag.report.runnote import TINY_B

    df = A.generation_table(_gen(inputs), ctx["bertscore"])
    if df.empty:
        return df
    sizes = ctx.get("judge_sizes") or {}
    flags = []
    for r in df.itertuples():
        f = []
        fb = getattr(r, "RB_llm_fallbacks", None)
        asked = int(r.tasks) - int(getattr(r, "RB_llm_nan", 0) or 0)
        if fb is not None and pd.notna(fb) and asked and fb / asked >= 0.5:
            f.append(f"RB_llm: {int(fb)} of {asked} ratings unreadable, each scored the parser's fallback 0.5"
                     + (" (RB_llm measures nothing here)" if fb == asked else ""))
        judges = [j.strip() for j in str(getattr(r, "judge_model", "") or "").split(",") if j.strip()]
        tiny = [f"{j} ({sizes[j]:g}B)" for j in judges if sizes.get(j) is not None and sizes[j] < TINY_B]
        if tiny:
            f.append(f"judge {', '.join(tiny)} is under {TINY_B:g}B parameters: RB_llm, RL_F and the IDK verdicts "
                     f"check that the pipeline runs, not quality")
        flags.append("; ".join(f))
    return df.assign(flags=flags)


TARGETS = {t.name: t for t in [
    Target("table1_corpus_statistics", "table",
           lambda i, c: A.corpus_statistics(_tasks(i), dict(zip(c["domains"], i["corpora"]))),
           inputs=("tasks", "corpora")),
    Target("benchmark_statistics", "table", _benchmark_statistics, inputs=("tasks", "statistics_tasks")),
    Target("figure2_task_distribution", "figure", lambda i, c: A.task_distribution(_tasks(i)), _fig_distribution,
           inputs=("tasks",), model_free=True),  # the benchmark's own labels: no model's numbers
    Target("figure4_turn_distribution", "figure", lambda i, c: A.turn_distribution(_tasks(i)), _fig_turns,
           inputs=("tasks",), model_free=True),
    Target("table2_retrieval", "table", lambda i, c: A.retrieval_table(_scores(i)), inputs=("gold", "retrieval")),
    Target("table3_standalone", "table", lambda i, c: A.standalone_table(_scores(i), c["standalone_measure"]),
           inputs=("gold", "retrieval")),
    Target("rewrite_gain", "table", _rewrite_gain, inputs=("gold", "retrieval")),
    Target("mtrag_retrieval", "table", lambda i, c: _mtrag_retrieval(i),
           inputs=("mtrag_retrieval_gold", "mtrag_retrieval", "mtrag_retrieval_runs")),
    Target("table4_generation", "table", lambda i, c: _table4(i, c), inputs=("generation",)),
    Target("table4_setting_gain", "table", lambda i, c: A.setting_gain(_gen(i), c["boot"]), inputs=("generation",)),
    Target("figure3a_by_answerability", "figure", lambda i, c: A.by_label(_gen(i), "answerability"),
           _fig_label("answerability"), inputs=("generation",)),
    Target("figure3b_by_multi_turn", "figure", lambda i, c: A.by_label(_gen(i), "multi_turn"),
           _fig_label("multi_turn"), inputs=("generation",)),
    Target("figure3c_by_domain", "figure", lambda i, c: A.by_domain(_gen(i)), _fig_label("domain"),
           inputs=("generation",)),
    Target("table5_underspecified_types", "table", lambda i, c: A.underspecified_types(_gen(i)),
           inputs=("generation",)),
    Target("underspecified_outcomes", "table", lambda i, c: A.underspecified_responses(_gen(i)),
           inputs=("generation",)),
    Target("figure5_judge_human", "figure", _judge_human, _fig_human, inputs=("human",)),
    Target("judge_corrected", "table", _judge_corrected, inputs=("human",)),
    reproduction_target("mtrag_un"),
]}
