# coral: the paper's construction from the generated world's pages (pages -> flows -> the two
# LLM steps), then conversational retrieval runs over the turns, scored per turn with
# ir_measures. Its tables go through the shared report rules (report.smk).
from convrag.studies.coral import paths as coral_paths
from convrag.studies.coral import wiring as coral_wiring
from convrag.studies.coral.plan import constructed as coral_constructed
from convrag.studies.coral.plan import source as coral_source
from convrag.studies.coral.plan import index_corpus as coral_index_corpus
from convrag.studies.coral.plan import llm4cs_model as coral_llm4cs_model
from convrag.studies.coral.plan import sft_rewriters as coral_sft_rewriters

CORAL = config["coral"]
CORAL_BUILT = [coral_source(config)] if coral_constructed(config) else []


localrules:
    coral,
    coral_pages,
    coral_flows,
    coral_score_retrieval,


# `snakemake --cores all coral`: this study alone.
rule coral:
    input:
        study_targets("coral"),


# The world rendered as Wikipedia-like pages (the same seeded world as the corpus).
rule coral_pages:
    output:
        coral_paths.pages(L, "{source}"),
    log:
        L.log("coral/pages/{source}.log"),
    wildcard_constraints:
        source=alternatives(CORAL_BUILT),
    conda:
        CONDA_ENVS["cpu"]
    params:
        world=lambda wc: shlex.quote(coral_wiring.world_spec(config)),
    shell:
        "convrag coral pages --name {wildcards.source} --world {params.world} --out {output} 2> {log}"


# Title trees and the four conversation-flow samplers (seeded; no model).
rule coral_flows:
    input:
        pages=coral_paths.pages(L, "{source}"),
    output:
        flows=coral_paths.flows(L, "{source}"),
        report=coral_paths.flows(L, "{source}", "report.json"),
    log:
        L.log("coral/flows/{source}.log"),
    wildcard_constraints:
        source=alternatives(CORAL_BUILT),
    conda:
        CONDA_ENVS["cpu"]
    params:
        args=lambda wc: coral_wiring.flows_args(config),
    shell:
        "convrag coral flows --pages {input.pages} {params.args} --out {output.flows}"
        " --report {output.report} 2> {log}"


# The two LLM steps: full question from the keyword chain, then its conversational form.
rule coral_contextualise:
    input:
        unpack(lambda wc: coral_wiring.contextualise_inputs(config, L, PROMPTS)),
    output:
        tasks=coral_paths.tasks(L, "{source}"),
        accounting=coral_paths.tasks(L, "{source}", "accounting.json"),
        report=coral_paths.tasks(L, "{source}", "report.json"),
    log:
        L.log("coral/contextualise/{source}.log"),
    wildcard_constraints:
        source=alternatives(CORAL_BUILT),
    conda:
        conda_env(models=[CORAL["contextualise"]["model"]])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(CORAL["contextualise"]["model"]),
    params:
        args=lambda wc: coral_wiring.contextualise_args(config, REGISTRY, CACHE),
        corpus=lambda wc, input: (
            f"--corpus {input.corpus}" if "corpus" in input.keys() else ""
        ),
    shell:
        "convrag coral contextualise --pages {input.pages} --flows {input.flows} --prompts {input.prompts}"
        " {params.args} {params.corpus} --threads {threads} --out {output.tasks} --accounting {output.accounting}"
        " --report {output.report} 2> {log}"


