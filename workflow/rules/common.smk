# Shared helpers of every rule file. Config validation (errors name the key), the active
# studies, the output layout (convrag.layout, the same paths the Python code uses), model
# resources and the software environment (conda) of each job. Study-specific helpers live in
# the study's package, not here.
import json
import os
import re
import shlex
import sys

from convrag.data.benchmarks import benchmark_corpora, benchmark_loader
from convrag.data.download import MIRROR_ENV
from convrag.config import (
    is_closed_book,
    plugin_environment,
    retriever_kind,
    retriever_llm,
    validate_config,
)
from convrag.errors import ConvragError
from convrag.layout import layout
from convrag.llm.engine import REPLAY_ENV, TRACE_ENV
from convrag.llm.node import DIR_ENV as MODEL_SERVER_DIR_ENV
from convrag.llm.node import ENV as MODEL_SERVER_ENV
from convrag.llm.node import IDLE_ENV as MODEL_SERVER_IDLE_ENV
from convrag.retrieval import capabilities, graph_inputs, needs_jdk
from convrag.sharding import corpus_source
from convrag.sources import LOCK_ENV, hf_dataset_sha256, lock_path
from convrag.studies import active_studies
from convrag.lifeline import claim as claim_run, end_jobs_on_signal
from convrag.warm import RunServer

# Errors name the config file and line the key came from (convrag.schema.ConfigOrigin: the files
# Snakemake merged, in order, and the --config values). Printed alone, not as a WorkflowError:
# Snakemake would name this line of common.smk as the error's place, and the place is the config.
try:
    from convrag.config import ConfigOrigin

    validate_config(
        config,
        source=ConfigOrigin(workflow.configfiles, workflow.config_settings.config),
    )
except ConvragError as e:
    from snakemake.logging import logger

    logger.error(f"Config error: {e}")
    raise SystemExit(1)

# Where every output lives (convrag.layout: the same paths the Python code uses); job logs and
# Snakemake's benchmark files too, under <results_dir>/logs/.
L = layout(config)
# The run's lock file of `lock` revisions (convrag.sources): every job finds it through the env.
LOCK_FILE = lock_path(config)  # relative to the working directory, as every output path
os.environ[LOCK_ENV] = os.path.abspath(LOCK_FILE)

# Plug-ins (studies, retriever and benchmark kinds): every job's `convrag` call finds them too.
os.environ.update(plugin_environment(config))
STUDIES = {s.key: s for s in active_studies(config)}

# LLM-cache replay and traces (config llm_cache; convrag.llm.engine reads them in each job). Set or
# cleared from the config on every run, so a value left in the calling shell never reaches a job.
_TRACE = config["llm_cache"]["trace"]
for _var, _value in (
    (REPLAY_ENV, config["llm_cache"]["replay"] or ""),
    (TRACE_ENV, os.path.abspath(_TRACE) if _TRACE else ""),
):
    if _value:
        os.environ[_var] = _value
    else:
        os.environ.pop(_var, None)

# Local models served once per node (config model_server; convrag.llm.node reads it in each job):
# set or cleared from the config by the main process of a local run, whose jobs share the node.
# A cluster executor's job is an allocation of its own: its Snakemake (remote mode) runs the
# allocation's jobs (one, or a group of one model's jobs: profiles/slurm) as srun steps, and a
# server a step started would end with that step. So under SLURM that Snakemake holds a launcher
# that starts the servers as its own children: they serve the group's consecutive jobs and end
# with the allocation. Another cluster executor: every job loads its models itself.
_SERVE = config["model_server"]["mode"] == "node"


def _set_model_server_env(serve):
    for _var, _value in (
        (MODEL_SERVER_ENV, "node" if serve else ""),
        (MODEL_SERVER_IDLE_ENV, str(config["model_server"]["idle_s"])),
        (MODEL_SERVER_DIR_ENV, config["model_server"]["dir"] or ""),
    ):
        if _value:
            os.environ[_var] = _value
        else:
            os.environ.pop(_var, None)


def _executor_named():
    """The --executor of this Snakemake's command line: while the Snakefile is parsed Snakemake has
    not set its executor yet (workflow.local_exec reads True on every executor until onstart).
    """
    argv = sys.argv
    for i, a in enumerate(argv):
        if a in ("--executor", "-e") and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--executor="):
            return a.split("=", 1)[1]
    return ""


if not (workflow.remote_exec or workflow.subprocess_exec):
    _set_model_server_env(False)  # set in onstart, where the executor is known
