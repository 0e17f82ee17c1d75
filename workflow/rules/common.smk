# Shared helpers: config validation (errors name the key), path layout, input/target
# functions of every rule file, and the software environment (conda) of each job.
import json
import os
import re
import shlex

from convrag.config import (
    cells,
    is_closed_book,
    retriever_kind,
    retriever_llm,
    role_model,
    simulate_cells,
    simulate_jobs,
    validate_config,
)
from convrag.errors import ConvragError
from convrag.retrieval import builds_with_llm, needs_graph, uses_llm

try:
    validate_config(
        config, source="config (config/config.yaml + --configfile/--config)"
    )
except ConvragError as e:
    raise WorkflowError(str(e)) from None


def from_repo(path):
    """Project files (prompts, registry) resolve against the repo when given relatively,
    so `snakemake --directory elsewhere` works; results stay in the working directory.
    """
    return (
        path
        if os.path.isabs(path) or os.path.exists(path)
        else os.path.join(workflow.basedir, path)
    )


from convrag.studies.lic_rag import TARGETS as LIC_TARGETS, caption as lic_caption

RES = config["results_dir"]
LIC = config["lic_rag"]
LIC_OUT = f"{RES}/lic_rag"
PROMPTS = from_repo(config["prompts_dir"])
CACHE = f"{RES}/cache/llm.sqlite"
REGISTRY = from_repo(config["models_registry"])


wildcard_constraints:
    corpus=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    retriever=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    condition=r"FULL|CONCAT|SHARDED",
    policy=r"history|current|none",
    chunk=r"\d+",
    target=r"(table|figure|appendix)[A-Za-z0-9_]+",


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


def jarg(obj):
    """A config value as one shell-quoted JSON argument."""
    return shlex.quote(json.dumps(obj, sort_keys=True))


def corpus_of(dataset):
    return config["datasets"][dataset]["corpus"]


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
    "cpu": "../../envs/cpu.yaml",
    "java-bm25": "../../envs/java-bm25.yaml",
    "vllm-gpu": "../../envs/vllm-gpu.yaml",
}


def needs_gpu_env(model):
    spec = MODELS[model]
    return spec.backend == "vllm" or (
        spec.backend == "transformers" and bool(spec.gpus)
    )


def uses_pyserini(retriever):
    r = config["retrievers"][retriever]
    return r["kind"] == "bm25" and (r.get("params") or {}).get("backend") == "pyserini"


def conda_env(models=(), retriever=None):
    """The env file of a job that runs ``models`` and searches or builds ``retriever``."""
    if any(needs_gpu_env(m) for m in models):
        return CONDA_ENVS["vllm-gpu"]
    if retriever is not None and uses_pyserini(retriever):
        return CONDA_ENVS["java-bm25"]
    return CONDA_ENVS["cpu"]


# ---- data -------------------------------------------------------------------------------


def raw_inputs(wildcards):
    c = config["corpora"][wildcards.corpus]
    if c["kind"] == "miniworld":
        return []
    if "local" in c:
        return {"questions": c["local"]["questions"], "corpus": c["local"]["corpus"]}
    return {
        "questions": f"{RES}/raw/{wildcards.corpus}/{c['source']['questions']}",
        "corpus": f"{RES}/raw/{wildcards.corpus}/{c['source']['corpus']}",
    }


def download_params(wildcards):
    s = config["corpora"][wildcards.corpus]["source"]
    return dict(
        repo_id=s["repo_id"],
        revision=s["revision"],
        repo_type=s["repo_type"],
        filename=wildcards.filename,
        sha256=s["sha256"].get(wildcards.filename),
    )


# ---- graphs and indexes ----------------------------------------------------------------
KG = config["knowledge_graph"]


def graph_params():
    return {
        "embedding": KG["embedding"],
        "synonym_threshold": KG["synonym_threshold"],
        "max_tokens": KG["max_tokens"],
        **KG["params"],
    }


def index_inputs(wc):
    ins = {"corpus": f"{RES}/corpora/{wc.corpus}/corpus.jsonl"}
    if needs_graph(retriever_kind(config, wc.retriever)):
        ins["graph"] = f"{RES}/graphs/{wc.corpus}/manifest.json"
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
    build_llm = builds_with_llm(retriever_kind(config, wc.retriever))
    return gpu_resources(m) if build_llm and needs_gpu_env(m) else {"gpu": 0}


def graph_dir_arg(wc, input):
    return f"--graph-dir $(dirname {input.graph})" if "graph" in input.keys() else ""


