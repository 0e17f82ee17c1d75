# Data: download real files (recording sha256), prepare corpora, select questions.


# Downloads run on the submit host: cluster compute nodes often have no internet access.
localrules:
    download_file,


# (Input and params functions live in common.smk.)


rule download_file:
    output:
        f"{RES}/raw/{{corpus}}/{{filename}}",
    log:
        "logs/download/{corpus}/{filename}.log",
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
        corpus=f"{RES}/corpora/{{corpus}}/corpus.jsonl",
        questions=f"{RES}/corpora/{{corpus}}/questions_all.jsonl",
    log:
        "logs/prepare_corpus/{corpus}.log",
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
        lambda wc: f"{RES}/corpora/{corpus_of(wc.dataset)}/questions_all.jsonl",
    output:
        f"{RES}/datasets/{{dataset}}/questions.jsonl",
    log:
        "logs/select_questions/{dataset}.log",
    conda:
        CONDA_ENVS["cpu"]
    params:
        spec=lambda wc: jarg(config["datasets"][wc.dataset]),
    shell:
        "convrag select-questions --dataset {wildcards.dataset} --spec {params.spec}"
        " --questions {input} --out {output} 2> {log}"