elif _executor_named() == "slurm-jobstep":
    # the allocation's Snakemake (its batch step; each job's own Snakemake inside an srun step
    # runs the local executor): the steps, the group's jobs, inherit what is set here
    _set_model_server_env(_SERVE)
    if _SERVE:
        from convrag.llm.node import allocation_launcher

        allocation_launcher()

# A download mirror (config download_mirror; convrag.data.download reads it in each job), set or
# cleared from the config on every run as the cache settings above.
if config["download_mirror"]:
    os.environ[MIRROR_ENV] = config["download_mirror"]
else:
    os.environ.pop(MIRROR_ENV, None)

# Every job (and the warm server) of a local run ends when this Snakemake process does, however
# it ends (convrag.lifeline): the main process names itself in the environment (while the
# Snakefile is parsed its executor is not known yet; a cluster job on another host ignores an
# owner of the submitting host, and its own Snakemake clears it).
claim_run(
    workflow.local_exec and not (workflow.remote_exec or workflow.subprocess_exec)
)

# Warm start (convrag.warm): a local run forks each `convrag` job from one server that has the
# heavy libraries imported (3-6 s less per model job); never on a cluster executor (started in
# onstart, where the executor is known: a SLURM job on the submitting host must not fork from it).
WARM = RunServer(  # started in onstart, on a local executor only
    config["warm_start"] and not (workflow.remote_exec or workflow.subprocess_exec),
    log_path=L.log("convrag-warm.log"),
)


onstart:
    # the main process, its executor known now: a local run's jobs share the node's model
    # servers and fork from the warm server; a cluster executor's jobs run elsewhere
    if workflow.local_exec:
        _set_model_server_env(_SERVE)
        WARM.start()
        end_jobs_on_signal()
    elif _SERVE and getattr(workflow.executor_plugin, "name", "") != "slurm":
        from snakemake.logging import logger

        logger.warning(
            "model_server.mode: node applies to local runs and SLURM allocations: on this "
            "executor every job loads its models itself"
        )


onsuccess:
    WARM.stop()


onerror:
    WARM.stop()


def from_repo(path):
    """Project files (prompts, registry) resolve against the repo when given relatively,
    so `snakemake --directory elsewhere` works; results stay in the working directory.
    """
    return (
        path
        if os.path.isabs(path) or os.path.exists(path)
        else os.path.join(workflow.basedir, path)
    )


RES = L.root
PROMPTS = from_repo(config["prompts_dir"])
CACHE = L.cache
REGISTRY = from_repo(config["models_registry"])


