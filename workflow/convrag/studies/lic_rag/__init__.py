"""lic_rag: *Lost in Conversation or Lost in Translation? Diagnosing Multi-Turn Degradation in
RAG*. Multi-hop questions sharded into simulated conversations (FULL / CONCAT / SHARDED /
RECAP / SNOWBALL delivery x HISTORY / CURRENT query policy x retrieval settings x LLMs x runs).

Modules: ``plan`` (constants, settings, cells, jobs), ``paths`` (outputs), ``shards`` and
``review`` (shard construction and the manual review round trip), ``simulate`` (the lockstep
conversation runner), ``labels`` (in-job classifier and judge), ``score``, ``analyses``,
``targets``, ``estimate`` (sizing from a measured run), ``cli`` (``convrag lic-rag ...``).
"""

from __future__ import annotations

from convrag.errors import ConfigError
from convrag.schema import check_names, unknown_name
from convrag.studies.base import Study


def _check_prompt_file(role: str, path: str, steps: int, source: str) -> None:
    """``lic_rag.prompts.<role>`` names a readable file with every prompt the stage uses."""
    from convrag.errors import ConfigError
    from convrag.judges.prompts import check_prompts
    from convrag.resources import read_prompt_file
    from convrag.studies.lic_rag.simulate import check_prompts as check_assistant

    def check_shard(p, where):
        check_prompts(p, where, {"user": {"question"}}, ("system",))
        if steps == 2:
            check_prompts(p, where, {"segment.user": {"question"}, "rephrase.user": {"question", "units"}},
                          ())
            for k in ("segment", "rephrase"):
                if not isinstance(p[k].get("system"), str):
                    raise ConfigError(f"{where}: missing prompt '{k}.system'")

    try:
        read_prompt_file(path, check_assistant if role == "assistant" else check_shard, f"{role} prompts")
    except ConfigError as e:
        raise ConfigError(f"{source}: lic_rag.prompts.{role}: {e}") from e


