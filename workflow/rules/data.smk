# Data: download real files (recording sha256), prepare corpora, select questions.


def _raw_inputs(wildcards):
    c = config["corpora"][wildcards.corpus]
    if c["kind"] == "miniworld":
        return []
    if "local" in c:
        return {"questions": c["local"]["questions"], "corpus": c["local"]["corpus"]}
    return {
        "questions": f"{RES}/raw/{wildcards.corpus}/{c['source']['questions']}",
        "corpus": f"{RES}/raw/{wildcards.corpus}/{c['source']['corpus']}",
    }


def _download_params(wildcards):
    s = config["corpora"][wildcards.corpus]["source"]
    return dict(
        repo_id=s["repo_id"],
        revision=s["revision"],
        repo_type=s["repo_type"],
        filename=wildcards.filename,
        sha256=s["sha256"].get(wildcards.filename),
    )


rule download_file:
    output:
        f"{RES}/raw/{{corpus}}/{{filename}}",
    params:
        spec=lambda wc: jarg(_download_params(wc)),
    log:
        "logs/download/{corpus}/{filename}.log",
    resources:
        runtime=60,
        mem_mb=4000,
    shell:
        "convrag download --spec {params.spec} --out {output} 2> {log}"


rule prepare_corpus:
    input:
        unpack(_raw_inputs),
    output:
        corpus=f"{RES}/corpora/{{corpus}}/corpus.jsonl",
        questions=f"{RES}/corpora/{{corpus}}/questions_all.jsonl",
    params:
        spec=lambda wc: jarg(config["corpora"][wc.corpus]),
        files=lambda wc, input: jarg(dict(input)),
    log:
        "logs/prepare_corpus/{corpus}.log",
    resources:
        mem_mb=8000,
    shell:
        "convrag prepare-corpus --name {wildcards.corpus} --spec {params.spec} --files {params.files}"
        " --out-dir $(dirname {output.corpus}) 2> {log}"


rule select_questions:
    input:
        lambda wc: f"{RES}/corpora/{corpus_of(wc.dataset)}/questions_all.jsonl",
    output:
        f"{RES}/datasets/{{dataset}}/questions.jsonl",
    params:
        spec=lambda wc: jarg(config["datasets"][wc.dataset]),
    log:
        "logs/select_questions/{dataset}.log",
    shell:
        "convrag select-questions --dataset {wildcards.dataset} --spec {params.spec}"
        " --questions {input} --out {output} 2> {log}"
