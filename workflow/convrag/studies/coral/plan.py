"""The coral grid from the validated config block: where its conversations come from (built
from the generated world's pages, or a released CORAL benchmark), its retrieval runs (one per
retriever x query policy) and every model-calling job."""

from __future__ import annotations

# The paper's names for the query policies of Table 2 (the registry's names are the keys).
POLICY_LABELS = {"current": "last question", "rewrite": "golden rewrite", "llm_rewrite": "LLM rewrite",
                 "history": "all questions"}
FLOWS = ("LDS", "SIDS", "STRW", "DTRW")


def source(config: dict) -> str:
    """The name the conversations go by: the world's corpus, or the released benchmark."""
    c = config["coral"]
    return c["world"]["corpus"] if c.get("world") else c["benchmark"]


def constructed(config: dict) -> bool:
    return bool(config["coral"].get("world"))


def domain(config: dict) -> str:
    """The ``labels.domain`` of the tasks (what ``convrag retrieve --domain`` selects)."""
    from convrag.data.coral import DOMAIN

    return DOMAIN


def index_corpus(config: dict) -> str:
    """The corpus every run searches: the world's passages, or the benchmark's corpus."""
    from convrag.data.benchmarks import corpus_id

    return source(config) if constructed(config) else corpus_id(config["coral"]["benchmark"], domain(config))


def searches_corpus(config: dict) -> bool:
    """Whether the run reads a passage corpus: the generated world's, or a released benchmark's
    when a retriever searches it, its tasks take their contexts from it (``contexts: gold``) or
    its corpus file is given locally. A released split read with ``contexts: none`` and no
    retriever (the CORAL sample, which has no corpus) downloads none."""
    if constructed(config) or config["coral"]["retrievers"]:
        return True
    spec = config["benchmarks"][config["coral"]["benchmark"]]
    return spec.get("contexts", "gold") == "gold" or "local" in (spec.get("files") or {}).get("passage_corpus.json", {})


def retrieval_jobs(config: dict) -> list[dict]:
    c = config["coral"]
    return [dict(source=source(config), retriever=r, policy=p) for r in c["retrievers"] for p in c["policies"]]


def session_jobs(config: dict) -> list[dict]:
    """Table 2's session-encoder runs: one per configured encoder, searched in its retriever's
    index (policy ``session_<name>``)."""
    from convrag.studies.coral.conversational import session_policy

    return [dict(source=source(config), retriever=e["retriever"], policy=session_policy(name), encoder=name)
            for name, e in config["coral"]["session_encoders"].items()]


def llm4cs_jobs(config: dict) -> list[dict]:
    """One run per dense retriever x LLM4CS variant (prompting x aggregation; run policy
    ``llm4cs_policy``)."""
    from convrag.studies.coral.conversational import llm4cs_policy

    x = config["coral"]["llm4cs"]
    return [dict(source=source(config), retriever=r, policy=llm4cs_policy(v["prompting"], v["aggregation"]))
            for r in (x["retrievers"] if x else []) for v in (x["variants"] if x else [])]


def strategy_run(config: dict, strategy: str) -> tuple[str, str] | None:
    """(retriever, policy) of the Table 2 run a history strategy's retrieval IS (shared, not
    searched again): the rewrite strategy's rewrite run (``llm_rewrite`` by ``coral.rewrite.model``,
    or ``rewrite``, the golden one, with ``generation.rewrite: golden``); None for a strategy that
    searches with its own query in the answer job."""
    if strategy != "rewrite":
        return None
    return generation_run(config)[0], ("rewrite" if config["coral"]["generation"]["rewrite"] == "golden"
                                       else "llm_rewrite")


SFT_PREFIX = "sft_"


def sft_rewriters(config: dict) -> dict[str, str]:
    """The fine-tuned rewriters that retrieve (``coral.sft.<name>.retrieves``): name -> base model."""
    return {n: x["model"] for n, x in (config["coral"].get("sft") or {}).items()
            if x["role"] == "rewrite" and x.get("retrieves")}


def sft_rewrite_jobs(config: dict) -> list[dict]:
    """Table 2's -SFT rows: the tuned rewriter's llm_rewrite run in each retriever's index
    (policy ``sft_<name>``)."""
    return [dict(source=source(config), retriever=r, policy=f"{SFT_PREFIX}{n}", rewriter=n)
            for n in sft_rewriters(config) for r in config["coral"]["retrievers"]]


def run_jobs(config: dict) -> list[dict]:
    """Every run Table 2 scores: the ad-hoc query policies, the session encoders, LLM4CS, the
    fine-tuned rewriters."""
    return retrieval_jobs(config) + session_jobs(config) + llm4cs_jobs(config) + sft_rewrite_jobs(config)


def llm4cs_model(config: dict) -> str | None:
    x = config["coral"]["llm4cs"]
    return (x["model"] or config["coral"]["rewrite"]["model"]) if x else None


def trained_on(config: dict, encoder: str) -> str:
    """What a session encoder learns from: a train benchmark, or the evaluated conversations
    themselves (no train split for the generated world; Table 2 says so)."""
    train = config["coral"]["session_encoders"][encoder]["train"]
    return train if train else f"{source(config)} (the evaluated conversations)"


