# ConvRAG-Grid: thin entry point. Rules only wire files to `convrag <stage>` CLI calls;
# all logic lives in the `convrag` package (workflow/convrag), which runs without Snakemake.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, found from any working directory (`--directory`); --configfile adds to it.
configfile: f"{workflow.basedir}/config/config.yaml"


# Shared rules, then one rule file per active study (convrag.studies; a study runs when its
# config block is present or it is listed under `studies:`).
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/report.smk"


for _study in STUDIES.values():
    if _study.rules_path is not None:

        include: str(_study.rules_path)


rule all:
    default_target: True
    input:
        [f for key in STUDIES for f in study_targets(key)],
