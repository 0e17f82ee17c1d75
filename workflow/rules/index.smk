# Expensive artifacts, built once and shared by every model, condition and study: the
# knowledge graph of a corpus (LLM OpenIE, for the graph retrievers) and one index per
# (corpus, retriever). Both run before any waiting model job (priority 3): they gate the
# longest jobs (Snakemake's priorities do not pass upstream by themselves).


rule build_graph:
    input:
        L.corpus("{corpus}"),
    output:
        manifest=L.graph_manifest("{corpus}"),
        accounting=L.graph_accounting("{corpus}"),
    log:
        L.log("build_graph/{corpus}.log"),
    benchmark:
        L.log("benchmarks/build_graph/{corpus}.tsv")
    wildcard_constraints:
        corpus=NAME,
    priority: 3
    conda:
        conda_env(models=[KG["model"]])
    threads: config["threads"]["index"]
    resources:
        **model_job(KG["model"], runtime=480),
    params:
        model=KG["model"],
        params=jarg(graph_params()),
        registry=REGISTRY,
        cache=CACHE,
    shell:
        "convrag build-graph --corpus {input} --model {params.model} --params {params.params}"
        " --registry {params.registry} --cache {params.cache} --threads {threads}"
        " --out-dir $(dirname {output.manifest}) --accounting {output.accounting} 2> {log}"


rule build_index:
    input:
        unpack(index_inputs),
    output:
        L.index_manifest("{corpus}", "{retriever}"),
    log:
        L.log("build_index/{corpus}/{retriever}.log"),
    benchmark:
        L.log("benchmarks/build_index/{corpus}/{retriever}.tsv")
    wildcard_constraints:
        corpus=NAME,
        retriever=NAME,
    priority: 3
    conda:
        # pyserini (Lucene) BM25 needs a JDK: java-bm25; an LLM-built index (RAPTOR) on
        # GPUs: vllm-gpu; every other index: cpu
        lambda wc: conda_env(
            models=[m for m in [retriever_llm(config, wc.retriever)] if m],
            retriever=wc.retriever,
        )
    threads: config["threads"]["index"]
    resources:
        **model_job(index_gpu),
    params:
        kind=lambda wc: retriever_kind(config, wc.retriever),
        params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        llm=index_llm_args,
        graph=graph_dir_arg,
    shell:
        "convrag build-index --retriever {params.kind} --params {params.params}"
        " --corpus {input.corpus} {params.graph} {params.llm} --threads {threads}"
        " --out-dir $(dirname {output}) 2> {log}"
