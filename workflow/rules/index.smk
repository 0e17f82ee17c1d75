# One index per (corpus, retriever), built once and shared by every model and condition.


rule build_index:
    input:
        f"{RES}/corpora/{{corpus}}/corpus.jsonl",
    output:
        f"{RES}/indexes/{{corpus}}/{{retriever}}/manifest.json",
    params:
        kind=lambda wc: retriever_kind(config, wc.retriever),
        params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
    threads: config["threads"]["index"]
    log:
        "logs/build_index/{corpus}/{retriever}.log",
    benchmark:
        "benchmarks/out/build_index/{corpus}/{retriever}.tsv"
    resources:
        mem_mb=16000,
        runtime=240,
    shell:
        "convrag build-index --retriever {params.kind} --params {params.params}"
        " --corpus {input} --out-dir $(dirname {output}) 2> {log}"
