# Rule templates: a module (Snakefile: `module templates`), so these rules run only where a
# study takes one with `use rule <name> from templates as <study>_<name> with:` and gives its
# inputs, outputs, log, wildcards and environment. The command line is the template's.
import json
import shlex


# One TREC run (and its queries) per tasks file x retriever x query policy (wildcards
# `retriever`, `policy`); a study gives params `args` (retriever, models, registry, cache) and
# `select` (e.g. "--domain clapnq"), and the input `rewrite_prompts` when the policy rewrites.
rule retrieve:
    output:  # placeholders: every study that takes the template names its own
        run="template/retrieve/run.trec",
        queries="template/retrieve/queries.jsonl",
        accounting="template/retrieve/accounting.json",
    threads: config["threads"]["index"]
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        select="",
        args="",
        retriever_params=lambda wc: shlex.quote(
            json.dumps(config["retrievers"][wc.retriever]["params"], sort_keys=True)
        ),
        prompts=lambda wc, input: (
            f"--rewrite-prompts {input.rewrite_prompts}"
            if "rewrite_prompts" in input.keys()
            else ""
        ),
    shell:
        "convrag retrieve --tasks {input.tasks} {params.select} --index-dir $(dirname {input.index})"
        " --retriever-params {params.retriever_params} --policy {wildcards.policy} {params.args} {params.prompts}"
        " --threads {threads} --out-run {output.run} --out-queries {output.queries}"
        " --accounting {output.accounting} 2> {log}"


# Every run of a study scored per turn with ir_measures; params: `runs` (JSON
# [{retriever, policy, domain, path}]), `measures`, `labels` (task labels kept on every row).
rule score_retrieval:
    output:  # a placeholder: every study that takes the template names its own
        "template/score_retrieval.parquet",
    params:
        runs="",
        measures="",
        labels="",
    shell:
        "convrag score-retrieval --tasks {input.tasks} --runs {params.runs} --measures {params.measures}"
        " --labels {params.labels} --out {output} 2> {log}"


# One multi-hop dataset's shard sets (`convrag shard`, convrag.sharding): lic_rag's SHARDED
# conditions and cross's sharded delivery shard the same questions with the same prompt format.
# A study gives the inputs `questions` and `prompts`, the outputs `shards`, `report` and
# `accounting`, its resources, and params `settings` (convrag.sharding.shard_settings), `model`,
# `source` (convrag.sharding.corpus_source), `registry`, `cache`; `extra` (further arguments,
# each with its leading space) is optional.
rule shard:
    output:  # placeholders: every study that takes the template names its own
        shards="template/shard/shards.jsonl",
        report="template/shard/shard_report.md",
        accounting="template/shard/accounting.json",
    threads: config["threads"]["shard"]
    params:
        extra="",
    shell:
        "convrag shard --questions {input.questions} --prompts {input.prompts} --source {params.source}"
        " --model {params.model} --registry {params.registry} --cache {params.cache}"
        " --settings {params.settings} --out {output.shards} --report {output.report}"
        " --accounting {output.accounting}{params.extra} --threads {threads} 2> {log}"
