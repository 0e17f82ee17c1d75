"""coral: *CORAL: Benchmarking Multi-turn Conversational Retrieval-Augmented Generation*
(Cheng et al. 2024, arXiv 2410.23090).

The paper's construction (section 3) from Wikipedia-like pages: title trees, the four
conversation-flow samplers, the two-step LLM contextualisation (``convrag coral pages | flows |
contextualise``), with the statistics per conversation structure (Table 4); conversational
retrieval (Table 2: MRR, MAP, NDCG@3, Recall@20, Recall@100 per retriever and query policy);
generation with citations under four history strategies (Table 3: BLEU-1, ROUGE-L, ALCE
citation recall / precision, win / draw / lose against the golden response), against generator
size (Table 5, Figure 3) and history length (Figure 4); over the generated world offline or a
released CORAL split.

Modules: ``plan`` (the grid), ``paths``, ``wiring`` (rule-file helpers), ``construct`` (pages
and flows), ``contextualise`` (the LLM steps), ``generate`` (answers), ``evaluate`` (scores),
``judges`` (the pairwise judge), ``analyses``, ``targets``, ``cli`` (``convrag coral ...``).
"""

from __future__ import annotations

from convrag.errors import ConfigError
from convrag.rag.policies import POLICIES
from convrag.schema import check_names, unknown_name
from convrag.studies.base import Study


