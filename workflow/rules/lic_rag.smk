# lic_rag: shard questions, simulate conversations (one job per dataset x model x
# retriever x condition x policy x question chunk), score, and build tables and figures.
LIC_OUT = f"{RES}/lic_rag"


# Cheap aggregation steps run on the submit host, never as cluster jobs.
localrules:
    score_lic_rag,
    table2_full_vs_sharded,
    figure_delivery_conditions,
    accounting_lic_rag,


def lic_rag_targets():
    # Conversations are targets too: deleting one makes Snakemake redo that job (from the
    # LLM cache) and everything downstream of it, not silently keep stale tables.
    return conversation_files() + [
        f"{LIC_OUT}/tables/table2_full_vs_sharded.csv",
        f"{LIC_OUT}/tables/table2_full_vs_sharded.md",
        f"{LIC_OUT}/figures/delivery_conditions.png",
        f"{LIC_OUT}/figures/delivery_conditions.pdf",
        f"{LIC_OUT}/figures/delivery_conditions.csv",
        f"{LIC_OUT}/tables/accounting.csv",
    ] + [f"{LIC_OUT}/shards/{ds}/shard_report.md" for ds in LIC["datasets"]]


def conversation_files():
    return [
        f"{LIC_OUT}/conversations/{j['dataset']}/{j['model']}/{j['retriever']}/"
        f"{j['condition']}_{j['policy']}/chunk{j['chunk']}.jsonl"
        for j in simulate_jobs(config)
    ]


def _user_model():
    return LIC["user_simulator"]["model"] or LIC["sharding"]["model"]


rule shard_questions:
    input:
        questions=f"{RES}/datasets/{{dataset}}/questions.jsonl",
        prompts=f"{PROMPTS}/lic_rag/shard.yaml",
    output:
        shards=f"{LIC_OUT}/shards/{{dataset}}/shards.jsonl",
        report=report(
            f"{LIC_OUT}/shards/{{dataset}}/shard_report.md",
            caption="../report/shard_report.rst",
            category="lic_rag",
            subcategory="shards",
        ),
        accounting=f"{LIC_OUT}/shards/{{dataset}}/accounting.json",
    params:
        settings=jarg(LIC["sharding"]),
    threads: config["threads"]["shard"]
    log:
        "logs/lic_rag/shard/{dataset}.log",
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=gpu_resources(LIC["sharding"]["model"])["gpu"],
        gpu_model=gpu_resources(LIC["sharding"]["model"]).get("gpu_model", ""),
    shell:
        "convrag shard --questions {input.questions} --prompts {input.prompts}"
        " --model {LIC[sharding][model]} --registry {REGISTRY} --cache {CACHE}"
        " --settings {params.settings} --out {output.shards} --report {output.report}"
        " --accounting {output.accounting} 2> {log}"


def _simulate_inputs(wc):
    corpus = corpus_of(wc.dataset)
    return dict(
        questions=f"{RES}/datasets/{wc.dataset}/questions.jsonl",
        shards=f"{LIC_OUT}/shards/{wc.dataset}/shards.jsonl",
        corpus=f"{RES}/corpora/{corpus}/corpus.jsonl",
        index=f"{RES}/indexes/{corpus}/{wc.retriever}/manifest.json",
        prompts=f"{PROMPTS}/lic_rag/assistant.yaml",
    )