def generation_run(config: dict) -> tuple[str, str]:
    """(retriever, policy) of the run whose passages the generator sees: the configured one,
    else the first retriever with the golden rewrite (else the first policy)."""
    c = config["coral"]
    g = c["generation"]
    policy = g["policy"] or ("rewrite" if "rewrite" in c["policies"] else c["policies"][0])
    return g["retriever"] or (c["retrievers"] or [None])[0], policy


def sft_generators(config: dict) -> dict[str, str]:
    """The fine-tuned generators that answer (``coral.sft.<name>.answers``): name -> base model."""
    return {n: x["model"] for n, x in (config["coral"].get("sft") or {}).items()
            if x["role"] == "generate" and x.get("answers")}


def generation_models(config: dict) -> list[str]:
    """Every answering model: ``generation.models``, then the answering fine-tuned generators
    (the paper's -SFT rows of Tables 3 / 5 and Figure 4's curve after fine-tuning)."""
    return list(config["coral"]["generation"]["models"]) + list(sft_generators(config))


def tuned_strategies(config: dict, name: str) -> list[str]:
    """The history strategies a fine-tuned generator serves: the one it was trained on, and
    llm_summary too when that is raw_context. Why: §D.2 fine-tunes one checkpoint per strategy
    and, having no training data for the LLM summary, answers it with the raw-context
    checkpoint; a checkpoint asked to answer under a prompt it was not tuned on would be a row
    the paper does not have."""
    own = config["coral"]["sft"][name]["strategy"]
    return [own] + (["llm_summary"] if own == "raw_context" else [])


def answered_strategies(config: dict, model: str) -> list[str]:
    """The history strategies ``model`` answers: every ``generation.strategies`` for a registry
    model, those of ``tuned_strategies`` among them for a fine-tuned generator."""
    strategies = config["coral"]["generation"]["strategies"]
    if model not in sft_generators(config):
        return list(strategies)
    return [s for s in strategies if s in tuned_strategies(config, model)]


def generation_jobs(config: dict) -> list[dict]:
    return [dict(source=source(config), model=m, strategy=s) for m in generation_models(config)
            for s in answered_strategies(config, m)]


SWEEP_PREFIX = "history_m"


def sweep_name(m: int) -> str:
    """The answers file (and ``strategy`` wildcard) of one history length of Figure 4."""
    return f"{SWEEP_PREFIX}{m}"


def sweep_jobs(config: dict) -> list[dict]:
    """Figure 4's answer jobs: every generation model x history length m (none without a sweep);
    a fine-tuned generator only when it answers the sweep's strategy (``answered_strategies``)."""
    g = config["coral"]["generation"]
    sw = g["history_sweep"]
    if not sw:
        return []
    tuned = sft_generators(config)
    models = [m for m in generation_models(config) if m not in tuned or sw["strategy"] in tuned_strategies(config, m)]
    return [dict(source=source(config), model=model, strategy=sweep_name(m), m=m)
            for model in models for m in sw["m"]]


def sweep_m(name: str) -> int | None:
    """m of a sweep answers name (``history_m4`` -> 4); None for the strategies of Table 3."""
    return int(name[len(SWEEP_PREFIX):]) if name.startswith(SWEEP_PREFIX) and name[len(SWEEP_PREFIX):].isdigit() \
        else None


def model_jobs(config: dict) -> list[dict]:
    """Every model-calling job (for sizing): contextualisation, LLM rewrites (n per turn for
    LLM4CS), answers (with the
    history summaries of llm_summary; Figure 4's history sweep), NLI and pairwise judging."""
    c = config["coral"]
    jobs = []
    if constructed(config):
        jobs.append(dict(stage="contextualise", role="contextualiser", model=c["contextualise"]["model"],
                         source=source(config)))
    jobs += [dict(stage="retrieve", role="rewriter", model=c["rewrite"]["model"], **j)
             for j in retrieval_jobs(config) if j["policy"] == "llm_rewrite"]
    if c["llm4cs"]:
        from convrag.studies.coral.conversational import llm4cs_requests, llm4cs_variant

        jobs += [dict(stage="retrieve", role="rewriter", model=llm4cs_model(config),
                      samples=llm4cs_requests(*llm4cs_variant(j["policy"]), c["llm4cs"]["n"]), **j)
                 for j in llm4cs_jobs(config)]
    g, nli = c["generation"], c["evaluation"]["nli_model"]
    sw, tuned = g["history_sweep"], sft_generators(config)
    for j in generation_jobs(config) + sweep_jobs(config):
        strategy = sw["strategy"] if sweep_m(j["strategy"]) is not None else j["strategy"]
        # a fine-tuned generator is sized as its base model
        j = {k: (tuned.get(v, v) if k == "model" else v) for k, v in j.items() if k != "m"}
        jobs.append(dict(stage="answer", role="reader", **j))
        if strategy == "llm_summary":
            jobs.append(dict(stage="answer", role="summariser", **{**j, "model": g["summary_model"] or j["model"]}))
        if c["compression"]:  # f_p: one request per shown passage
            jobs.append(dict(stage="answer", role="compressor", **{**j, "model": c["compression"]["model"]}))
        jobs.append(dict(stage="evaluate", role="judge", **{**j, "judge": nli}))
    return jobs