class LicRag(Study):
    key = "lic_rag"
    title = "Lost in Conversation or Lost in Translation? Diagnosing Multi-Turn Degradation in RAG"

    def check(self, config, registry, source):

        lic = config["lic_rag"]
        check_names(source, "lic_rag.datasets", lic["datasets"], config["datasets"])
        check_names(source, "lic_rag.retrievers", lic["retrievers"], config["retrievers"])
        check_names(source, "lic_rag.models", lic["models"], registry)
        for role, path in lic["prompts"].items():  # a prompt file the user supplies: its keys, at start-up
            if path:
                _check_prompt_file(role, path, lic["sharding"]["steps"], source)
        for ret, models in lic["retriever_models"].items():
            if ret not in lic["retrievers"]:
                raise unknown_name(source, f"lic_rag.retriever_models.{ret}", ret, lic["retrievers"])
            check_names(source, f"lic_rag.retriever_models.{ret}", models, lic["models"])
        check_names(source, "lic_rag.sharding.model", [lic["sharding"]["model"]], registry)
        for key in ("user_simulator", "classifier", "judge"):
            m = lic[key]["model"]
            if m is not None and m not in registry:
                raise unknown_name(source, f"lic_rag.{key}.model", m, registry)
        if lic["recall_k"] < lic["top_k"]:
            raise ConfigError(f"{source}: invalid config key 'lic_rag.recall_k': {lic['recall_k']} is below top_k "
                              f"({lic['top_k']})")
        check_names(source, "lic_rag.analysis.coverage_retrievers", lic["analysis"]["coverage_retrievers"] or [],
                    lic["retrievers"])
        check_names(source, "lic_rag.analysis.pooled_retrievers", lic["analysis"]["pooled_retrievers"] or [],
                    lic["retrievers"])
        check_names(source, "lic_rag.analysis.pooled_models", lic["analysis"]["pooled_models"] or [], lic["models"])
        from convrag.retrieval import is_closed_book

        for r in lic["analysis"]["pooled_retrievers"] or []:
            if is_closed_book(config, r):  # closed book has its own rows; a pool of retrieval methods retrieves
                raise ConfigError(f"{source}: invalid config key 'lic_rag.analysis.pooled_retrievers': {r} is closed "
                                  "book (the pool averages retrieval methods; closed book keeps its own rows)")
        for d in lic["sharding"]["reviews"]:
            if d not in lic["datasets"]:
                raise unknown_name(source, f"lic_rag.sharding.reviews.{d}", d, lic["datasets"])

    def artifacts(self, config, layout):
        from convrag.report.reproduction import reproduction_artifacts
        from convrag.studies.lic_rag import paths

        lic = config["lic_rag"]
        arts = {
            "scores": paths.scores(layout, "conversations.parquet"),
            "turns": paths.scores(layout, "turns.parquet"),
            "questions": [layout.questions(d) for d in lic["datasets"]],
            "shards": [paths.shards(layout, d, "final.jsonl") for d in lic["datasets"]],
            "corpora": [layout.corpus(config["datasets"][d]["corpus"]) for d in lic["datasets"]],
            # shard-wording variability (sharding.variability): None when off, so shard_wording is not built
            "shard_variability": [paths.shards(layout, d, "variability.json") for d in lic["datasets"]]
            if lic["sharding"]["variability"]["questions"] else None,
        }
        return {**arts, **reproduction_artifacts(self, layout, arts)}

    def context(self, config):
        from convrag.retrieval import is_closed_book, retriever_kind
        from convrag.report.reproduction import dataset_identity, retriever_identity
        from convrag.retrieval import capabilities

        from convrag.report.runnote import model_sizes as runnote_sizes
        from convrag.studies.lic_rag.wiring import (largest_per_family, model_rows, model_sizes, pool, prompts_used,
                                                    retrieval_system_rows)

        lic = config["lic_rag"]
        rets = lic["retrievers"]
        sharding = lic["sharding"]["model"]
        # what the run used, against what each published number requires (resources/published/lic_rag.yaml)
        run = {"models": list(lic["models"]), "data": [dataset_identity(config, d) for d in lic["datasets"]],
               "retrievers": [retriever_identity(config, r) for r in rets], "sharding_model": sharding,
               **{f"{k}_model": lic[k]["model"] or sharding for k in ("user_simulator", "classifier", "judge")},
               "shard_wording_samples": lic["sharding"]["variability"]["samples"]
               if lic["sharding"]["variability"]["questions"] else None,
               "wording_simulations": lic["analysis"]["wording_simulations"],
               **prompts_used(lic)}
        return {"boot": lic["bootstrap"], "analysis": lic["analysis"], "datasets": lic["datasets"],
                "closed_retrievers": [r for r in rets if is_closed_book(config, r)],
                "explorers": [r for r in rets if capabilities(retriever_kind(config, r)).cost_class == "explorer"],
                "pog": [r for r in rets if retriever_kind(config, r) == "pog"],
                "retrieval_systems": retrieval_system_rows(config), "models": model_rows(config),
                "largest_per_family": largest_per_family(config), "pool": pool(config),
                "model_sizes": model_sizes(config), "reproduction": run,
                "judge_sizes": {m: b for m, b in runnote_sizes(config, [run["judge_model"]]).items()}}

    def run_settings(self, config):
        lic = config["lic_rag"]
        return {"top_k (passages shown to the assistant)": lic["top_k"],
                "recall_k (passages recorded for Recall@k)": lic["recall_k"], "runs per question": lic["runs"],
                **super().run_settings(config)}

    def outputs(self, config, layout):
        # Conversations are targets too: deleting one makes Snakemake redo that job (from the
        # LLM cache) and everything downstream of it, not silently keep stale tables.
        from convrag.studies.lic_rag import paths
        from convrag.studies.lic_rag.plan import simulate_cells

        convs = [paths.conversations(layout, j["dataset"], j["model"], j["retriever"], j["condition"], j["policy"],
                                     j["chunk"]) for j in simulate_cells(config)]
        shards = [paths.shards(layout, d, name) for d in config["lic_rag"]["datasets"]
                  for name in ("shard_report.md", "review.yaml")]
        return convs + shards

    def accounting_files(self, config, layout):
        from convrag.studies.lic_rag import paths
        from convrag.studies.lic_rag.plan import simulate_jobs

        return [paths.job_accounting(layout, j["dataset"], j["model"], j["retriever"], j["chunk"])
                for j in simulate_jobs(config)]


STUDY = LicRag()
