"""mtrag_un: *MTRAG-UN: A Benchmark for Open Challenges in Multi-Turn RAG Conversations* (IBM).

Built so far: the benchmark's statistics (Table 1, Figures 2 and 4) and its retrieval
experiment (Table 2: Recall and nDCG @5/@10 per domain, macro over domains and task-weighted;
Table 3: standalone vs non-standalone; the paired gain of rewriting the query), over any
benchmark of TurnTasks (the mini world's MTRAG-UN-like view offline). Generation, its judges and
the conditioned scores (Table 4, Figure 3) are not wired yet; their scorer lives in
``convrag.metrics.mtrag``.

Modules: ``plan`` (the grid), ``paths``, ``wiring`` (rule-file helpers), ``analyses``,
``targets``, ``cli`` (``convrag mtrag-un ...``).
"""

from __future__ import annotations

from convrag.studies.base import Study


class MtragUn(Study):
    key = "mtrag_un"
    title = "MTRAG-UN: A Benchmark for Open Challenges in Multi-Turn RAG Conversations"
    version = "1"

    def check(self, config, registry, source):
        from convrag.config import check_names, unknown_name
        from convrag.metrics.registry import check_metric_names
        from convrag.rag.policies import POLICIES

        m = config["mtrag_un"]
        if m["benchmark"] not in config["benchmarks"]:
            raise unknown_name(source, "mtrag_un.benchmark", m["benchmark"], config["benchmarks"])
        check_names(source, "mtrag_un.retrievers", m["retrievers"], config["retrievers"])
        check_names(source, "mtrag_un.policies", m["policies"], POLICIES)
        check_metric_names(m["measures"], "mtrag_un.measures", kind="retrieval")
        if m["rewrite"]["model"] not in registry:
            raise unknown_name(source, "mtrag_un.rewrite.model", m["rewrite"]["model"], registry)

    def targets(self):
        from convrag.studies.mtrag_un.targets import TARGETS

        return TARGETS

    def artifacts(self, config, layout):
        from convrag.data.benchmarks import corpus_id
        from convrag.studies.mtrag_un import paths
        from convrag.studies.mtrag_un.plan import domains

        b = config["mtrag_un"]["benchmark"]
        return {"tasks": layout.benchmark_tasks(b), "retrieval": paths.retrieval_scores(layout),
                "corpora": [layout.corpus(corpus_id(b, d)) for d in domains(config)]}

    def context(self, config):
        from convrag.studies.mtrag_un.plan import domains

        m = config["mtrag_un"]
        return {"boot": m["bootstrap"], "domains": domains(config), "policies": m["policies"],
                "gain_base": m["gain_base"], "standalone_measure": m["standalone_measure"]}

    def accounting_files(self, config, layout):
        from convrag.studies.mtrag_un.wiring import run_files

        return run_files(config, layout, "accounting.json")

    def plan(self, config):
        from convrag.studies.mtrag_un.plan import retrieval_jobs

        return retrieval_jobs(config)

    def add_cli(self, sub):
        from convrag.studies.mtrag_un.cli import add_cli

        add_cli(sub)


STUDY = MtragUn()
