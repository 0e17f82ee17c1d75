# Data: download real files (recording sha256), prepare corpora, select questions; benchmarks
# of conversation turns: their tasks and one corpus per domain.


# Downloads run on the submit host: cluster compute nodes often have no internet access.
localrules:
    download_file,


rule download_file:
    output:
        L.raw("{corpus}", "{filename}"),
    log:
        L.log("download/{corpus}/{filename}.log"),
    wildcard_constraints:
        corpus=NAME,
        filename=r"[^/]+",
    conda:
        CONDA_ENVS["cpu"]
    resources:
        runtime=60,
        mem_mb=4000,
    params:
        spec=lambda wc: jarg(download_params(wc)),
    shell:
        "convrag download --spec {params.spec} --out {output} 2> {log}"


rule prepare_corpus:
    input:
        unpack(raw_inputs),
    output:
        corpus=L.corpus("{corpus}"),
        questions=L.questions_all("{corpus}"),
    log:
        L.log("prepare_corpus/{corpus}.log"),
    wildcard_constraints:
        corpus=alternatives(list(config["corpora"])),
    conda:
        CONDA_ENVS["cpu"]
    resources:
        mem_mb=8000,
    params:
        spec=lambda wc: jarg(config["corpora"][wc.corpus]),
        files=lambda wc, input: jarg(dict(input)),
    shell:
        "convrag prepare-corpus --name {wildcards.corpus} --spec {params.spec} --files {params.files}"
        " --out-dir $(dirname {output.corpus}) 2> {log}"


rule select_questions:
    input:
        lambda wc: L.questions_all(corpus_of(wc.dataset)),
    output:
        L.questions("{dataset}"),
    log:
        L.log("select_questions/{dataset}.log"),
    wildcard_constraints:
        dataset=NAME,
    conda:
        CONDA_ENVS["cpu"]
    params:
        spec=lambda wc: jarg(config["datasets"][wc.dataset]),
    shell:
        "convrag select-questions --dataset {wildcards.dataset} --spec {params.spec}"
        " --questions {input} --out {output} 2> {log}"


rule benchmark_tasks:
    input:
        unpack(benchmark_task_inputs),
    output:
        tasks=L.benchmark_tasks("{benchmark}"),
        report=L.benchmark_report("{benchmark}"),
    log:
        L.log("benchmark_tasks/{benchmark}.log"),
    wildcard_constraints:
        benchmark=alternatives(config["benchmarks"]),
    conda:
        CONDA_ENVS["cpu"]
    resources:
        mem_mb=8000,
    params:
        spec=lambda wc: jarg(config["benchmarks"][wc.benchmark]),
        files=lambda wc, input: jarg(dict(input)),
    shell:
        "convrag benchmark-tasks --name {wildcards.benchmark} --spec {params.spec} --files {params.files}"
        " --out {output.tasks} --report {output.report} 2> {log}"


# One domain's corpus; every gold id of the domain's turns is looked up in it before it is
# written (convrag.data.gold: an error, or counted where allow_missing_gold says it is a sample).
rule benchmark_corpus:
    input:
        unpack(benchmark_corpus_inputs),
        tasks=lambda wc: L.benchmark_tasks(BENCHMARK_CORPORA[wc.corpus][0]),
    output:
        corpus=L.corpus("{corpus}"),
        gold=L.corpus_gold("{corpus}"),
    log:
        L.log("benchmark_corpus/{corpus}.log"),
    wildcard_constraints:
        corpus=alternatives(BENCHMARK_CORPORA),
    conda:
        CONDA_ENVS["cpu"]
    resources:
        mem_mb=8000,
    params:
        benchmark=lambda wc: BENCHMARK_CORPORA[wc.corpus][0],
        domain=lambda wc: BENCHMARK_CORPORA[wc.corpus][1],
        spec=lambda wc: jarg(config["benchmarks"][BENCHMARK_CORPORA[wc.corpus][0]]),
        files=lambda wc, input: jarg({k: v for k, v in input.items() if k != "tasks"}),
    shell:
        "convrag benchmark-corpus --name {params.benchmark} --domain {params.domain} --spec {params.spec}"
        " --files {params.files} --tasks {input.tasks} --out {output.corpus} --gold {output.gold} 2> {log}"