# ---- lic_rag ----------------------------------------------------------------------------
CLOSED = [r for r in LIC["retrievers"] if is_closed_book(config, r)]
EXPLORERS = [
    r for r in LIC["retrievers"] if retriever_kind(config, r) in ("tog2", "pog")
]
OPEN = [r for r in LIC["retrievers"] if not is_closed_book(config, r)]
# one LLM call per query (HippoRAG, HippoRAG2, LightRAG): longer jobs than BM25 or dense
QUERY_LLM = [
    r
    for r in OPEN
    if r not in EXPLORERS
    and uses_llm(retriever_kind(config, r))
    and not builds_with_llm(retriever_kind(config, r))
]
RETRIEVERS_OF_KIND = {}
for _r in LIC["retrievers"]:
    RETRIEVERS_OF_KIND.setdefault(retriever_kind(config, _r), []).append(_r)
TABLES = [n for n, t in LIC_TARGETS.items() if t[0] == "table"]
FIGURES = [n for n, t in LIC_TARGETS.items() if t[0] == "figure"]


def alternatives(names):
    """A wildcard regex matching exactly these names (one that matches nothing if none)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def cell_outputs(closed):
    return [
        f"{LIC_OUT}/conversations/{{dataset}}/{{model}}/{{retriever}}/{c}_{p}/chunk{{chunk}}.jsonl"
        for c, p in cells(config, closed)
    ]


def conversation_files(dataset=None, model=None):
    return [
        f"{LIC_OUT}/conversations/{j['dataset']}/{j['model']}/{j['retriever']}/"
        f"{j['condition']}_{j['policy']}/chunk{j['chunk']}.jsonl"
        for j in simulate_cells(config)
        if dataset in (None, j["dataset"]) and model in (None, j["model"])
    ]


def job_accounting_files():
    return [
        f"{LIC_OUT}/conversations/{j['dataset']}/{j['model']}/{j['retriever']}/chunk{j['chunk']}.accounting.json"
        for j in simulate_jobs(config)
    ]


def table_files(name):
    return [f"{LIC_OUT}/tables/{name}.csv", f"{LIC_OUT}/tables/{name}.md"]


def figure_files(name):
    return [f"{LIC_OUT}/figures/{name}.{ext}" for ext in ("png", "pdf", "csv", "md")]


def lic_rag_targets():
    # Conversations are targets too: deleting one makes Snakemake redo that job (from the
    # LLM cache) and everything downstream of it, not silently keep stale tables.
    return (
        conversation_files()
        + [
            f
            for n in ["table1_datasets", *TABLES, "accounting"]
            for f in table_files(n)
        ]
        + [f for n in FIGURES for f in figure_files(n)]
        + [
            f"{LIC_OUT}/shards/{ds}/{name}"
            for ds in LIC["datasets"]
            for name in ("shard_report.md", "review.yaml")
        ]
    )


def corpus_source(dataset):
    """The source of a dataset's shard prompt pairs: miniworld or the hipporag format."""
    c = config["corpora"][corpus_of(dataset)]
    return c["kind"] if c["kind"] == "miniworld" else c["format"]


def shard_review_arg(wildcards):
    path = LIC["sharding"]["reviews"].get(wildcards.dataset)
    return f"--review {path}" if path else ""


def shard_review_input(wildcards):
    path = LIC["sharding"]["reviews"].get(wildcards.dataset)
    return [path] if path else []


USER_MODEL = role_model(config, "user_simulator")
CLASSIFIER_MODEL = role_model(config, "classifier")
JUDGE_MODEL = role_model(config, "judge")


def simulate_inputs(wc):
    corpus = corpus_of(wc.dataset)
    return dict(
        questions=f"{RES}/datasets/{wc.dataset}/questions.jsonl",
        shards=f"{LIC_OUT}/shards/{wc.dataset}/final.jsonl",
        corpus=f"{RES}/corpora/{corpus}/corpus.jsonl",
        index=f"{RES}/indexes/{corpus}/{wc.retriever}/manifest.json",
        prompts=f"{PROMPTS}/lic_rag/assistant.yaml",
        classifier_prompts=f"{PROMPTS}/lic_rag/classifier.yaml",
        judge_prompts=f"{PROMPTS}/lic_rag/judge.yaml",
    )


def simulate_settings(wc):
    keys = (
        "runs",
        "chunk_size",
        "top_k",
        "recall_k",
        "seed",
        "max_extra_turns",
        "assistant",
        "user_simulator",
        "classifier",
        "judge",
    )
    return jarg({k: LIC[k] for k in keys})


def simulate_cells_arg(wc):
    return ",".join(
        f"{c}:{p}" for c, p in cells(config, is_closed_book(config, wc.retriever))
    )


def simulate_models(wc):
    """Every model a simulate job runs (GPU env and resources follow the heaviest)."""
    return [wc.model, USER_MODEL, CLASSIFIER_MODEL, JUDGE_MODEL] + [
        m for m in [retriever_llm(config, wc.retriever)] if m
    ]