class Coral(Study):
    key = "coral"
    title = "CORAL: Benchmarking Multi-turn Conversational Retrieval-Augmented Generation"

    def check(self, config, registry, source):
        from convrag.metrics.registry import check_metric_names
        from convrag.studies.coral.wiring import compare_model as compare_model_of

        c = config["coral"]
        if bool(c["world"]) == bool(c["benchmark"]):
            raise ConfigError(f"{source}: coral: give exactly one of 'coral.world' (build the conversations from "
                              "the generated world) and 'coral.benchmark' (a released CORAL split)")
        if c["world"]:
            corpus = c["world"]["corpus"]
            if corpus not in config["corpora"]:
                raise unknown_name(source, "coral.world.corpus", corpus, config["corpora"])
            if config["corpora"][corpus]["kind"] != "miniworld":
                raise ConfigError(f"{source}: coral.world.corpus: corpora.{corpus} must be of kind miniworld "
                                  f"(the generated world the pages render), not {config['corpora'][corpus]['kind']!r}")
            for k, (lo, hi) in c["world"]["turns"].items():
                if lo > hi:
                    raise ConfigError(f"{source}: coral.world.turns.{k}: min {lo} > max {hi}")
            if c["contextualise"]["model"] not in registry:
                raise unknown_name(source, "coral.contextualise.model", c["contextualise"]["model"], registry)
        else:
            b = c["benchmark"]
            if b not in config["benchmarks"]:
                raise unknown_name(source, "coral.benchmark", b, config["benchmarks"])
            if config["benchmarks"][b]["kind"] != "coral":
                raise ConfigError(f"{source}: coral.benchmark: benchmarks.{b} must be of kind coral")
        check_names(source, "coral.retrievers", c["retrievers"], config["retrievers"])
        check_names(source, "coral.policies", c["policies"], POLICIES)
        check_metric_names(c["measures"], "coral.measures", kind="retrieval")
        if "llm_rewrite" in c["policies"] and c["rewrite"]["model"] not in registry:
            raise unknown_name(source, "coral.rewrite.model", c["rewrite"]["model"], registry)
        from convrag.retrieval import retriever_kind

        def dense(key, r):
            if r not in c["retrievers"]:
                raise unknown_name(source, key, r, c["retrievers"])
            if retriever_kind(config, r) != "dense":
                raise ConfigError(f"{source}: {key}: retrievers.{r} is of kind {retriever_kind(config, r)!r}; "
                                  "session encoders and LLM4CS search a dense index")

        c["session_encoders"] = c["session_encoders"] or {}  # null (none) -> {}: one shape downstream
        for name, e in c["session_encoders"].items():
            dense(f"coral.session_encoders.{name}.retriever", e["retriever"])
            if e["train"] is not None:
                if e["train"] not in config["benchmarks"]:
                    raise unknown_name(source, f"coral.session_encoders.{name}.train", e["train"],
                                       config["benchmarks"])
                if config["benchmarks"][e["train"]]["kind"] not in ("coral", "qrecc"):
                    raise ConfigError(f"{source}: coral.session_encoders.{name}.train: benchmarks.{e['train']} "
                                      "must be of kind coral (CORAL's train split: Table 2's -C rows) or qrecc "
                                      "(QReCC's: the -Q rows)")
        for b in c["statistics_benchmarks"]:
            if b not in config["benchmarks"]:
                raise unknown_name(source, "coral.statistics_benchmarks", b, config["benchmarks"])
            if config["benchmarks"][b]["kind"] != "coral":
                raise ConfigError(f"{source}: coral.statistics_benchmarks: benchmarks.{b} must be of kind coral "
                                  "(its conversations are counted with the evaluated ones)")
            if b == c["benchmark"]:
                raise ConfigError(f"{source}: coral.statistics_benchmarks: {b!r} is the evaluated benchmark itself "
                                  "(it would be counted twice)")
        # null = none; an entry set to null is removed (a config laid over another drops it so)
        c["sft"] = {k: v for k, v in (c["sft"] or {}).items() if v is not None}
        for name, x in c["sft"].items():
            if x["model"] not in registry:
                raise unknown_name(source, f"coral.sft.{name}.model", x["model"], registry)
            if x["train"] is not None:
                if config["benchmarks"].get(x["train"], {}).get("kind") != "coral":
                    raise ConfigError(f"{source}: coral.sft.{name}.train: {x['train']!r} must be a benchmarks entry "
                                      "of kind coral")
            if x["answers"] and x["role"] != "generate":
                raise ConfigError(f"{source}: coral.sft.{name}.answers: only a generator (role generate) answers")
            if x["answers"] and x["role"] == "generate" and x["strategy"] not in c["generation"]["strategies"]:
                raise ConfigError(f"{source}: coral.sft.{name}.answers: it answers under the {x['strategy']} strategy it "
                                  "was tuned on (§D.2: one checkpoint per strategy), which coral.generation.strategies "
                                  f"does not list ({', '.join(c['generation']['strategies'])})")
            if x["answers"] and (name in registry or name in c["generation"]["models"]):
                raise ConfigError(f"{source}: coral.sft.{name}: an answering fine-tuned model needs a name of its own "
                                  f"({name!r} is already a registry model)")
            if x["retrieves"] and x["role"] != "rewrite":
                raise ConfigError(f"{source}: coral.sft.{name}.retrieves: only a rewriter (role rewrite) retrieves")
            if x["retrieves"] and name in registry:
                raise ConfigError(f"{source}: coral.sft.{name}: a retrieving fine-tuned rewriter needs a name of its "
                                  f"own ({name!r} is already a registry model)")
            if x["method"] == "full" and x["lora"]:
                raise ConfigError(f"{source}: coral.sft.{name}.lora: given, but method is 'full' (no adapter)")
            if x["role"] == "generate" and not c["retrievers"]:
                raise ConfigError(f"{source}: coral.sft.{name}: a generator is trained on the passages of a retrieval "
                                  "run, so coral.retrievers must not be empty")
        if c["llm4cs"]:
            for r in c["llm4cs"]["retrievers"]:
                dense("coral.llm4cs.retrievers", r)
            m = c["llm4cs"]["model"] or c["rewrite"]["model"]
            if m not in registry:
                raise unknown_name(source, "coral.llm4cs.model", m, registry)
        g = c["generation"]
        if c["compression"] and c["compression"]["model"] not in registry:
            raise unknown_name(source, "coral.compression.model", c["compression"]["model"], registry)
        if c["llm4cs"]:
            from convrag.studies.coral.conversational import llm4cs_policy

            pols = [llm4cs_policy(v["prompting"], v["aggregation"]) for v in c["llm4cs"]["variants"]]
            if len(set(pols)) != len(pols):
                raise ConfigError(f"{source}: coral.llm4cs.variants: a variant is listed twice ({pols})")
        if g["retrieval"] == "strategy" and "rewrite" in g["strategies"] and c["retrievers"]:
            need = "rewrite" if g["rewrite"] == "golden" else "llm_rewrite"
            if need not in c["policies"]:
                raise ConfigError(f"{source}: coral.generation.rewrite: {g['rewrite']!r} retrieves with the {need} run "
                                  f"(its query is that rewrite), so coral.policies must list {need!r}")
        check_names(source, "coral.generation.models", g["models"], registry)
        if g["models"] or any(x["answers"] for x in c["sft"].values()):
            if not c["retrievers"]:
                raise ConfigError(f"{source}: coral.generation.models: generation shows the passages of a retrieval "
                                  "run, so coral.retrievers must not be empty")
            if g["retriever"] is not None and g["retriever"] not in c["retrievers"]:
                raise unknown_name(source, "coral.generation.retriever", g["retriever"], c["retrievers"])
            if g["policy"] is not None and g["policy"] not in c["policies"]:
                raise unknown_name(source, "coral.generation.policy", g["policy"], c["policies"])
            if g["summary_model"] is not None and g["summary_model"] not in registry:
                raise unknown_name(source, "coral.generation.summary_model", g["summary_model"], registry)
            if c["evaluation"]["nli_model"] not in registry:
                raise unknown_name(source, "coral.evaluation.nli_model", c["evaluation"]["nli_model"], registry)
            cm = c["evaluation"]["compare_model"]
            if c["evaluation"]["compare"] and cm is not None and cm not in registry:
                raise unknown_name(source, "coral.evaluation.compare_model", cm, registry)
            check_names(source, "coral.evaluation.judges", c["evaluation"]["judges"], registry)
            if compare_model_of(config) in c["evaluation"]["judges"]:
                raise ConfigError(f"{source}: coral.evaluation.judges: {compare_model_of(config)!r} is already the "
                                  "compare model")
            sw = g["history_sweep"]
            if sw and len(set(sw["m"])) != len(sw["m"]):
                raise ConfigError(f"{source}: coral.generation.history_sweep.m: repeated values {sw['m']}")
            if sw and max(sw["m"]) >= sw["turn"]:
                raise ConfigError(f"{source}: coral.generation.history_sweep.m: {max(sw['m'])} earlier turns cannot "
                                  f"precede turn {sw['turn']} (at most {sw['turn'] - 1})")

    def artifacts(self, config, layout):
        from convrag.data.gold import gold_files
        from convrag.report.reproduction import reproduction_artifacts
        from convrag.studies.coral import paths
        from convrag.studies.coral.wiring import tasks_file

        from convrag.studies.coral.wiring import evaluation_files

        from convrag.studies.coral.plan import index_corpus

        from convrag.studies.coral.plan import searches_corpus

        # Table 1 counts the corpus only where the run has one: a released split read without its
        # passages (contexts: none) and searched by no retriever downloads none (the sample)
        corpus = layout.corpus(index_corpus(config)) if searches_corpus(config) else []
        arts = {"tasks": tasks_file(config, layout), "corpus": corpus,
                "statistics_tasks": [layout.benchmark_tasks(b) for b in config["coral"]["statistics_benchmarks"]],
                "retrieval": paths.retrieval_scores(layout) if config["coral"]["retrievers"] else None,
                "generation": evaluation_files(config, layout, sweep=False) or None,
                "history_sweep": evaluation_files(config, layout, sweep=True) or None,
                "gold": gold_files(config, layout, config["coral"]["benchmark"] or "")
                if config["coral"]["retrievers"] else []}
        return {**arts, **reproduction_artifacts(self, layout, arts)}

    def hub_models(self, config):
        """ALCE's TRUE-T5 when the citation NLI is the paper's (evaluation.nli: true_t5)."""
        from convrag.metrics.citation import TRUE_T5

        return [("coral.evaluation.nli", TRUE_T5)] if config["coral"]["evaluation"]["nli"] == "true_t5" else []

    def context(self, config):
        """Each answering model's size (registry ``params_b``) for Table 5 / Figure 3, and what
        the run used, against what each published number requires (resources/published/coral.yaml)."""
        from convrag.schema import config_registry
        from convrag.report.reproduction import benchmark_identity, retriever_identity

        from convrag.studies.coral.conversational import session_policy
        from convrag.studies.coral.plan import generation_models, sft_generators, trained_on
        from convrag.studies.coral.wiring import compare_model as compare_model_of

        registry = config_registry(config)
        c = config["coral"]
        queries = {session_policy(n): f"session encoder {n} ({e['style']}; trained on {trained_on(config, n)})"
                   for n, e in c["session_encoders"].items()}
        if c["llm4cs"]:
            from convrag.studies.coral.conversational import llm4cs_label, llm4cs_policy

            for v in c["llm4cs"]["variants"]:
                queries[llm4cs_policy(v["prompting"], v["aggregation"])] = llm4cs_label(
                    v["prompting"], v["aggregation"], c["llm4cs"]["n"], c["llm4cs"]["model"] or c["rewrite"]["model"])
        from convrag.studies.coral.plan import SFT_PREFIX, sft_rewriters

        for n, base in sft_rewriters(config).items():
            queries[f"{SFT_PREFIX}{n}"] = f"LLM rewrite by {n} ({c['sft'][n]['method']} fine-tuning of {base})"
        data = benchmark_identity(config, c["benchmark"]) if c["benchmark"] else f"generated:{c['world']['corpus']}"
        # each session encoder as <name>=<style>@<what it trained on>: Table 2's -Q and -C rows need
        # theirs trained on QReCC's or CORAL's train split (the row is found by the name's policy)
        encoders = [f"{n}={e['style']}@{benchmark_identity(config, e['train']) if e['train'] else 'evaluated'}"
                    for n, e in c["session_encoders"].items()]
        run = {"data": [data], "session_encoders": encoders,
               # the conversations Tables 1 and 4 count (§3.3: both splits)
               "statistics_data": [data] + [benchmark_identity(config, b) for b in c["statistics_benchmarks"]],
               "retrievers": [retriever_identity(config, r) for r in c["retrievers"]],
               "rewrite_model": c["rewrite"]["model"], "generation_models": list(c["generation"]["models"]),
               "sft_generators": {n: {"base": b, "method": c["sft"][n]["method"]}
                                  for n, b in sft_generators(config).items()}}
        if c["llm4cs"]:
            run["llm4cs_model"] = c["llm4cs"]["model"] or c["rewrite"]["model"]
        tuned = sft_generators(config)
        return {"sizes": {m: registry[tuned.get(m, m)].params_b for m in generation_models(config)},
                "sft_bases": tuned, "queries": queries,
                "judge_sizes": {j: registry[j].params_b if j in registry else None
                                for j in [compare_model_of(config), *c["evaluation"]["judges"]] if j},
                "reproduction": run}

    def run_settings(self, config):
        c = config["coral"]
        return {"retrieval measures (Table 2's columns)": list(c["measures"]),
                "retrieval depth (passages ranked)": c["retrieval_k"], **super().run_settings(config)}

    def outputs(self, config, layout):
        """The conversations, the retrieval runs, the answers and their scores are final outputs:
        deleting one makes Snakemake redo its job (from the LLM cache); so are the fine-tuned
        models of ``coral.sft``."""
        from convrag.studies.coral.wiring import answer_files, evaluation_files, run_files, tasks_file

        from convrag.studies.coral import paths
        from convrag.studies.coral.plan import source

        sft = [paths.sft(layout, source(config), n) for n in config["coral"]["sft"]]
        return ([tasks_file(config, layout)] + run_files(config, layout) + answer_files(config, layout)
                + evaluation_files(config, layout) + sft)

    def accounting_files(self, config, layout):
        from convrag.studies.coral import paths
        from convrag.studies.coral.plan import constructed, source
        from convrag.studies.coral.wiring import answer_files, evaluation_files, run_files

        built = [paths.tasks(layout, source(config), "accounting.json")] if constructed(config) else []
        return (built + run_files(config, layout, "accounting.json") + answer_files(config, layout, "accounting.json")
                + evaluation_files(config, layout, "accounting.json"))


STUDY = Coral()
