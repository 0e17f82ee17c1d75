# cross: one grid across benchmarks. Multi-hop datasets are sharded (convrag lic-rag shard) and
# turned into TurnTasks; one answer job per (benchmark, retriever, policy, reader, delivery) over
# every domain of the benchmark; one scoring job per benchmark. Tables and figures go through the
# shared report rules (report.smk).
from convrag.studies.cross import paths as cross_paths
from convrag.studies.cross import wiring as cross_wiring
from convrag.studies.cross.plan import benchmarks as cross_benchmarks
from convrag.sharding import shard_settings

CROSS = config["cross"]


localrules:
    cross,
    cross_tasks,


# `snakemake --cores all cross`: this study alone.
rule cross:
    input:
        study_targets("cross"),


use rule shard from templates as cross_shard with:
    input:
        questions=L.questions("{dataset}"),
        prompts=f"{PROMPTS}/shard.yaml",
    output:
        shards=cross_paths.shards(L, "{dataset}"),
        report=cross_paths.shards(L, "{dataset}", "shard_report.md"),
        accounting=cross_paths.shards(L, "{dataset}", "accounting.json"),
    log:
        L.log("cross/shard/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(CROSS["multihop"] or ["-"]),
    conda:
        conda_env(models=[CROSS["sharding"]["model"]])
    resources:
        **model_job(CROSS["sharding"]["model"]),
    params:
        settings=jarg(shard_settings(CROSS["sharding"])),
        model=CROSS["sharding"]["model"],
        source=lambda wc: corpus_source(config, wc.dataset),
        registry=REGISTRY,
        cache=CACHE,


rule cross_tasks:
    input:
        unpack(lambda wc: cross_wiring.tasks_inputs(config, L, wc.dataset)),
    output:
        tasks=cross_paths.multihop_tasks(L, "{dataset}"),
        report=cross_paths.multihop_tasks(L, "{dataset}") + ".report.json",
    log:
        L.log("cross/tasks/{dataset}.log"),
    wildcard_constraints:
        dataset=alternatives(CROSS["multihop"] or ["-"]),
    conda:
        CONDA_ENVS["cpu"]
    params:
        shards=lambda wc, input: (
            f"--shards {input.shards}" if "shards" in input.keys() else ""
        ),
    shell:
        "convrag cross tasks --questions {input.questions} {params.shards} --out {output.tasks}"
        " --report {output.report} 2> {log}"


rule cross_answer:
    input:
        unpack(
            lambda wc: cross_wiring.answer_inputs(
                config, L, PROMPTS, wc.benchmark, wc.retriever, wc.policy
            )
        ),
    output:
        answers=cross_paths.answers(
            L, "{benchmark}", "{retriever}", "{policy}", "{reader}", "{delivery}"
        ),
        accounting=cross_paths.answers(
            L,
            "{benchmark}",
            "{retriever}",
            "{policy}",
            "{reader}",
            "{delivery}",
            "accounting.json",
        ),
    log:
        L.log("cross/answer/{benchmark}/{retriever}/{policy}/{reader}/{delivery}.log"),
    wildcard_constraints:
        benchmark=alternatives(cross_benchmarks(config)),
        retriever=alternatives(CROSS["retrievers"]),
        policy=alternatives([*CROSS["policies"], "none"]),
        reader=alternatives(CROSS["readers"]),
        delivery="recorded|sharded",
    conda:
        lambda wc: conda_env(
            models=cross_wiring.answer_models(
                config, wc.reader, wc.retriever, wc.policy
            ),
            retriever=wc.retriever,
        )
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=lambda wc: max(
            gpu_resources(m)["gpu"]
            for m in cross_wiring.answer_models(
                config, wc.reader, wc.retriever, wc.policy
            )
        ),
        gpu_model=lambda wc: gpu_resources(wc.reader).get("gpu_model", ""),
    params:
        args=lambda wc: cross_wiring.answer_args(
            config, L, wc.benchmark, wc.retriever, wc.policy
        ),
        rewrite=lambda wc, input: (
            f"--rewrite-prompts {input.rewrite_prompts}"
            if "rewrite_prompts" in input.keys()
            else ""
        ),
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag cross answer --tasks {input.tasks} --prompts {input.prompts} --model {wildcards.reader}"
        " --policy {wildcards.policy} --delivery {wildcards.delivery} {params.args} {params.rewrite}"
        " --registry {params.registry} --cache {params.cache} --threads {threads}"
        " --out {output.answers} --accounting {output.accounting} 2> {log}"


# cross.score_chunks > 1: the scoring of a benchmark split over that many jobs (every n-th answer
# file each), joined by a merge job into the same outputs
if CROSS["score_chunks"] == 1:

    rule cross_score:
        input:
            unpack(lambda wc: cross_wiring.score_inputs(config, L, wc.benchmark)),
        output:
            scores=cross_paths.scores(L, "{benchmark}"),
            contexts=cross_paths.scores(L, "{benchmark}", "contexts.parquet"),
            verdicts=cross_paths.scores(L, "{benchmark}", "verdicts.jsonl"),
            accounting=cross_paths.scores(L, "{benchmark}", "accounting.json"),
        log:
            L.log("cross/score/{benchmark}.log"),
        wildcard_constraints:
            benchmark=alternatives(cross_benchmarks(config)),
        conda:
            conda_env(models=cross_wiring.score_models(config))
        threads: config["threads"]["simulate"]
        resources:
            mem_mb=16000,
            runtime=240,
            gpu=max(
                [gpu_resources(m)["gpu"] for m in cross_wiring.score_models(config)]
                or [0]
            ),
        params:
            answers=lambda wc: cross_wiring.score_answers_arg(config, L, wc.benchmark),
            args=lambda wc: cross_wiring.score_args(config, wc.benchmark, PROMPTS),
            registry=REGISTRY,
            cache=CACHE,
            prompts_dir=PROMPTS,
        shell:
            "convrag cross score --tasks {input.tasks} --answers {params.answers} --corpora {input.corpora}"
            " {params.args} --prompts-dir {params.prompts_dir} --registry {params.registry} --cache {params.cache}"
            " --threads {threads} --out {output.scores} --contexts {output.contexts}"
            " --verdicts {output.verdicts} --accounting {output.accounting} 2> {log}"

else:

    rule cross_score_chunk:
        input:
            unpack(lambda wc: cross_wiring.score_inputs(config, L, wc.benchmark)),
        output:
            scores=cross_paths.score_chunk(L, "{benchmark}", "{chunk}"),
            contexts=cross_paths.score_chunk(
                L, "{benchmark}", "{chunk}", "contexts.parquet"
            ),
            verdicts=cross_paths.score_chunk(
                L, "{benchmark}", "{chunk}", "verdicts.jsonl"
            ),
            accounting=cross_paths.score_chunk(
                L, "{benchmark}", "{chunk}", "accounting.json"
            ),
        log:
            L.log("cross/score/{benchmark}/chunk{chunk}.log"),
        wildcard_constraints:
            benchmark=alternatives(cross_benchmarks(config)),
            chunk=r"\d+",
        conda:
            conda_env(models=cross_wiring.score_models(config))
        threads: config["threads"]["simulate"]
        resources:
            mem_mb=16000,
            runtime=240,
            gpu=max(
                [gpu_resources(m)["gpu"] for m in cross_wiring.score_models(config)]
                or [0]
            ),
        params:
            answers=lambda wc: cross_wiring.score_answers_arg(config, L, wc.benchmark),
            args=lambda wc: cross_wiring.score_args(config, wc.benchmark, PROMPTS),
            registry=REGISTRY,
            cache=CACHE,
            prompts_dir=PROMPTS,
            chunks=CROSS["score_chunks"],
        shell:
            "convrag cross score --tasks {input.tasks} --answers {params.answers} --corpora {input.corpora}"
            " {params.args} --prompts-dir {params.prompts_dir} --registry {params.registry} --cache {params.cache}"
            " --threads {threads} --chunk {wildcards.chunk} --chunks {params.chunks} --out {output.scores} --contexts {output.contexts}"
            " --verdicts {output.verdicts} --accounting {output.accounting} 2> {log}"

    rule cross_score_merge:
        input:
            scores=expand(
                cross_paths.score_chunk(L, "{{benchmark}}", "{chunk}"),
                chunk=range(CROSS["score_chunks"]),
            ),
            contexts=expand(
                cross_paths.score_chunk(
                    L, "{{benchmark}}", "{chunk}", "contexts.parquet"
                ),
                chunk=range(CROSS["score_chunks"]),
            ),
            verdicts=expand(
                cross_paths.score_chunk(
                    L, "{{benchmark}}", "{chunk}", "verdicts.jsonl"
                ),
                chunk=range(CROSS["score_chunks"]),
            ),
            accounting=expand(
                cross_paths.score_chunk(
                    L, "{{benchmark}}", "{chunk}", "accounting.json"
                ),
                chunk=range(CROSS["score_chunks"]),
            ),
        output:
            scores=cross_paths.scores(L, "{benchmark}"),
            contexts=cross_paths.scores(L, "{benchmark}", "contexts.parquet"),
            verdicts=cross_paths.scores(L, "{benchmark}", "verdicts.jsonl"),
            accounting=cross_paths.scores(L, "{benchmark}", "accounting.json"),
        log:
            L.log("cross/score/{benchmark}.log"),
        wildcard_constraints:
            benchmark=alternatives(cross_benchmarks(config)),
        conda:
            CONDA_ENVS["cpu"]
        shell:
            "convrag cross merge-scores --scores {input.scores} --contexts {input.contexts}"
            " --verdicts {input.verdicts} --accounting {input.accounting} --out {output.scores}"
            " --out-contexts {output.contexts} --out-verdicts {output.verdicts}"
            " --out-accounting {output.accounting} 2> {log}"
