# One index per (corpus, retriever), built once and shared by every model and condition.


rule build_index:
    input:
        f"{RES}/corpora/{{corpus}}/corpus.jsonl",
    output:
        f"{RES}/indexes/{{corpus}}/{{retriever}}/manifest.json",
    log:
        "logs/build_index/{corpus}/{retriever}.log",
    benchmark:
        "benchmarks/out/build_index/{corpus}/{retriever}.tsv"
    conda:
        # pyserini (Lucene) BM25 needs a JDK: java-bm25; every other index: cpu
        lambda wc: conda_env(retriever=wc.retriever)
    threads: config["threads"]["index"]
    resources:
        mem_mb=16000,
        runtime=240,
    params:
        kind=lambda wc: retriever_kind(config, wc.retriever),
        params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
    shell:
        "convrag build-index --retriever {params.kind} --params {params.params}"
        " --corpus {input} --out-dir $(dirname {output}) 2> {log}"
