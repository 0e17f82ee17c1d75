# mtrag_un: retrieval runs over the benchmark's turns (one job per domain x retriever x query
# policy, answerable and partial tasks, as in the paper), scored per task with ir_measures.
# Its tables and figures go through the shared report rules (report.smk).
from convrag.studies.mtrag_un import paths as mtrag_paths
from convrag.studies.mtrag_un import wiring as mtrag_wiring
from convrag.studies.mtrag_un.plan import domains as mtrag_domains
from convrag.studies.mtrag_un import plan as mtrag_plan
from convrag.data.benchmarks import corpus_id as mtrag_corpus_id
from convrag.studies.mtrag_un.analyses import SCORE_LABELS as mtrag_score_labels

MTRAG = config["mtrag_un"]
MTRAG_RUNS = mtrag_wiring.retrieve_names(
    config
)  # Table 2's runs and the mtrag_retrieval target's


localrules:
    mtrag_un,
    mtrag_un_score_retrieval,
    mtrag_un_official_prompt,  # a download: on the submit host


# `snakemake --cores all mtrag_un`: this study alone.
rule mtrag_un:
    input:
        study_targets("mtrag_un"),


use rule retrieve from templates as mtrag_un_retrieve with:
    input:
        unpack(
            lambda wc: mtrag_wiring.retrieve_inputs(
                config,
                L,
                PROMPTS,
                wc.benchmark,
                wc.domain,
                wc.retriever,
                wc.policy,
            )
        ),
    output:
        run=mtrag_paths.run(L, "{benchmark}", "{domain}", "{retriever}", "{policy}"),
        queries=mtrag_paths.run(
            L, "{benchmark}", "{domain}", "{retriever}", "{policy}", "queries.jsonl"
        ),
        accounting=mtrag_paths.run(
            L, "{benchmark}", "{domain}", "{retriever}", "{policy}", "accounting.json"
        ),
    log:
        L.log("mtrag_un/retrieve/{benchmark}/{retriever}/{policy}/{domain}.log"),
    wildcard_constraints:
        benchmark=alternatives(MTRAG_RUNS["benchmark"]),
        domain=alternatives(MTRAG_RUNS["domain"]),
        retriever=alternatives(MTRAG_RUNS["retriever"]),
        policy=alternatives(MTRAG_RUNS["policy"]),
    conda:
        lambda wc: conda_env(
            models=mtrag_wiring.models(config, wc.retriever, wc.policy),
            retriever=wc.retriever,
        )
    params:
        select=lambda wc: f"--domain {wc.domain}",
        args=lambda wc: mtrag_wiring.retrieve_args(
            config, wc.retriever, wc.policy, REGISTRY, CACHE
        ),


use rule score_retrieval from templates as mtrag_un_score_retrieval with:
    input:
        tasks=L.benchmark_tasks(MTRAG["benchmark"]),
        runs=mtrag_wiring.run_files(config, L),
    output:
        mtrag_paths.retrieval_scores(L),
    log:
        L.log("mtrag_un/score_retrieval.log"),
    conda:
        CONDA_ENVS["cpu"]
    params:
        runs=shlex.quote(mtrag_wiring.runs_arg(config, L)),
        measures=" ".join(shlex.quote(m) for m in MTRAG["measures"]),
        labels=" ".join(mtrag_score_labels),


# The mtrag_retrieval target: the runs over MTRAG's retrieval tasks (the retrieve rule above, its
# shipped query forms), scored per task as Table 2's are.
if MTRAG["mtrag_retrieval"]["benchmark"] is not None:

    localrules:
        mtrag_un_score_mtrag_retrieval,

    use rule score_retrieval from templates as mtrag_un_score_mtrag_retrieval with:
        input:
            tasks=L.benchmark_tasks(MTRAG["mtrag_retrieval"]["benchmark"]),
            runs=mtrag_wiring.run_files(
                config, L, jobs=mtrag_plan.mtrag_retrieval_jobs(config)
            ),
        output:
            mtrag_paths.mtrag_retrieval_scores(L),
        log:
            L.log("mtrag_un/score_mtrag_retrieval.log"),
        conda:
            CONDA_ENVS["cpu"]
        params:
            runs=shlex.quote(
                mtrag_wiring.runs_arg(
                    config, L, jobs=mtrag_plan.mtrag_retrieval_jobs(config)
                )
            ),
            measures=" ".join(shlex.quote(m) for m in MTRAG["measures"]),
            labels="first_turn",


