# mtrag_un: retrieval runs over the benchmark's turns (one job per domain x retriever x query
# policy, answerable and partial tasks, as in the paper), scored per task with ir_measures.
# Its tables and figures go through the shared report rules (report.smk).
from convrag.studies.mtrag_un import paths as mtrag_paths
from convrag.studies.mtrag_un import wiring as mtrag_wiring
from convrag.studies.mtrag_un.plan import domains as mtrag_domains

MTRAG = config["mtrag_un"]


localrules:
    mtrag_un,
    score_mtrag_un_retrieval,


# `snakemake --cores all mtrag_un`: this study alone.
rule mtrag_un:
    input:
        study_targets("mtrag_un"),


rule mtrag_un_retrieve:
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
        "logs/mtrag_un/retrieve/{benchmark}/{retriever}/{policy}/{domain}.log",
    wildcard_constraints:
        benchmark=alternatives([MTRAG["benchmark"]]),
        domain=alternatives(mtrag_domains(config)),
        retriever=alternatives(MTRAG["retrievers"]),
        policy=alternatives(MTRAG["policies"]),
    conda:
        lambda wc: conda_env(
            models=mtrag_wiring.models(config, wc.retriever, wc.policy),
            retriever=wc.retriever,
        )
    threads: config["threads"]["index"]
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        args=lambda wc: mtrag_wiring.retrieve_args(
            config, wc.retriever, wc.policy, REGISTRY, CACHE
        ),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        prompts=lambda wc, input: (
            f"--rewrite-prompts {input.rewrite_prompts}"
            if "rewrite_prompts" in input.keys()
            else ""
        ),
    shell:
        "convrag retrieve --tasks {input.tasks} --domain {wildcards.domain} --index-dir $(dirname {input.index})"
        " --retriever-params {params.retriever_params} --policy {wildcards.policy} {params.args} {params.prompts}"
        " --threads {threads} --out-run {output.run} --out-queries {output.queries}"
        " --accounting {output.accounting} 2> {log}"


rule score_mtrag_un_retrieval:
    input:
        tasks=L.benchmark_tasks(MTRAG["benchmark"]),
        runs=mtrag_wiring.run_files(config, L),
    output:
        mtrag_paths.retrieval_scores(L),
    log:
        "logs/mtrag_un/score_retrieval.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        runs=shlex.quote(mtrag_wiring.runs_arg(config, L)),
        measures=" ".join(shlex.quote(m) for m in MTRAG["measures"]),
    shell:
        "convrag mtrag-un score-retrieval --tasks {input.tasks} --runs {params.runs}"
        " --measures {params.measures} --out {output} 2> {log}"
