"""cross: one grid across the benchmarks of every study.

The papers each study one slice (sharded delivery on multi-hop QA, judges on MTRAG-UN, citation
strategies on CORAL, labels on RECOR); this study asks the questions that cut across them: does
sharded delivery hurt as much on one benchmark as on another, do graph retrievers help on
conversational benchmarks, is "no gold in the top k" as wrong on MTRAG-UN as on RECOR? Grid:
benchmarks (every TurnTask benchmark the config loads, plus multi-hop datasets sharded as lic_rag
shards them) x retrievers (each over the benchmark's own corpus) x readers x query policies x
delivery (recorded; sharded where a benchmark's tasks have shards), scored with retrieval
measures, answer metrics, the answer-correctness judge and worse_labels' content-sufficiency
label.

Modules: ``plan`` (the grid and why a cell is not planned), ``paths``, ``wiring`` (rule-file
helpers), ``tasks`` (multi-hop questions as TurnTasks), ``deliver`` (recorded and sharded
delivery), ``score``, ``targets``, ``cli`` (``convrag cross ...``).
"""

from __future__ import annotations

from convrag.errors import ConfigError
from convrag.rag.policies import POLICIES
from convrag.schema import check_names, unknown_name
from convrag.studies.base import Study


class Cross(Study):
    key = "cross"
    title = "One grid across benchmarks: delivery, retrievers, readers, query policies, labels"

    def check(self, config, registry, source):
        import convrag.metrics.citation  # noqa: F401  (registers bleu1)
        import convrag.metrics.text  # noqa: F401  (registers rougeL)
        from convrag.metrics.registry import check_metric_names

        c = config["cross"]
        both = sorted(set(c["benchmarks"]) & set(c["multihop"]))
        if both:
            raise ConfigError(f"{source}: invalid config key 'cross.multihop': '{both[0]}' is also in cross.benchmarks; "
                              "grid benchmark names must be distinct")
        check_names(source, "cross.benchmarks", c["benchmarks"], config.get("benchmarks", {}))
        check_names(source, "cross.multihop", c["multihop"], config.get("datasets", {}))
        if not c["benchmarks"] and not c["multihop"]:
            raise ConfigError(f"{source}: invalid config key 'cross.benchmarks': no benchmark and no multi-hop dataset")
        check_names(source, "cross.retrievers", c["retrievers"], config["retrievers"])
        check_names(source, "cross.policies", c["policies"], [p for p in POLICIES if p != "none"])
        check_names(source, "cross.readers", c["readers"], registry)
        for b, pols in c["benchmark_policies"].items():
            if b not in c["benchmarks"] and b not in c["multihop"] and b not in config.get("benchmarks", {}):
                raise unknown_name(source, "cross.benchmark_policies", b, [*c["benchmarks"], *c["multihop"]])
            check_names(source, f"cross.benchmark_policies.{b}", pols, c["policies"])
        check_metric_names(c["measures"], "cross.measures", kind="retrieval")
        check_metric_names(c["answer_metrics"], "cross.answer_metrics", kind="answer")
        for b, names in c["benchmark_metrics"].items():
            known = [*config.get("benchmarks", {}), *config.get("datasets", {})]
            if b not in known:  # a benchmark the grid leaves out may keep its entry (config overlays)
                raise unknown_name(source, "cross.benchmark_metrics", b, known)
            check_metric_names(names, f"cross.benchmark_metrics.{b}", kind="answer")
        for key, model in (("rewrite.model", c["rewrite"]["model"]), ("judge.model", c["judge"]["model"]),
                           ("content.model", c["content"]["model"]), ("sharding.model", c["sharding"]["model"])):
            if model is not None and model not in registry:
                raise unknown_name(source, f"cross.{key}", model, registry)
        if "llm_rewrite" in c["policies"] and c["rewrite"]["model"] is None:
            raise ConfigError(f"{source}: invalid config key 'cross.rewrite.model': the llm_rewrite policy needs a model")
        if c["recall_k"] < c["top_k"]:
            raise ConfigError(f"{source}: invalid config key 'cross.recall_k': {c['recall_k']} < top_k {c['top_k']}")
        if c["heatmap_delivery"] not in c["delivery"]:
            raise unknown_name(source, "cross.heatmap_delivery", c["heatmap_delivery"], c["delivery"])

    def artifacts(self, config, layout):
        from convrag.data.gold import gold_files
        from convrag.studies.cross import paths
        from convrag.studies.cross.plan import benchmarks

        bs = benchmarks(config)
        return {"scores": [paths.scores(layout, b) for b in bs],
                "gold": [p for b in bs for p in gold_files(config, layout, b)],
                "contexts": [paths.scores(layout, b, "contexts.parquet") for b in bs]
                if config["cross"]["content"]["model"] else None}

    def context(self, config):
        from convrag.studies.cross.plan import grid

        from convrag.report.runnote import model_sizes

        c = config["cross"]
        sizes = model_sizes(config, [c["judge"]["model"], c["content"]["model"]])
        return {"boot": c["bootstrap"], "heatmap_delivery": c["heatmap_delivery"],
                "partial_insufficient": c["content"]["partial_insufficient"], "grid": grid(config),
                "judges": {k: {"model": c[k]["model"], "params_b": sizes[c[k]["model"]]} for k in ("judge", "content")}}

    def run_settings(self, config):
        from convrag.report.reproduction import benchmark_identity, retriever_identity

        c = config["cross"]
        data = [benchmark_identity(config, b) for b in c["benchmarks"]]
        data += [f"generated:{d}" if config["corpora"][config["datasets"][d]["corpus"]]["kind"] == "miniworld" else d
                 for d in c.get("multihop") or []]
        return {"top_k (passages shown to the reader)": c["top_k"], "recall_k": c["recall_k"],
                "readers": c["readers"], "judge_model": c["judge"]["model"], "content_model": c["content"]["model"],
                "data": data, "retrievers": [retriever_identity(config, r) for r in c["retrievers"]],
                "delivery": c["delivery"]}

    def outputs(self, config, layout):
        from convrag.studies.cross.wiring import answer_files

        return answer_files(config, layout)

    def accounting_files(self, config, layout):
        from convrag.studies.cross import paths
        from convrag.studies.cross.plan import benchmarks
        from convrag.studies.cross.wiring import shard_benchmarks

        # the scoring job of each benchmark sums its answer jobs' accounting (one row per benchmark;
        # a paper grid's 1,400 answer files would not fit in one command-line argument)
        return ([paths.shards(layout, d, "accounting.json") for d in shard_benchmarks(config)]
                + [paths.scores(layout, b, "accounting.json") for b in benchmarks(config)])


STUDY = Cross()
