# worse_labels: per benchmark slice, the retriever ladder (query rungs, LLM expansion rungs fused
# with weights fitted on train, fuse rungs), the contexts of every rung with their qrels labels,
# readers, content judges, the answer judges and the blind audit. Its tables and figures go
# through the shared report rules (report.smk).
from convrag.cliargs import sampling_flag
from convrag.studies.worse_labels import paths as wl_paths
from convrag.studies.worse_labels import wiring as wl_wiring

WL = config["worse_labels"]
WL_SLICES = wl_wiring.slice_names(config)
WL_DOMAINS = wl_wiring.all_domains(config)
WL_READERS = WL["readers"]["models"] or ["-"]
WL_JUDGES = wl_wiring.content_judges(config)


localrules:
    worse_labels,
    worse_labels_released,
    worse_labels_fit,
    worse_labels_fuse,
    worse_labels_contexts,


# `snakemake --cores all worse_labels`: this study alone.
rule worse_labels:
    input:
        study_targets("worse_labels"),


# A query rung (BM25-turn, BM25-hist, dense, ...): one query per turn, one batched search.
rule worse_labels_retrieve:
    input:
        unpack(
            lambda wc: wl_wiring.search_inputs(
                config, L, PROMPTS, wc.slice, wc.part, wc.rung, wc.domain
            )
        ),
    output:
        run=wl_paths.run(L, "{slice}", "{part}", "{rung}", "{domain}"),
        queries=wl_paths.run(
            L, "{slice}", "{part}", "{rung}", "{domain}", "queries.jsonl"
        ),
        accounting=wl_paths.run(
            L, "{slice}", "{part}", "{rung}", "{domain}", "accounting.json"
        ),
    log:
        L.log("worse_labels/retrieve/{slice}/{part}/{rung}/{domain}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        part="eval|train",
        rung=alternatives(wl_wiring.rung_names(config, ("query",))),
        domain=alternatives(WL_DOMAINS),
    conda:
        lambda wc: conda_env(
            retriever=wl_wiring.rung(config, wc.slice, wc.rung)["retriever"]
        )
    threads: config["threads"]["index"]
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        args=lambda wc: wl_wiring.search_args(
            config, wc.slice, wc.rung, REGISTRY, CACHE
        ),
    shell:
        "convrag worse-labels retrieve --tasks {input.tasks} --domain {wildcards.domain} --index-dir $(dirname {input.index})"
        " --rung {wildcards.rung} {params.args} --threads {threads} --out-run {output.run}"
        " --out-queries {output.queries} --accounting {output.accounting} 2> {log}"


# An expansion rung's components (the paper's Fusion): LLM expansions of every turn in one
# batched call, each expansion kind searched by the rung's retriever.
rule worse_labels_expand:
    input:
        unpack(
            lambda wc: wl_wiring.search_inputs(
                config, L, PROMPTS, wc.slice, wc.part, wc.rung, wc.domain
            )
        ),
    output:
        components=wl_paths.components(L, "{slice}", "{part}", "{rung}", "{domain}"),
        expansions=wl_paths.components(
            L, "{slice}", "{part}", "{rung}", "{domain}", "expansions.jsonl"
        ),
        accounting=wl_paths.components(
            L, "{slice}", "{part}", "{rung}", "{domain}", "accounting.json"
        ),
    log:
        L.log("worse_labels/expand/{slice}/{part}/{rung}/{domain}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        part="eval|train",
        rung=alternatives(wl_wiring.rung_names(config, ("expansion",))),
        domain=alternatives(WL_DOMAINS),
    conda:
        lambda wc: conda_env(
            models=wl_wiring.search_models(config, wc.slice, wc.rung),
            retriever=wl_wiring.rung(config, wc.slice, wc.rung)["retriever"],
        )
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=lambda wc: sum(
            gpu_resources(m)["gpu"]
            for m in wl_wiring.search_models(config, wc.slice, wc.rung)
        ),
        gpu_model=lambda wc: "".join(
            gpu_resources(m).get("gpu_model", "")
            for m in wl_wiring.search_models(config, wc.slice, wc.rung)[:1]
        ),
    params:
        args=lambda wc: wl_wiring.search_args(
            config, wc.slice, wc.rung, REGISTRY, CACHE
        ),
        released=lambda wc, input: (
            f"--released {input.released}" if "released" in input.keys() else ""
        ),
    shell:
        "convrag worse-labels expand --tasks {input.tasks} --domain {wildcards.domain} --index-dir $(dirname {input.index})"
        " --prompts {input.expand_prompts} {params.args} {params.released} --threads {threads} --out-components {output.components}"
        " --out-expansions {output.expansions} --accounting {output.accounting} 2> {log}"


# An expansion rung's released expansions, downloaded and checked against the config's sha256
# (released.url; a local released.path is read where it is).
rule worse_labels_released:
    output:
        wl_paths.released(L, "{slice}", "{rung}", "{fmt}"),
    log:
        L.log("worse_labels/released/{slice}/{rung}.{fmt}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        rung=alternatives(
            [x["rung"] for x in wl_wiring.released_rungs(config)] or ["-"]
        ),
        fmt="jsonl|json",
    conda:
        CONDA_ENVS["cpu"]
    resources:
        runtime=60,
        mem_mb=4000,
    params:
        spec=lambda wc: wl_wiring.download_spec(config, wc.slice, wc.rung),
    shell:
        "convrag download --spec '{params.spec}' --out {output} 2> {log}"


# The weights of an expansion or fuse rung: given, fitted on the slice's train turns, or equal.
rule worse_labels_fit:
    input:
        unpack(lambda wc: wl_wiring.fit_inputs(config, L, wc.slice, wc.rung)),
    output:
        wl_paths.weights(L, "{slice}", "{rung}"),
    log:
        L.log("worse_labels/fit/{slice}/{rung}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        rung=alternatives(wl_wiring.rung_names(config, ("expansion", "fuse"))),
    conda:
        CONDA_ENVS["cpu"]
    params:
        args=lambda wc: wl_wiring.fit_args(config, L, wc.slice, wc.rung),
    shell:
        "convrag worse-labels fit {params.args} --out {output} 2> {log}"


rule worse_labels_fuse:
    input:
        unpack(
            lambda wc: wl_wiring.fuse_inputs(
                config, L, wc.slice, wc.part, wc.rung, wc.domain
            )
        ),
    output:
        run=wl_paths.run(L, "{slice}", "{part}", "{rung}", "{domain}"),
        accounting=wl_paths.run(
            L, "{slice}", "{part}", "{rung}", "{domain}", "accounting.json"
        ),
    log:
        L.log("worse_labels/fuse/{slice}/{part}/{rung}/{domain}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        part="eval|train",
        rung=alternatives(wl_wiring.rung_names(config, ("expansion", "fuse"))),
        domain=alternatives(WL_DOMAINS),
    conda:
        CONDA_ENVS["cpu"]
    params:
        args=lambda wc: wl_wiring.fuse_args(
            config, L, wc.slice, wc.part, wc.rung, wc.domain
        ),
    shell:
        "convrag worse-labels fuse {params.args} --weights {input.weights} --rung {wildcards.rung}"
        " --out-run {output.run} --accounting {output.accounting} 2> {log}"


# The slice's contexts (every rung's top k, gold, none, control) with their qrels labels.
rule worse_labels_contexts:
    input:
        unpack(lambda wc: wl_wiring.contexts_inputs(config, L, wc.slice)),
    output:
        contexts=wl_paths.contexts(L, "{slice}"),
        ctx_items=wl_paths.contexts(L, "{slice}", "items.jsonl"),
    log:
        L.log("worse_labels/contexts/{slice}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
    conda:
        CONDA_ENVS["cpu"]
    params:
        args=lambda wc: wl_wiring.contexts_args(config, L, wc.slice),
    shell:
        "convrag worse-labels contexts --tasks {input.tasks} --slice {wildcards.slice} {params.args}"
        " --corpora {input.corpora} --out {output.contexts} --items {output.ctx_items} 2> {log}"


rule worse_labels_read:
    input:
        ctx_items=wl_paths.contexts(L, "{slice}", "items.jsonl"),
        prompts=f"{PROMPTS}/worse_labels/reader.yaml",
    output:
        reads=wl_paths.reads(L, "{slice}", "{reader}"),
        accounting=wl_paths.reads(L, "{slice}", "{reader}", "accounting.json"),
    log:
        L.log("worse_labels/read/{slice}/{reader}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        reader=alternatives(WL_READERS),
    conda:
        lambda wc: conda_env(models=[wc.reader])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(lambda wc: wc.reader),
    params:
        sets=lambda wc: wl_wiring.read_sets(config, wc.slice),
        registry=REGISTRY,
        cache=CACHE,
        sampling=sampling_flag(WL["readers"]),
        label_mode=str(WL["readers"]["label_mode"]).lower(),
    shell:
        "convrag worse-labels read --items {input.ctx_items} --sets {params.sets} --model {wildcards.reader}"
        " --registry {params.registry} --cache {params.cache} --prompts-dir $(dirname $(dirname {input.prompts}))"
        " {params.sampling} --label-mode {params.label_mode} --threads {threads}"
        " --out {output.reads} --accounting {output.accounting} 2> {log}"


rule worse_labels_label:
    input:
        ctx_items=wl_paths.contexts(L, "{slice}", "items.jsonl"),
        prompts=f"{PROMPTS}/worse_labels/content.yaml",
    output:
        labels=wl_paths.labels(L, "{slice}", "{judge}"),
        accounting=wl_paths.labels(L, "{slice}", "{judge}", "accounting.json"),
    log:
        L.log("worse_labels/label/{slice}/{judge}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        judge=alternatives(WL_JUDGES),
    conda:
        lambda wc: conda_env(models=[wc.judge])
    threads: config["threads"]["simulate"]
    resources:
        **model_job(lambda wc: wc.judge),
    params:
        sets=lambda wc: wl_wiring.label_sets(config, wc.slice),
        registry=REGISTRY,
        cache=CACHE,
        sampling=sampling_flag(WL["judges"]),
    shell:
        "convrag worse-labels label --items {input.ctx_items} --sets {params.sets} --model {wildcards.judge}"
        " --registry {params.registry} --cache {params.cache} --prompts-dir $(dirname $(dirname {input.prompts}))"
        " {params.sampling} --threads {threads} --out {output.labels}"
        " --accounting {output.accounting} 2> {log}"


rule worse_labels_correctness:
    input:
        ctx_items=wl_paths.contexts(L, "{slice}", "items.jsonl"),
        reads=wl_paths.reads(L, "{slice}", "{reader}"),
        prompts=f"{PROMPTS}/worse_labels/correctness.yaml",
    output:
        verdicts=wl_paths.correctness(L, "{slice}", "{reader}"),
        accounting=wl_paths.correctness(L, "{slice}", "{reader}", "accounting.json"),
    log:
        L.log("worse_labels/correctness/{slice}/{reader}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
        reader=alternatives(WL_READERS),
    conda:
        conda_env(models=wl_wiring.answer_models(config))
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=sum(gpu_resources(m)["gpu"] for m in wl_wiring.answer_models(config)),
    params:
        registry=REGISTRY,
        cache=CACHE,
        judges=wl_wiring.answer_args(config),
    shell:
        "convrag worse-labels correctness --items {input.ctx_items} --reads {input.reads} {params.judges}"
        " --registry {params.registry} --cache {params.cache} --prompts-dir $(dirname $(dirname {input.prompts}))"
        " --threads {threads} --out {output.verdicts}"
        " --accounting {output.accounting} 2> {log}"


rule worse_labels_audit:
    input:
        contexts=wl_paths.contexts(L, "{slice}"),
        ctx_items=wl_paths.contexts(L, "{slice}", "items.jsonl"),
        prompts=f"{PROMPTS}/worse_labels/audit.yaml",
    output:
        audit=wl_paths.audit(L, "{slice}"),
        accounting=wl_paths.audit(L, "{slice}", "accounting.json"),
    log:
        L.log("worse_labels/audit/{slice}.log"),
    wildcard_constraints:
        slice=alternatives(WL_SLICES),
    conda:
        conda_env(models=wl_wiring.audit_models(config))
    threads: config["threads"]["simulate"]
    resources:
        mem_mb=16000,
        runtime=240,
        gpu=sum(gpu_resources(m)["gpu"] for m in wl_wiring.audit_models(config)),
    params:
        args=(
            wl_wiring.audit_args(config, REGISTRY, CACHE, PROMPTS)
            if WL["judges"]["audit"]["model"]
            else ""
        ),
    shell:
        "convrag worse-labels audit --contexts {input.contexts} --items {input.ctx_items} {params.args}"
        " --threads {threads} --out {output.audit} --accounting {output.accounting} 2> {log}"


# MTRAG's annotator feedback (worse_labels.human_feedback names a benchmark of kind
# mtrag_conversations: its conversations.json and questions files, downloaded at the pinned
# commit by download_file and checked against their git blob / sha256): one row per passage
# shown, and the single passages the annotators judged, which the primary content judge then
# labels one at a time (section 4.2; target mtrag_human; false_miss_origin's never seen).
if wl_wiring.human_benchmark(config):
    WL_HUMAN = wl_wiring.human_benchmark(config)

    localrules:
        worse_labels_human_feedback,

    rule worse_labels_human_feedback:
        input:
            **{n: benchmark_raw(WL_HUMAN, n) for n in wl_wiring.human_raw_names(config)},
        output:
            feedback=wl_paths.human(L),
            human_items=wl_paths.human(L, "items.jsonl"),
        log:
            L.log("worse_labels/human_feedback.log"),
        conda:
            CONDA_ENVS["cpu"]
        resources:
            mem_mb=4000,
        params:
            files=lambda wc, input: jarg(dict(input)),
            domains=wl_wiring.human_domains(config),
        shell:
            "convrag worse-labels human-feedback --files {params.files} --domains {params.domains}"
            " --out {output.feedback} --items {output.human_items} 2> {log}"

    rule worse_labels_human_label:
        input:
            ctx_items=wl_paths.human(L, "items.jsonl"),
            prompts=f"{PROMPTS}/worse_labels/content.yaml",
        output:
            labels=wl_paths.human_labels(L, "{judge}"),
            accounting=wl_paths.human_labels(L, "{judge}", "accounting.json"),
        log:
            L.log("worse_labels/label_human/{judge}.log"),
        wildcard_constraints:
            judge=alternatives([wl_wiring.human_judge(config)]),
        conda:
            lambda wc: conda_env(models=[wc.judge])
        threads: config["threads"]["simulate"]
        resources:
            **model_job(lambda wc: wc.judge),
        params:
            registry=REGISTRY,
            cache=CACHE,
            sampling=sampling_flag(WL["judges"]),
        shell:
            "convrag worse-labels label --items {input.ctx_items} --sets human --model {wildcards.judge}"
            " --registry {params.registry} --cache {params.cache} --prompts-dir $(dirname $(dirname {input.prompts}))"
            " {params.sampling} --threads {threads} --out {output.labels}"
            " --accounting {output.accounting} 2> {log}"
