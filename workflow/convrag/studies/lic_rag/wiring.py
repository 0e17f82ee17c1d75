"""What lic_rag's rule file (workflow/rules/studies/lic_rag.smk) asks of the config: inputs,
outputs and arguments of its rules, as plain functions of the validated config (so they run
and are tested without Snakemake, and the rule file holds no functions of its own)."""

from __future__ import annotations

import json

from convrag.retrieval import graph_inputs, is_closed_book, retriever_kind, retriever_llm
from convrag.layout import Layout
from convrag.retrieval import capabilities
from convrag.studies.lic_rag import paths
from convrag.studies.lic_rag.plan import cells, job_settings, reasoning, role_model


def retrievers_by_class(config: dict) -> dict[str, list[str]]:
    """The grid's retrievers by scheduling class: ``closed``, ``explorer`` (ToG-2, PoG: several
    LLM rounds per query; their simulate jobs are the longest, so they start first),
    ``query_llm`` (one LLM round per query), ``cheap`` (the rest)."""
    out: dict[str, list[str]] = {"closed": [], "explorer": [], "query_llm": [], "cheap": []}
    for r in config["lic_rag"]["retrievers"]:
        if is_closed_book(config, r):
            out["closed"].append(r)
        else:
            out[capabilities(retriever_kind(config, r)).cost_class].append(r)
    return out


def cell_outputs(config: dict, L: Layout, closed: bool) -> list[str]:
    return [paths.conversations(L, "{dataset}", "{model}", "{retriever}", c, p, "{chunk}")
            for c, p in cells(config["lic_rag"], closed)]


def review_file(config: dict, dataset: str) -> str | None:
    return config["lic_rag"]["sharding"]["reviews"].get(dataset)


def role_models(config: dict) -> dict[str, str]:
    lic = config["lic_rag"]
    return {role: role_model(lic, role) for role in ("user_simulator", "classifier", "judge")}


def shard_settings(config: dict) -> dict:
    from convrag.sharding import shard_settings

    return shard_settings(config["lic_rag"]["sharding"])


def reserve_file(config: dict, L: Layout, dataset: str) -> str | None:
    """A dataset's reserve of replacement questions (sharding.replace_failed > 0), else None."""
    return paths.shards(L, dataset, "reserve_questions.jsonl") if config["lic_rag"]["sharding"]["replace_failed"] else None


def variability_file(config: dict, L: Layout, dataset: str) -> str | None:
    """A dataset's shard-wording variability samples (sharding.variability.questions > 0), else None."""
    on = config["lic_rag"]["sharding"]["variability"]["questions"]
    return paths.shards(L, dataset, "variability.json") if on else None


def question_files(config: dict, L: Layout, dataset: str) -> list[str]:
    """The question files of a dataset that shard sets may name: its questions, and its reserve
    when failed shard sets are replaced (simulate, review and scoring read both)."""
    return [L.questions(dataset)] + [f for f in [reserve_file(config, L, dataset)] if f]


def shard_inputs(config: dict, L: Layout, prompts_dir: str, dataset: str) -> dict[str, str]:
    # the user's shard prompt file (lic_rag.prompts.shard) or the project's own wording
    out = dict(questions=L.questions(dataset), prompts=config["lic_rag"]["prompts"]["shard"] or f"{prompts_dir}/shard.yaml")
    reserve = reserve_file(config, L, dataset)
    return {**out, "reserve": reserve} if reserve else out


def shard_outputs(config: dict, L: Layout) -> dict[str, str]:
    """The shard job's optional outputs (the variability samples when on)."""
    return {"variability": paths.shards(L, "{dataset}", "variability.json")} \
        if config["lic_rag"]["sharding"]["variability"]["questions"] else {}


def shard_extra_args(input, output) -> str:
    """The optional arguments of ``convrag shard`` (reserve, variability) from a job's files."""
    args = f" --reserve {input.reserve}" if "reserve" in input.keys() else ""
    return args + (f" --variability {output.variability}" if "variability" in output.keys() else "")


def simulate_inputs(config: dict, L: Layout, prompts_dir: str, dataset: str, retriever: str) -> dict:
    corpus = config["datasets"][dataset]["corpus"]
    return dict(
        questions=question_files(config, L, dataset),
        shards=paths.shards(L, dataset, "final.jsonl"),
        corpus=L.corpus(corpus),
        index=L.index_manifest(corpus, retriever),
        graph=graph_inputs(config, L, corpus, retriever),
        prompts=assistant_prompts(config, prompts_dir),
        classifier_prompts=f"{prompts_dir}/lic_rag/classifier.yaml",
        judge_prompts=f"{prompts_dir}/lic_rag/judge.yaml",
    )


def assistant_prompts(config: dict, prompts_dir: str) -> str:
    """The assistant and user-simulator prompt file: the user's (``lic_rag.prompts.assistant``)
    or the project's own wording."""
    return config["lic_rag"]["prompts"]["assistant"] or f"{prompts_dir}/lic_rag/assistant.yaml"


def simulate_settings(config: dict, model: str | None = None) -> dict:
    return job_settings(config["lic_rag"], model)


def reasoning_arg(config: dict, model: str) -> str:
    """``--reasoning on|off`` where the grid sets a model's thinking switch, else nothing."""
    r = reasoning(config["lic_rag"], model)
    return "" if r is None else f"--reasoning {'on' if r else 'off'}"


