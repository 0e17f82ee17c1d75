# Shared helpers: config validation (errors name the key) and path layout.
import json
import os
import shlex

from convrag.config import validate_config, simulate_jobs, n_chunks, retriever_kind
from convrag.errors import ConvragError

try:
    validate_config(config, source="config (config/config.yaml + --configfile/--config)")
except ConvragError as e:
    raise WorkflowError(str(e)) from None

def from_repo(path):
    """Project files (prompts, registry) resolve against the repo when given relatively,
    so `snakemake --directory elsewhere` works; results stay in the working directory."""
    return path if os.path.isabs(path) or os.path.exists(path) else os.path.join(workflow.basedir, path)


RES = config["results_dir"]
LIC = config["lic_rag"]
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
