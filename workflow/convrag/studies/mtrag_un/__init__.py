"""mtrag_un: *MTRAG-UN: A Benchmark for Open Challenges in Multi-Turn RAG Conversations* (IBM).

The benchmark's statistics (Table 1, Figures 2 and 4); its retrieval experiment (Table 2:
Recall and nDCG @5/@10 per domain, macro over domains and task-weighted; Table 3: standalone
vs non-standalone; the paired gain of rewriting the query); generation in the reference and
RAG settings scored as the official MTRAG scorer scores it (Table 4, Figure 3 a/b/c, Table 5);
and the correlation of the project's judges with MTRAG's human evaluation (Figure 5), over any
benchmark of TurnTasks (the mini world's MTRAG-UN-like view offline).

Modules: ``plan`` (the grid), ``paths``, ``wiring`` (rule-file helpers), ``evaluate`` (the
official scorer over responses), ``judges`` (its LLM judges), ``human`` (judge-human
correlation), ``corrected`` (judge-corrected PPI means), ``analyses``, ``targets``, ``cli``
(``convrag mtrag-un ...``).
"""

from __future__ import annotations

from convrag.errors import ConfigError
from convrag.rag.policies import POLICIES
from convrag.schema import check_names, unknown_name
from convrag.studies.base import Study


