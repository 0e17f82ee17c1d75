# ConvRAG-Grid: thin entry point. Rules only wire files to `convrag <stage>` CLI calls;
# all logic lives in the `convrag` package (workflow/convrag), which runs without Snakemake.
from snakemake.utils import min_version

min_version("9.0")


# A config file means what it says: the embedded default (config/config.yaml) applies only when
# no --configfile is given; a --configfile starts from the schema's defaults (several files are
# deep-merged in order, as Snakemake does). --config KEY=VALUE sets single values on top, typed
# as YAML (convrag.config.typed_overrides: `--config "lic_rag={runs: 1}"` gives the integer 1).
from convrag.config import apply_overrides

if not workflow.overwrite_configfiles:
    workflow.configfile(f"{workflow.basedir}/config/config.yaml")
apply_overrides(config, workflow.config_settings.config)


# Shared rules, then one rule file per active study (convrag.studies; a study runs when its
# config block is present or it is listed under `studies:`).
include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/report.smk"


# The HTML report's landing page (`snakemake --report report.html`): what the run was.
report: "workflow/report/workflow.rst"


# Rule templates the studies take with `use rule ... from templates as <study>_...`.
module templates:
    snakefile:
        f"{workflow.basedir}/workflow/rules/templates.smk"
    config:
        config


for _study in STUDIES.values():
    if _study.rules_path is not None:

        include: str(_study.rules_path)


rule all:
    default_target: True
    input:
        [f for key in STUDIES for f in study_targets(key)],