# Generation (Table 4): one job per model x setting x domain; the RAG setting reads the
# ranking of the configured retrieval run (no second search), the reference setting the task's
# own contexts.
rule mtrag_un_answer:
    input:
        unpack(
            lambda wc: mtrag_wiring.answer_inputs(
                config, L, PROMPTS, wc.benchmark, wc.setting, wc.domain
            )
        ),
    output:
        answers=mtrag_paths.answers(
            L, "{benchmark}", "{model}", "{setting}", "{domain}"
        ),
        accounting=mtrag_paths.answers(
            L, "{benchmark}", "{model}", "{setting}", "{domain}", "accounting.json"
        ),
    log:
        L.log("mtrag_un/answer/{benchmark}/{model}/{setting}/{domain}.log"),
    wildcard_constraints:
        benchmark=alternatives([MTRAG["benchmark"]]),
        model=alternatives(MTRAG["generation"]["models"] or ["-"]),
        setting=alternatives(MTRAG["generation"]["settings"]),
        domain=alternatives(mtrag_domains(config)),
    conda:
        lambda wc: conda_env(models=[wc.model])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(lambda wc: wc.model),
    params:
        registry=REGISTRY,
        cache=CACHE,
        args=lambda wc: mtrag_wiring.answer_args(config, wc.setting),
        run=lambda wc, input: (
            f"--run {input.run} --run-queries {input.queries} --corpus {input.corpus}"
            if "run" in input.keys()
            else ""
        ),
    shell:
        "convrag answer --tasks {input.tasks} --domain {wildcards.domain} --model {wildcards.model}"
        " --prompts {input.prompts} --registry {params.registry} --cache {params.cache} {params.args} {params.run}"
        " --threads {threads} --out {output.answers} --accounting {output.accounting} 2> {log}"


# The official scorer on one answers file: metrics, judges (one model), conditioning.
# IBM's own judge prompts where the config asks for them (evaluation.prompts.<judge>: official):
# fetched from the scorer's source at the benchmark's pinned commit and adapted, never stored in
# the repository.
rule mtrag_un_official_prompt:
    output:
        mtrag_paths.official_prompt(L, "{judge}"),
    log:
        L.log("mtrag_un/official_prompt/{judge}.log"),
    wildcard_constraints:
        judge="idk|rb_llm|clarification",
    conda:
        CONDA_ENVS["cpu"]
    params:
        revision=config["benchmarks"][MTRAG["benchmark"]].get("revision") or "",
        sha256=lambda w: mtrag_wiring.official_sha256_arg(config, w.judge),
    shell:
        "convrag mtrag-un official-prompt --judge {wildcards.judge} --revision {params.revision}"
        " {params.sha256} --out {output} 2> {log}"


rule mtrag_un_evaluate:
    input:
        tasks=L.benchmark_tasks(MTRAG["benchmark"]),
        prompt_files=list(mtrag_wiring.judge_prompt_files(config, L).values()),
        answers=mtrag_paths.answers(
            L, "{benchmark}", "{model}", "{setting}", "{domain}"
        ),
        corpus=lambda wc: (
            [L.corpus(mtrag_corpus_id(wc.benchmark, wc.domain))]
            if wc.setting == "rag"
            else []
        ),
    output:
        scores=mtrag_paths.evaluation(
            L, "{benchmark}", "{model}", "{setting}", "{domain}"
        ),
        verdicts=mtrag_paths.evaluation(
            L, "{benchmark}", "{model}", "{setting}", "{domain}", "verdicts.jsonl"
        ),
        accounting=mtrag_paths.evaluation(
            L, "{benchmark}", "{model}", "{setting}", "{domain}", "accounting.json"
        ),
    log:
        L.log("mtrag_un/evaluate/{benchmark}/{model}/{setting}/{domain}.log"),
    wildcard_constraints:
        benchmark=alternatives([MTRAG["benchmark"]]),
        model=alternatives(MTRAG["generation"]["models"] or ["-"]),
        setting=alternatives(MTRAG["generation"]["settings"]),
        domain=alternatives(mtrag_domains(config)),
    conda:
        conda_env(models=[MTRAG["evaluation"]["judge_model"]])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(MTRAG["evaluation"]["judge_model"]),
    params:
        args=mtrag_wiring.evaluate_args(config, REGISTRY, CACHE, PROMPTS, L),
        corpus=lambda wc, input: f"--corpus {input.corpus}" if input.corpus else "",
    shell:
        "convrag mtrag-un evaluate --tasks {input.tasks} --answers {input.answers} --model {wildcards.model}"
        " --setting {wildcards.setting} {params.corpus} {params.args} --threads {threads}"
        " --out {output.scores} --verdicts {output.verdicts} --accounting {output.accounting} 2> {log}"


# MTRAG's human-evaluated responses re-scored by the same metrics and judges (figure5).
rule mtrag_un_human_eval:
    input:
        evaluations=mtrag_wiring.human_input(config, from_repo),
        # the judges' prompt files it reads (--prompt-files): an official prompt is downloaded
        # by mtrag_un_official_prompt, which must finish first
        prompt_files=list(mtrag_wiring.judge_prompt_files(config, L).values()),
    output:
        scores=mtrag_paths.human_scores(L),
        verdicts=mtrag_paths.human_scores(L, "verdicts.jsonl"),
        accounting=mtrag_paths.human_scores(L, "accounting.json"),
    log:
        L.log("mtrag_un/human_eval.log"),
    conda:
        conda_env(models=[MTRAG["evaluation"]["judge_model"]])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(MTRAG["evaluation"]["judge_model"]),
    params:
        source=lambda wc, input: (
            " ".join(input.evaluations) or mtrag_wiring.human_source(config, from_repo)
        ),
        args=mtrag_wiring.evaluate_args(config, REGISTRY, CACHE, PROMPTS, L),
    shell:
        "convrag mtrag-un human-eval --evaluations {params.source} {params.args} --threads {threads}"
        " --out {output.scores} --verdicts {output.verdicts} --accounting {output.accounting} 2> {log}"