class MtragUn(Study):
    key = "mtrag_un"
    title = "MTRAG-UN: A Benchmark for Open Challenges in Multi-Turn RAG Conversations"

    def check(self, config, registry, source):
        from convrag.metrics.registry import check_metric_names

        m = config["mtrag_un"]
        if m["benchmark"] not in config["benchmarks"]:
            raise unknown_name(source, "mtrag_un.benchmark", m["benchmark"], config["benchmarks"])
        check_names(source, "mtrag_un.retrievers", m["retrievers"], config["retrievers"])
        check_names(source, "mtrag_un.statistics_benchmarks", m["statistics_benchmarks"], config["benchmarks"])
        if m["benchmark"] in m["statistics_benchmarks"] or len(set(m["statistics_benchmarks"])) < len(
                m["statistics_benchmarks"]):
            raise ConfigError(f"{source}: invalid config key 'mtrag_un.statistics_benchmarks': each benchmark once, "
                              f"and not the study's own '{m['benchmark']}' (its rows are always there)")
        check_names(source, "mtrag_un.policies", m["policies"], POLICIES)
        check_metric_names(m["measures"], "mtrag_un.measures", kind="retrieval")
        mr = m["mtrag_retrieval"]
        if mr["benchmark"] is not None:
            if mr["benchmark"] not in config["benchmarks"]:
                raise unknown_name(source, "mtrag_un.mtrag_retrieval.benchmark", mr["benchmark"], config["benchmarks"])
            if config["benchmarks"][mr["benchmark"]]["kind"] != "mtrag_retrieval":
                raise ConfigError(f"{source}: invalid config key 'mtrag_un.mtrag_retrieval.benchmark': a benchmark "
                                  f"of kind mtrag_retrieval, got '{mr['benchmark']}' of kind "
                                  f"{config['benchmarks'][mr['benchmark']]['kind']}")
            check_names(source, "mtrag_un.mtrag_retrieval.retrievers", mr["retrievers"], config["retrievers"])
        if m["rewrite"]["model"] not in registry:
            raise unknown_name(source, "mtrag_un.rewrite.model", m["rewrite"]["model"], registry)
        g, e = m["generation"], m["evaluation"]
        check_names(source, "mtrag_un.generation.models", g["models"], registry)
        if g["models"]:
            from convrag.studies.mtrag_un.evaluate import bertscore_config

            if g["rag"]["retriever"] is not None and g["rag"]["retriever"] not in m["retrievers"]:
                raise unknown_name(source, "mtrag_un.generation.rag.retriever", g["rag"]["retriever"], m["retrievers"])
            if g["rag"]["policy"] is not None and g["rag"]["policy"] not in m["policies"]:
                raise unknown_name(source, "mtrag_un.generation.rag.policy", g["rag"]["policy"], m["policies"])
            if e["judge_model"] not in registry:
                raise unknown_name(source, "mtrag_un.evaluation.judge_model", e["judge_model"], registry)
            for need in ("idk", "clarification"):
                if need not in e["judges"]:
                    raise ConfigError(f"{source}: mtrag_un.evaluation.judges must include '{need}': the official "
                                      "conditioning on answerability needs its verdict")
            try:
                bertscore_config(e["bertscore"])
            except ConfigError as err:
                raise ConfigError(f"{source}: {err}") from None

    def artifacts(self, config, layout):
        from convrag.report.reproduction import reproduction_artifacts
        from convrag.data.benchmarks import corpus_id
        from convrag.data.gold import gold_files
        from convrag.studies.mtrag_un import paths
        from convrag.studies.mtrag_un.plan import domains

        from convrag.studies.mtrag_un.wiring import evaluation_files, mtrag_retrieval_artifacts

        m = config["mtrag_un"]
        b = m["benchmark"]
        arts = {"tasks": layout.benchmark_tasks(b), "retrieval": paths.retrieval_scores(layout),
                "corpora": [layout.corpus(corpus_id(b, d)) for d in domains(config)],
                "generation": evaluation_files(config, layout) or None,
                "human": paths.human_scores(layout) if m["evaluation"]["human_evaluations"] else None,
                "gold": gold_files(config, layout, b, domains(config)) if m["retrievers"] else [],
                "statistics_tasks": [layout.benchmark_tasks(s) for s in m["statistics_benchmarks"]],
                **mtrag_retrieval_artifacts(config, layout)}
        return {**arts, **reproduction_artifacts(self, layout, arts)}

    def hub_models(self, config):
        """BERTScore's model (the paper's DeBERTa-xlarge-MNLI in the paper setting)."""
        from convrag.studies.mtrag_un.evaluate import bertscore_config

        model = bertscore_config(config["mtrag_un"]["evaluation"]["bertscore"]).get("model_type")
        return [("mtrag_un.evaluation.bertscore", model)] if model else []

    def context(self, config):
        from convrag.report.reproduction import benchmark_identity, retriever_identity
        from convrag.studies.mtrag_un.plan import domains, statistics_domains
        from convrag.studies.mtrag_un.wiring import mtrag_retrieval_context, prompt_sources
        from convrag.report.runnote import model_sizes as runnote_sizes

        m = config["mtrag_un"]
        # what the run used, against what each published number requires (resources/published/mtrag_un.yaml)
        run = {"data": [benchmark_identity(config, m["benchmark"])], "domains": domains(config),
               "retrievers": [retriever_identity(config, r) for r in m["retrievers"]],
               "rewrite_model": m["rewrite"]["model"], "generation_models": list(m["generation"]["models"]),
               "judge_model": m["evaluation"]["judge_model"], **mtrag_retrieval_context(config),
               "statistics_data": [benchmark_identity(config, s) for s in m["statistics_benchmarks"]],
               "statistics_domains": statistics_domains(config),
               "prompts": prompt_sources(config),
               "prompts_used": "; ".join(f"{k}: {v}" for k, v in prompt_sources(config).items())}
        return {"boot": m["bootstrap"], "domains": domains(config), "policies": m["policies"],
                "benchmark": m["benchmark"], "statistics_benchmarks": list(m["statistics_benchmarks"]),
                "gain_base": m["gain_base"], "standalone_measure": m["standalone_measure"],
                "bertscore": m["evaluation"]["bertscore"], "judge_model": m["evaluation"]["judge_model"],
                "ppi": m["evaluation"]["ppi"], "reproduction": run,
                "judge_sizes": runnote_sizes(config, [j for j in [m["evaluation"]["judge_model"]] if j])}

    def run_settings(self, config):
        """The run's settings; a retrieval-only run (no generation job) lists no generation
        settings, BERTScore model or judge, since none of them ran (issue 45)."""
        from convrag.studies.mtrag_un.plan import generation_jobs

        g, e = config["mtrag_un"]["generation"], config["mtrag_un"]["evaluation"]
        base = super().run_settings(config)
        if not generation_jobs(config):
            drop = {"generation_models", "judge_model", "prompts_used"}
            rewrite = (base.get("prompts") or {}).get("rewrite")
            return {"generation": "not run (retrieval only)", **{k: v for k, v in base.items() if k not in drop},
                    **({"prompts used": f"rewrite: {rewrite}"} if rewrite else {})}
        rag = g.get("rag") or {}
        return {"RAG passages shown (top k)": g["top_k"], "reference passages shown (first k)": g["reference_k"],
                "RAG run": "/".join(str(rag[k]) for k in ("retriever", "policy") if rag.get(k)) or None,
                "generation settings": g["settings"], "bertscore": _bertscore(e["bertscore"]),
                **base}

    def outputs(self, config, layout):
        """The answers and their scores are final outputs (as lic_rag's conversations): deleting
        one makes Snakemake redo its job, from the LLM cache."""
        from convrag.studies.mtrag_un import paths
        from convrag.studies.mtrag_un.plan import generation_jobs
        from convrag.studies.mtrag_un.wiring import evaluation_files

        return [paths.answers(layout, j["benchmark"], j["model"], j["setting"], j["domain"])
                for j in generation_jobs(config)] + evaluation_files(config, layout)

    def accounting_files(self, config, layout):
        from convrag.studies.mtrag_un import paths
        from convrag.studies.mtrag_un.plan import mtrag_retrieval_jobs
        from convrag.studies.mtrag_un.wiring import answer_accounting_files, evaluation_files, run_files

        human = [paths.human_scores(layout, "accounting.json")] if config["mtrag_un"]["evaluation"][
            "human_evaluations"] else []
        return (run_files(config, layout, "accounting.json")
                + run_files(config, layout, "accounting.json", mtrag_retrieval_jobs(config))
                + answer_accounting_files(config, layout)
                + evaluation_files(config, layout, "accounting.json") + human)


STUDY = MtragUn()


def _bertscore(value) -> str:
    """The BERTScore model and layer in words (the official scorer's: DeBERTa-xlarge-MNLI, layer 40)."""
    from convrag.studies.mtrag_un.evaluate import bertscore_config

    b = bertscore_config(value)
    return f"{b.get('model_type')} (layer {b.get('num_layers')}, rescaled: {bool(b.get('rescale_with_baseline'))})"
