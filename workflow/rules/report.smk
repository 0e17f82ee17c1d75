# Tables and figures of every study through one pair of rules: `convrag target` builds the
# named target from the study artifacts it declares (Target.inputs); the caption of each is
# rendered from params through one template (workflow/report/target.rst); a target with its own
# Markdown page (Target.markdown: the reproduction tables) shows that page there instead.


# Cheap aggregation steps run on the submit host, never as cluster jobs.
localrules:
    study_table,
    study_figure,


rule study_table:
    input:
        unpack(target_inputs),
    output:
        csv=report(
            L.table("{study}", "{target}") + ".csv",
            caption="../report/target.rst",
            category="{study}",
            subcategory="tables",
        ),
        md=L.table("{study}", "{target}") + ".md",
    log:
        L.log("{study}/tables/{target}.log"),
    wildcard_constraints:
        study=alternatives(STUDIES),
        target=alternatives(target_kind_names("table")),
    conda:
        CONDA_ENVS["cpu"]
    params:
        inputs=lambda wc: jarg(target_inputs(wc)),
        context=target_context,
        caption=target_caption,
        page=target_page,
        out_stem=lambda wc, output: os.path.splitext(output[0])[0],
    shell:
        "convrag target {wildcards.study} {wildcards.target} --inputs {params.inputs}"
        " --context {params.context} --out-stem {params.out_stem} 2> {log}"


use rule study_table as study_figure with:
    output:
        png=report(
            L.figure("{study}", "{target}") + ".png",
            caption="../report/target.rst",
            category="{study}",
            subcategory="figures",
        ),
        pdf=L.figure("{study}", "{target}") + ".pdf",
        csv=L.figure("{study}", "{target}") + ".csv",
        md=L.figure("{study}", "{target}") + ".md",
    log:
        L.log("{study}/figures/{target}.log"),
    wildcard_constraints:
        study=alternatives(STUDIES),
        target=alternatives(target_kind_names("figure")),
