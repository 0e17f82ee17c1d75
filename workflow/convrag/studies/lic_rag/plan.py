"""The lic_rag grid: its constants, typed settings, cells and jobs.

One definition each, used by the rule file, the simulate job, the analyses and sizing.
Settings are built from the *validated* config block (the schema fills every default), so
there are no second defaults here that could disagree with the schema.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from convrag.studies.lic_rag.judges import CATEGORIES  # noqa: F401  (response categories of assistant turns)
from convrag.llm.types import Sampling

CONDITIONS = ("FULL", "CONCAT", "SHARDED", "RECAP", "SNOWBALL")
SINGLE_TURN = ("FULL", "CONCAT")
MULTI_TURN = ("SHARDED", "RECAP", "SNOWBALL")
POLICIES = ("history", "current")
ROLES = ("user_simulator", "classifier", "judge")


@dataclass(frozen=True)
class Settings:
    """What a simulate job needs of the lic_rag block (``from_block`` of a validated block)."""

    runs: int
    top_k: int
    recall_k: int
    seed: int
    max_extra_turns: int
    assistant: Sampling
    user: Sampling

    @classmethod
    def from_block(cls, lic: dict) -> "Settings":
        return cls(runs=lic["runs"], top_k=lic["top_k"], recall_k=lic["recall_k"], seed=lic["seed"],
                   max_extra_turns=lic["max_extra_turns"], assistant=Sampling.from_config(lic["assistant"]),
                   user=Sampling.from_config(lic["user_simulator"]))


SETTING_KEYS = ("runs", "chunk_size", "top_k", "recall_k", "seed", "max_extra_turns", "assistant",
                "user_simulator", "classifier", "judge")


def job_settings(lic: dict, model: str | None = None) -> dict:
    """The part of the block a simulate job reads (passed to it as JSON); with ``model``, its
    assistant sampling is the block's ``assistant`` with ``assistant_by_model[model]`` over it
    (its ``reasoning`` switch is not sampling: ``reasoning``)."""
    out = {k: lic[k] for k in SETTING_KEYS}
    own = {k: v for k, v in (lic.get("assistant_by_model") or {}).get(model, {}).items() if k != "reasoning"}
    out["assistant"] = {**out["assistant"], **own}
    return out


def reasoning(lic: dict, model: str) -> bool | None:
    """A model's thinking switch in this grid (``assistant_by_model[model].reasoning``); None:
    the registry entry's own setting."""
    return (lic.get("assistant_by_model") or {}).get(model, {}).get("reasoning")


def job_block(settings: dict, source: str = "simulate --settings") -> dict:
    """A simulate job's settings JSON validated against the study's own schema fragment,
    defaults filled from it (so a job run by hand gets exactly the config's defaults)."""
    from convrag.schema import validate_fragment
    from convrag.studies.lic_rag import STUDY

    return validate_fragment(dict(settings), STUDY.schema_path, SETTING_KEYS, source, prefix="lic_rag")


def role_model(lic: dict, role: str) -> str:
    """The registry model of a role (user_simulator, classifier, judge): its own ``model``
    or, when null, the sharding model."""
    return lic[role]["model"] or lic["sharding"]["model"]


def n_chunks(config: dict, dataset: str) -> int:
    return math.ceil(config["datasets"][dataset]["n_questions"] / config["lic_rag"]["chunk_size"])


def cells(lic: dict, closed: bool = False) -> list[tuple[str, str]]:
    """(condition, policy) pairs simulated for one retriever.

    FULL and CONCAT are single-turn, so HISTORY and CURRENT would send the same query: they
    run once with policy ``none``. The multi-turn conditions (SHARDED, RECAP, SNOWBALL) run
    once per policy. Closed-book retrieves nothing: every condition uses ``none``.
    """
    out = []
    for cond in lic["conditions"]:
        if cond in MULTI_TURN and not closed:
            out.extend((cond, p) for p in lic["policies"])
        else:
            out.append((cond, "none"))
    return list(dict.fromkeys(out))


def simulate_jobs(config: dict) -> list[dict]:
    """Every simulate job of the grid: one per (dataset, model, retriever, chunk), running all
    of that retriever's cells in lockstep (one batch per turn for all cells)."""
    from convrag.retrieval import is_closed_book

    lic = config["lic_rag"]
    by_ret = {ret: cells(lic, is_closed_book(config, ret)) for ret in lic["retrievers"]}
    with_ret = lic.get("retriever_models") or {}  # a retriever's models, where the config limits them
    return [
        dict(dataset=ds, model=model, retriever=ret, chunk=chunk, cells=by_ret[ret])
        for ds in lic["datasets"] for model in lic["models"] for ret in lic["retrievers"]
        if model in with_ret.get(ret, lic["models"])
        for chunk in range(n_chunks(config, ds))
    ]


model_jobs = simulate_jobs  # Study.plan's conventional name (convrag.studies.base.Study.HOOKS)


def simulate_cells(config: dict) -> list[dict]:
    """Every (dataset, model, retriever, condition, policy, chunk) cell: one conversation file each."""
    return [
        dict(dataset=j["dataset"], model=j["model"], retriever=j["retriever"], condition=c, policy=p, chunk=j["chunk"])
        for j in simulate_jobs(config) for c, p in j["cells"]
    ]