# Table 2: one run per retriever x query policy over every turn.
use rule retrieve from templates as coral_retrieve with:
    input:
        unpack(
            lambda wc: coral_wiring.retrieve_inputs(
                config, L, PROMPTS, wc.retriever, wc.policy
            )
        ),
    output:
        run=coral_paths.run(L, "{source}", "{retriever}", "{policy}"),
        queries=coral_paths.run(
            L, "{source}", "{retriever}", "{policy}", "queries.jsonl"
        ),
        accounting=coral_paths.run(
            L, "{source}", "{retriever}", "{policy}", "accounting.json"
        ),
    log:
        L.log("coral/retrieve/{source}/{retriever}/{policy}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        retriever=alternatives(CORAL["retrievers"]),
        policy=alternatives(CORAL["policies"]),
    conda:
        lambda wc: conda_env(
            models=coral_wiring.models(config, wc.retriever, wc.policy),
            retriever=wc.retriever,
        )
    params:
        args=lambda wc: coral_wiring.retrieve_args(
            config, wc.retriever, wc.policy, REGISTRY, CACHE
        ),


# Table 2's -SFT rows: a fine-tuned rewriter (coral.sft.<name>.retrieves) rewrites every turn,
# read from the registry its training wrote beside it; policy sft_<name>.
rule coral_sft_retrieve:
    input:
        unpack(
            lambda wc: coral_wiring.sft_retrieve_inputs(
                config, L, PROMPTS, wc.retriever, wc.rewriter
            )
        ),
    output:
        run=coral_paths.run(L, "{source}", "{retriever}", "sft_{rewriter}"),
        queries=coral_paths.run(
            L, "{source}", "{retriever}", "sft_{rewriter}", "queries.jsonl"
        ),
        accounting=coral_paths.run(
            L, "{source}", "{retriever}", "sft_{rewriter}", "accounting.json"
        ),
    log:
        L.log("coral/sft_retrieve/{source}/{retriever}/{rewriter}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        retriever=alternatives(CORAL["retrievers"]),
        rewriter=alternatives(list(coral_sft_rewriters(config)) or ["-"]),
    conda:
        lambda wc: conda_env(
            models=coral_wiring.sft_rewriter_models(config, wc.rewriter),
            retriever=wc.retriever,
        )
    threads: config["threads"]["index"]
    resources:
        **model_job(lambda wc: coral_sft_rewriters(config)[wc.rewriter], runtime=120),
    params:
        args=lambda wc: coral_wiring.sft_retrieve_args(
            config, L, wc.retriever, wc.rewriter, CACHE
        ),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
    shell:
        "convrag retrieve --tasks {input.tasks} --index-dir $(dirname {input.index})"
        " --retriever-params {params.retriever_params} {params.args}"
        " --rewrite-prompts {input.rewrite_prompts} --threads {threads} --out-run {output.run}"
        " --out-queries {output.queries} --accounting {output.accounting} 2> {log}"


# Table 2's conversational dense retrieval: a session encoder trained on top of a dense
# retriever's encoder (KD or Conv-ANCE style; GPUs on a cluster when configured), then searched
# in that retriever's index; LLM4CS: one run per variant (prompting x aggregation, wildcard llm4cs).
rule coral_train_session_encoder:
    input:
        unpack(lambda wc: coral_wiring.train_inputs(config, L, wc.encoder)),
    output:
        directory(coral_paths.session_encoder(L, "{source}", "{encoder}")),
    log:
        L.log("coral/train_session/{source}/{encoder}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        encoder=alternatives(list(CORAL["session_encoders"])),
    conda:
        lambda wc: CONDA_ENVS[
            coral_wiring.training_job(config, "session_encoders", wc.encoder)["env"]
        ]
    threads: config["threads"]["index"]
    resources:
        **model_job(
            lambda wc: coral_wiring.training_job(
                config, "session_encoders", wc.encoder
            )
        ),
    params:
        args=lambda wc: coral_wiring.train_args(config, wc.encoder),
    shell:
        "convrag coral train-session --tasks {input.tasks} --corpus {input.corpus} {params.args}"
        " --threads {threads} --out {output} 2> {log}"


rule coral_session_retrieve:
    input:
        tasks=coral_wiring.tasks_file(config, L),
        encoder=coral_paths.session_encoder(L, "{source}", "{encoder}"),
        index=lambda wc: L.index_manifest(
            coral_index_corpus(config),
            CORAL["session_encoders"][wc.encoder]["retriever"],
        ),
        graph=lambda wc: graph_inputs(
            config,
            L,
            coral_index_corpus(config),
            CORAL["session_encoders"][wc.encoder]["retriever"],
        ),
    output:
        run=coral_paths.run(L, "{source}", "{retriever}", "session_{encoder}"),
        queries=coral_paths.run(
            L, "{source}", "{retriever}", "session_{encoder}", "queries.jsonl"
        ),
        accounting=coral_paths.run(
            L, "{source}", "{retriever}", "session_{encoder}", "accounting.json"
        ),
    log:
        L.log("coral/session_retrieve/{source}/{retriever}/{encoder}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        retriever=alternatives(CORAL["retrievers"]),
        encoder=alternatives(list(CORAL["session_encoders"])),
    conda:
        CONDA_ENVS["cpu"]
    threads: config["threads"]["index"]
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        args=lambda wc: coral_wiring.session_args(config, wc.encoder),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
    shell:
        "convrag coral session-retrieve --tasks {input.tasks} --encoder {input.encoder}"
        " --index-dir $(dirname {input.index}) --retriever-params {params.retriever_params} {params.args}"
        " --threads {threads} --out-run {output.run} --out-queries {output.queries}"
        " --accounting {output.accounting} 2> {log}"


rule coral_llm4cs_retrieve:
    input:
        tasks=coral_wiring.tasks_file(config, L),
        index=lambda wc: L.index_manifest(coral_index_corpus(config), wc.retriever),
        graph=lambda wc: graph_inputs(
            config, L, coral_index_corpus(config), wc.retriever
        ),
        prompts=f"{PROMPTS}/rag/rewrite.yaml",
        llm4cs_prompts=f"{PROMPTS}/{(CORAL['llm4cs'] or {'prompt': 'coral/llm4cs.yaml'})['prompt']}",
    output:
        run=coral_paths.run(L, "{source}", "{retriever}", "{llm4cs}"),
        queries=coral_paths.run(
            L, "{source}", "{retriever}", "{llm4cs}", "queries.jsonl"
        ),
        accounting=coral_paths.run(
            L, "{source}", "{retriever}", "{llm4cs}", "accounting.json"
        ),
    log:
        L.log("coral/llm4cs/{source}/{retriever}/{llm4cs}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        retriever=alternatives((CORAL["llm4cs"] or {"retrievers": []})["retrievers"]),
        llm4cs=alternatives(coral_wiring.llm4cs_policies(config)),
    conda:
        conda_env(models=[m for m in [coral_llm4cs_model(config)] if m])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(coral_llm4cs_model(config) if CORAL["llm4cs"] else {"gpu": 0}),
    params:
        args=lambda wc: coral_wiring.llm4cs_args(config, REGISTRY, CACHE, wc.llm4cs),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
    shell:
        "convrag coral llm4cs-retrieve --tasks {input.tasks} --prompts {input.prompts}"
        " --llm4cs-prompts {input.llm4cs_prompts}"
        " --index-dir $(dirname {input.index}) --retriever-params {params.retriever_params} {params.args}"
        " --threads {threads} --out-run {output.run} --out-queries {output.queries}"
        " --accounting {output.accounting} 2> {log}"


# The paper's "-SFT" models: LoRA fine-tuning (TRL + PEFT) of a rewriter or a generator; an
# optional rule (coral.sft), GPUs on a cluster when configured.
rule coral_sft:
    input:
        unpack(lambda wc: coral_wiring.sft_inputs(config, L, PROMPTS, wc.name)),
    output:
        model=directory(coral_paths.sft(L, "{source}", "{name}")),
        report=coral_paths.sft(L, "{source}", "{name}", "report.json"),
    log:
        L.log("coral/sft/{source}/{name}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        name=alternatives(list(CORAL["sft"] or {})),
    conda:
        lambda wc: CONDA_ENVS[coral_wiring.training_job(config, "sft", wc.name)["env"]]
    threads: config["threads"]["simulate"]
    resources:
        **model_job(
            lambda wc: coral_wiring.training_job(config, "sft", wc.name),
            mem_mb=32000,
            runtime=720,
        ),
    params:
        args=lambda wc: coral_wiring.sft_args(config, wc.name, REGISTRY),
        passages=lambda wc, input: (
            f"--run {input.run} --run-queries {input.queries} --corpus {input.corpus}"
            if "run" in input.keys()
            else (f"--corpus {input.corpus}" if "corpus" in input.keys() else "")
        ),
    shell:
        "convrag coral sft --tasks {input.tasks} --prompts {input.prompts} {params.passages} {params.args}"
        " --threads {threads} --out {output.model} --report {output.report} 2> {log}"


use rule score_retrieval from templates as coral_score_retrieval with:
    input:
        tasks=coral_wiring.tasks_file(config, L),
        runs=coral_wiring.run_files(config, L),
    output:
        coral_paths.retrieval_scores(L),
    log:
        L.log("coral/score_retrieval.log"),
    conda:
        CONDA_ENVS["cpu"]
    params:
        runs=shlex.quote(coral_wiring.runs_arg(config, L)),
        measures=" ".join(shlex.quote(m) for m in CORAL["measures"]),
        labels="flow",


# Table 3: one job per model x history strategy; the passages are the top of the configured
# retrieval run (no second search), the history as the strategy shapes it. Figure 4's sweep:
# one job per model x history length m (strategy wildcard history_m<m>), at one turn only.
rule coral_answer:
    input:
        unpack(
            lambda wc: {
                **coral_wiring.answer_inputs(config, L, PROMPTS),
                **coral_wiring.tuned_inputs(config, L, wc.model),
            }
        ),
        unpack(
            lambda wc: coral_wiring.framework_inputs(config, L, PROMPTS, wc.strategy)
        ),
    output:
        answers=coral_paths.answers(L, "{source}", "{model}", "{strategy}"),
        report=coral_paths.answers(
            L, "{source}", "{model}", "{strategy}", "report.json"
        ),
        accounting=coral_paths.answers(
            L, "{source}", "{model}", "{strategy}", "accounting.json"
        ),
    log:
        L.log("coral/answer/{source}/{model}/{strategy}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        model=alternatives(coral_wiring.answer_models(config)),
        strategy=alternatives(coral_wiring.strategies(config)),
    conda:
        lambda wc: conda_env(
            models=coral_wiring.generation_models(config, wc.model, wc.strategy),
            retriever=coral_wiring.framework_retriever(config, wc.strategy),
        )
    threads: config["threads"]["simulate"]
    resources:
        **model_job(lambda wc: coral_wiring.registry_model(config, wc.model)),
    params:
        args=lambda wc: coral_wiring.answer_args(
            config,
            wc.model,
            wc.strategy,
            coral_wiring.answer_registry(config, L, wc.model, REGISTRY),
            CACHE,
        ),
        framework=lambda wc, input: coral_wiring.framework_args(
            config, wc.model, wc.strategy, input
        ),
    shell:
        "convrag coral answer --tasks {input.tasks} --run {input.run} --run-queries {input.queries}"
        " --corpus {input.corpus} --prompts {input.prompts} --model {wildcards.model}"
        " {params.args} {params.framework} --threads {threads} --out {output.answers}"
        " --report {output.report} --accounting {output.accounting} 2> {log}"


# BLEU-1, ROUGE-L, ALCE's citation recall / precision and win / draw / lose against the golden
# response of one answers file.
rule coral_evaluate:
    input:
        tasks=coral_wiring.tasks_file(config, L),
        answers=coral_paths.answers(L, "{source}", "{model}", "{strategy}"),
        prompts=f"{PROMPTS}/coral/nli.yaml",
        pairwise=f"{PROMPTS}/coral/pairwise.yaml",
    output:
        scores=coral_paths.evaluation(L, "{source}", "{model}", "{strategy}"),
        verdicts=coral_paths.evaluation(
            L, "{source}", "{model}", "{strategy}", "verdicts.jsonl"
        ),
        accounting=coral_paths.evaluation(
            L, "{source}", "{model}", "{strategy}", "accounting.json"
        ),
    log:
        L.log("coral/evaluate/{source}/{model}/{strategy}.log"),
    wildcard_constraints:
        source=alternatives([coral_source(config)]),
        model=alternatives(coral_wiring.answer_models(config)),
        strategy=alternatives(coral_wiring.strategies(config)),
    conda:
        (
            CONDA_ENVS["vllm-gpu"]
            if CORAL["evaluation"]["nli"] == "true_t5"
            else conda_env(models=coral_wiring.evaluation_models(config))
        )
    threads: config["threads"]["simulate"]
    resources:
        **model_job(coral_wiring.evaluate_gpu(config, gpu_resources)),
    params:
        args=coral_wiring.evaluate_args(config, REGISTRY, CACHE, PROMPTS),
    shell:
        "convrag coral evaluate --tasks {input.tasks} --answers {input.answers} --model {wildcards.model}"
        " --strategy {wildcards.strategy} {params.args} --threads {threads} --out {output.scores}"
        " --verdicts {output.verdicts} --accounting {output.accounting} 2> {log}"