def cells_arg(config: dict, retriever: str) -> str:
    return ",".join(f"{c}:{p}" for c, p in cells(config["lic_rag"], is_closed_book(config, retriever)))


def simulate_models(config: dict, model: str, retriever: str) -> list[str]:
    """Every model a simulate job runs (GPU env and resources follow the heaviest)."""
    return [model, *role_models(config).values()] + [m for m in [retriever_llm(config, retriever)] if m]


def conversation_files(config: dict, L: Layout) -> list[str]:
    from convrag.studies.lic_rag.plan import simulate_cells

    return [paths.conversations(L, j["dataset"], j["model"], j["retriever"], j["condition"], j["policy"], j["chunk"])
            for j in simulate_cells(config)]


RETRIEVAL_SYSTEM_COLUMNS = ["retriever", "kind", "closed_book", "knowledge_graph", "llm_at_build", "llm_at_query",
                            "cost_class", "llm", "params"]
MODEL_COLUMNS = ["model", "roles", "family", "backend", "access", "weights", "revision", "params_b"]


def retrieval_system_rows(config: dict) -> list[dict]:
    """The paper's Table 11 for this grid: each retrieval setting, its kind, what it needs and
    costs (the kind's declared capabilities), its query-time LLM and its params."""
    rows = []
    for r in config["lic_rag"]["retrievers"]:
        kind = retriever_kind(config, r)
        caps = capabilities(kind)
        rows.append({"retriever": r, "kind": kind, "closed_book": caps.closed_book, "knowledge_graph": caps.needs_graph,
                     "llm_at_build": caps.llm_at_build, "llm_at_query": caps.llm_at_query,
                     "cost_class": caps.cost_class, "llm": retriever_llm(config, r) or "",
                     "params": json.dumps(config["retrievers"][r]["params"], sort_keys=True)})
    return rows


def model_rows(config: dict) -> list[dict]:
    """The paper's Table 12 for this grid: each model of a role, with what is run (weights or
    API model and revision), its size and its access (open weights or API)."""
    from convrag.schema import config_registry

    registry = config_registry(config)
    lic = config["lic_rag"]
    roles: dict[str, list[str]] = {}
    for m in lic["models"]:
        roles.setdefault(m, []).append("assistant")
    for role, m in [("sharding", lic["sharding"]["model"]), *role_models(config).items()]:
        roles.setdefault(m, []).append(role)
    rows = []
    for m, rs in roles.items():
        spec = registry[m]
        rows.append({"model": m, "roles": ", ".join(rs), "family": spec.model_family(), "backend": spec.backend,
                     "access": "API" if spec.backend == "openai" else "open weights",
                     "weights": spec.api_model or (spec.weights or {}).get("hf_repo")
                     or "/".join(str(v) for v in (spec.weights or {}).values()),
                     "revision": spec.resolved_revision() or "", "params_b": spec.params_b})
    return rows


def largest_per_family(config: dict) -> dict[str, str]:
    """family -> the grid's largest assistant LLM of it (by the registry's ``params_b``; a family
    whose sizes are not all known has no largest unless it has one model), for §5.1's
    retention of the largest model of each family."""
    from convrag.schema import config_registry

    registry = config_registry(config)
    fams: dict[str, list] = {}
    for m in config["lic_rag"]["models"]:
        spec = registry[m]
        fams.setdefault(spec.model_family(), []).append((m, spec.params_b))
    out = {}
    for fam, ms in fams.items():
        if len(ms) == 1:
            out[fam] = ms[0][0]
        elif all(size is not None for _, size in ms):
            out[fam] = max(ms, key=lambda x: x[1])[0]
    return out


def pool(config: dict) -> dict[str, list[str]]:
    """What the paper's pooled numbers average over (``lic_rag.analysis.pooled_retrievers`` and
    ``pooled_models``): by default its main retrieval methods, every retriever that retrieves but
    PoG (§4.1: seven methods and closed book; PoG is an appendix retriever run on eight of the ten
    LLMs, §B.2, so pooling it would mix in a method the main text does not average), and every
    LLM of the grid. A retriever outside the pool keeps its own rows."""
    lic = config["lic_rag"]
    a = lic["analysis"]
    rets = a.get("pooled_retrievers")
    if rets is None:
        rets = [r for r in lic["retrievers"] if not is_closed_book(config, r) and retriever_kind(config, r) != "pog"]
    return {"retrievers": list(rets), "models": list(a.get("pooled_models") or lic["models"])}


def model_sizes(config: dict) -> dict[str, float | None]:
    """The grid's assistant LLMs -> their size in billions (the registry's ``params_b``; None when
    undisclosed), for §B.4's "four smallest models"."""
    from convrag.schema import config_registry

    registry = config_registry(config)
    return {m: registry[m].params_b for m in config["lic_rag"]["models"]}


def prompts_used(lic: dict) -> dict:
    """The run's prompts for the reproduction table: ``supplied`` only when every prompt its
    numbers depend on (assistant and user simulator, sharding) is a file the user gave
    (``lic_rag.prompts``), else ``own``; and which they were, in words."""
    given = {k: v for k, v in lic["prompts"].items() if v}
    words = "; ".join(f"{k}: {given[k]}" if k in given else f"{k}: own wording" for k in PROMPT_ROLES)
    return {"prompts": "supplied" if all(k in given for k in PROMPT_ROLES) else "own", "prompts_used": words}


PROMPT_ROLES = ("assistant", "shard")