rule simulate:
    input:
        unpack(_simulate_inputs),
    output:
        conversations=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/{{condition}}_{{policy}}/chunk{{chunk}}.jsonl",
        accounting=f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/{{condition}}_{{policy}}/chunk{{chunk}}.accounting.json",
    params:
        settings=lambda wc: jarg(
            {
                k: LIC[k]
                for k in ("runs", "chunk_size", "top_k", "seed", "max_extra_turns", "assistant", "user_simulator")
            }
        ),
        retriever_kind=lambda wc: retriever_kind(config, wc.retriever),
        retriever_params=lambda wc: jarg(config["retrievers"][wc.retriever]["params"]),
        user_model=_user_model(),
    threads: config["threads"]["simulate"]
    log:
        "logs/lic_rag/simulate/{dataset}/{model}/{retriever}/{condition}_{policy}/chunk{chunk}.log",
    benchmark:
        "benchmarks/out/simulate/{dataset}/{model}/{retriever}/{condition}_{policy}/chunk{chunk}.tsv"
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=lambda wc: gpu_resources(wc.model)["gpu"],
        gpu_model=lambda wc: gpu_resources(wc.model).get("gpu_model", ""),
    shell:
        "convrag simulate --questions {input.questions} --shards {input.shards}"
        " --corpus {input.corpus} --index-dir $(dirname {input.index})"
        " --retriever {params.retriever_kind} --retriever-params {params.retriever_params}"
        " --retriever-name {wildcards.retriever} --prompts {input.prompts}"
        " --dataset {wildcards.dataset} --model {wildcards.model} --user-model {params.user_model}"
        " --condition {wildcards.condition} --policy {wildcards.policy} --chunk {wildcards.chunk}"
        " --settings {params.settings} --registry {REGISTRY} --cache {CACHE}"
        " --threads {threads} --out {output.conversations} --accounting {output.accounting} 2> {log}"


rule score_lic_rag:
    input:
        conversations=conversation_files(),
        questions=expand(f"{RES}/datasets/{{dataset}}/questions.jsonl", dataset=LIC["datasets"]),
    output:
        conversations=f"{LIC_OUT}/scores/conversations.parquet",
        turns=f"{LIC_OUT}/scores/turns.parquet",
    params:
        top_k=LIC["top_k"],
    log:
        "logs/lic_rag/score.log",
    shell:
        "convrag score --conversations {input.conversations} --questions {input.questions}"
        " --top-k {params.top_k} --out {output.conversations} --out-turns {output.turns} 2> {log}"


rule table2_full_vs_sharded:
    input:
        f"{LIC_OUT}/scores/conversations.parquet",
    output:
        csv=report(
            f"{LIC_OUT}/tables/table2_full_vs_sharded.csv",
            caption="../report/table2_full_vs_sharded.rst",
            category="lic_rag",
            subcategory="tables",
        ),
        md=f"{LIC_OUT}/tables/table2_full_vs_sharded.md",
    params:
        boot=jarg(LIC["bootstrap"]),
    log:
        "logs/lic_rag/table2.log",
    shell:
        "convrag lic-rag table2 --scores {input} --bootstrap {params.boot}"
        " --out-stem {LIC_OUT}/tables/table2_full_vs_sharded 2> {log}"


rule figure_delivery_conditions:
    input:
        f"{LIC_OUT}/scores/conversations.parquet",
    output:
        png=report(
            f"{LIC_OUT}/figures/delivery_conditions.png",
            caption="../report/delivery_conditions.rst",
            category="lic_rag",
            subcategory="figures",
        ),
        pdf=f"{LIC_OUT}/figures/delivery_conditions.pdf",
        data=f"{LIC_OUT}/figures/delivery_conditions.csv",
        data_md=f"{LIC_OUT}/figures/delivery_conditions.md",
    params:
        boot=jarg(LIC["bootstrap"]),
    log:
        "logs/lic_rag/figure_delivery_conditions.log",
    shell:
        "convrag lic-rag figure-delivery --scores {input} --bootstrap {params.boot}"
        " --out-stem {LIC_OUT}/figures/delivery_conditions 2> {log}"


rule accounting_lic_rag:
    input:
        conversation_files(),
    output:
        report(
            f"{LIC_OUT}/tables/accounting.csv",
            caption="../report/accounting.rst",
            category="lic_rag",
            subcategory="tables",
        ),
    log:
        "logs/lic_rag/accounting.log",
    shell:
        "convrag accounting --conversations {input} --out {output} 2> {log}"
