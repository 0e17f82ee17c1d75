# ConvRAG-Grid: thin entry point. Rules only wire files to `convrag <stage>` CLI calls;
# all logic lives in the `convrag` package (workflow/convrag), which runs without Snakemake.
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, found from any working directory (`--directory`); --configfile adds to it.
configfile: f"{workflow.basedir}/config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/lic_rag.smk"


rule all:
    default_target: True
    input:
        lic_rag_targets(),