# a config name (corpus, dataset, model, retriever): the schema's pattern
NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def alternatives(names):
    """A wildcard regex matching exactly these names (one that matches nothing if none)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


from convrag.llm.registry import load_registry

MODELS = load_registry(REGISTRY)


def gpu_resources(model):
    """SLURM executor resources for a model's jobs: GPUs only for local-weights backends
    (transformers/vllm) with gpus > 0 in the registry; API models need none."""
    spec = MODELS[model]
    if spec.backend == "openai" or not spec.gpus:
        return {"gpu": 0}
    res = {"gpu": spec.gpus}
    if spec.gpu_model:
        res["gpu_model"] = spec.gpu_model
    return res


def model_job(model, mem_mb=16000, runtime=240):
    """The resources of a model's job, `resources: **model_job(...)`: memory, time and the
    GPU pair (gpu, gpu_model: "" = any), written once here instead of in every rule. `model`:
    a registry name, a function of the wildcards giving one, or (training jobs, index
    builds) the pair itself as a dict or a function of the wildcards giving one."""

    def pair(wc):
        m = model(wc) if callable(model) else model
        return m if isinstance(m, dict) else gpu_resources(m)

    if callable(model):
        gpu = {
            "gpu": lambda wc: pair(wc)["gpu"],
            "gpu_model": lambda wc: pair(wc).get("gpu_model", ""),
        }
    else:
        gpu = {"gpu": pair(None)["gpu"], "gpu_model": pair(None).get("gpu_model", "")}
    return {"mem_mb": mem_mb, "runtime": runtime, **gpu}


def jarg(obj):
    """A config value as one shell-quoted JSON argument."""
    return shlex.quote(json.dumps(obj, sort_keys=True))


def corpus_of(dataset):
    return config["datasets"][dataset]["corpus"]


def caps(retriever):
    """The declared capabilities of a configured retriever (convrag.retrieval)."""
    return capabilities(retriever_kind(config, retriever))


# ---- data (data.smk) ------------------------------------------------------------------


def raw_inputs(wildcards):
    c = config["corpora"][wildcards.corpus]
    if c["kind"] == "miniworld":
        return []
    if "local" in c:
        return {"questions": c["local"]["questions"], "corpus": c["local"]["corpus"]}
    return {
        "questions": L.raw(wildcards.corpus, c["source"]["questions"]),
        "corpus": L.raw(wildcards.corpus, c["source"]["corpus"]),
    }


def download_params(wildcards):
    if (
        wildcards.corpus in config["benchmarks"]
    ):  # a benchmark's raw file: {url, sha256}
        spec = config["benchmarks"][wildcards.corpus]
        f = benchmark_loader(spec["kind"]).raw_files(spec)[wildcards.filename]
        return {
            "url": f["url"],
            "sha256": f.get("sha256"),
            "git_blob": f.get("git_blob"),
            "lock": LOCK_FILE,
        }
    s = config["corpora"][wildcards.corpus]["source"]
    return dict(
        repo_id=s["repo_id"],
        revision=s["revision"],
        repo_type=s["repo_type"],
        filename=wildcards.filename,
        sha256=s["sha256"].get(wildcards.filename)
        or hf_dataset_sha256(s["repo_id"], s["revision"], wildcards.filename),
        lock=LOCK_FILE,
    )


BENCHMARK_CORPORA = benchmark_corpora(config)  # corpus id -> (benchmark, domain)


def benchmark_raw(benchmark, filename):
    """A benchmark's raw file: a local path from the config, or the download rule's output."""
    spec = config["benchmarks"][benchmark]
    f = benchmark_loader(spec["kind"]).raw_files(spec)[filename]
    return from_repo(f["local"]) if "local" in f else L.raw(benchmark, filename)


def benchmark_task_inputs(wc):
    spec = config["benchmarks"][wc.benchmark]
    return {
        n: benchmark_raw(wc.benchmark, n)
        for n in benchmark_loader(spec["kind"]).task_inputs(spec)
    }


def benchmark_corpus_inputs(wc):
    b, d = BENCHMARK_CORPORA[wc.corpus]
    spec = config["benchmarks"][b]
    return {
        n: benchmark_raw(b, n)
        for n in benchmark_loader(spec["kind"]).corpus_inputs(spec, d)
    }


# ---- graphs and indexes (index.smk) --------------------------------------------------
KG = config["knowledge_graph"]


def graph_params():
    return {
        "embedding": KG["embedding"],
        "synonym_threshold": KG["synonym_threshold"],
        "max_tokens": KG["max_tokens"],
        **KG["params"],
    }


def index_inputs(wc):
    ins = {"corpus": L.corpus(wc.corpus)}
    if caps(wc.retriever).needs_graph:
        ins["graph"] = L.graph_manifest(wc.corpus)
    return ins


def index_llm_args(wc):
    """`--llm ... --registry ... --cache ...` for index builds that call an LLM (RAPTOR)."""
    m = retriever_llm(config, wc.retriever)
    if m is None:
        return ""
    return f"--llm {m} --registry {REGISTRY} --cache {CACHE}"


def index_gpu(wc):
    """GPUs of an index build: those of its LLM (RAPTOR's summaries), none otherwise."""
    m = retriever_llm(config, wc.retriever)
    return (
        gpu_resources(m)
        if caps(wc.retriever).llm_at_build and needs_gpu_env(m)
        else {"gpu": 0}
    )


def graph_dir_arg(wc, input):
    return f"--graph-dir $(dirname {input.graph})" if "graph" in input.keys() else ""


# ---- software environments (`snakemake --sdm conda`) ----------------------------------
# One conda env per kind of job (envs/*.yaml, paths relative to workflow/rules/):
#   cpu       - every CPU job (data, indexes, API-model and CPU-model simulation, scoring)
#   java-bm25 - jobs that build or search a Lucene (pyserini) BM25 index: needs a JDK
#   vllm-gpu  - jobs that run a local model on GPUs (vLLM, or transformers with gpus > 0);
#               it also carries the JDK and pyserini, so any retriever works on GPU nodes.
# Each env installs this repository (editable) from ${CONVRAG_REPO} in its pip section;
# pip expands that variable, and it defaults here to the checkout that holds this Snakefile.
os.environ.setdefault("CONVRAG_REPO", workflow.basedir)
CONDA_ENVS = {
    "cpu": f"{workflow.basedir}/envs/cpu.yaml",
    "java-bm25": f"{workflow.basedir}/envs/java-bm25.yaml",
    "vllm-gpu": f"{workflow.basedir}/envs/vllm-gpu.yaml",
}


def needs_gpu_env(model):
    spec = MODELS[model]
    return spec.backend == "vllm" or (
        spec.backend == "transformers" and bool(spec.gpus)
    )


def conda_env(models=(), retriever=None):
    """The env file of a job that runs ``models`` and searches or builds ``retriever``."""
    if any(needs_gpu_env(m) for m in models):
        return CONDA_ENVS["vllm-gpu"]
    if retriever is not None and needs_jdk(config, retriever):  # Lucene (capabilities)
        return CONDA_ENVS["java-bm25"]
    return CONDA_ENVS["cpu"]


# ---- tables and figures of every study (report.smk) ---------------------------------------


def study_targets(study):
    """Every final output of one study (``rule all`` is the union over active studies)."""
    return STUDIES[study].final_files(config, L)


def target_kind_names(kind):
    return sorted(
        {
            n
            for s in STUDIES.values()
            for n, t in s.all_targets().items()
            if t.kind == kind
        }
    )


def _target(wc):
    study = STUDIES[wc.study]
    targets = study.all_targets()
    if wc.target not in targets:
        raise WorkflowError(
            f"{wc.study} has no target '{wc.target}' (known: {', '.join(targets)})"
        )
    return study, targets[wc.target]


_ARTIFACTS = {}


def artifacts(study):
    """A study's artifacts (plus its accounting files), computed once per run."""
    if study.key not in _ARTIFACTS:
        _ARTIFACTS[study.key] = {
            **study.artifacts(config, L),
            "accounting": study.accounting_files(config, L),
        }
    return _ARTIFACTS[study.key]


def target_inputs(wc):
    """The study artifacts a target reads (Target.inputs), as named rule inputs."""
    study, t = _target(wc)
    arts = artifacts(study)
    return {name: arts[name] for name in t.inputs}


_RUN_NOTES = {}
_TINY = {}


def run_note(study, target):
    """Study.run_note, once per study in a run (it reads the study's context: 0.1 s for
    lic_rag); the note is the study's, the same for every target."""
    if study.key not in _RUN_NOTES:
        _RUN_NOTES[study.key] = study.run_note(target, config)
    return _RUN_NOTES[study.key]


def tiny_models(study):
    """Study.tiny_models, once per study in a run."""
    if study.key not in _TINY:
        _TINY[study.key] = study.tiny_models(config)
    return _TINY[study.key]


def target_context(wc):
    """The context a target builds with; a run with models under 1B parameters adds them
    (tiny_models: each figure says so on itself), a miniature run (the config's `miniature`
    block) the reason its reproduction rows are not comparable (convrag.report.reproduction),
    each only then, so other runs' params, and so their finished targets, stay as they were.
    """
    from convrag.report.reproduction import MINIATURE, miniature_reason

    study, _ = _target(wc)
    mini = miniature_reason(config)
    return jarg(
        {
            **study.context(config),
            "study_dir": L.study(study.key),
            "run_note": run_note(study, wc.target),
            **({"tiny_models": tiny_models(study)} if tiny_models(study) else {}),
            **({MINIATURE: mini} if mini else {}),
        }
    )


def target_caption(wc):
    """The caption and the run's own settings (Study.run_note): a param so that a changed caption
    rebuilds the target (Snakemake's params trigger), as its Markdown file starts with it. The
    report shows that Markdown file, read after the run (workflow/report/target.rst), not this
    text: the file adds why each blank cell is blank and any placeholder note."""
    study, _ = _target(wc)
    return " ".join(
        t for t in (study.caption(wc.target), run_note(study, wc.target)) if t
    )


def report_landing(categories):
    """The landing page of the HTML report (workflow/report/workflow.rst renders it after the
    run): config files, studies with their settings and reproduction pages, models, data;
    ``categories``: the report's files (Snakemake's category -> subcategory -> records).
    """
    from convrag.report.landing import landing_page

    files = [
        str(r.path) for subs in categories.values() for rs in subs.values() for r in rs
    ]
    return landing_page(
        config,
        workflow.configfiles,
        workflow.config_settings.config,
        STUDIES,
        files,
        basedir=workflow.basedir,
    )
