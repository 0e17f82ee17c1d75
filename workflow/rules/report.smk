# Tables and figures of every study through one pair of rules: `convrag target` builds the
# named target from the study artifacts it declares (Target.inputs) and writes its Markdown file
# (the caption with the run's settings and blank-cell reasons, then the table, a figure's plotted
# numbers or the target's own page); the HTML report shows that file, read after the run, through
# one template (workflow/report/target.rst), and a figure's numbers also as their CSV.


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
        csv=report(
            L.figure("{study}", "{target}") + ".csv",
            caption="../report/figure_data.rst",
            category="{study}",
            subcategory="figure data",
        ),
        md=L.figure("{study}", "{target}") + ".md",
    log:
        L.log("{study}/figures/{target}.log"),
    wildcard_constraints:
        study=alternatives(STUDIES),
        target=alternatives(target_kind_names("figure")),
