"""cross's side of ``convrag estimate``: the grid's sharding, answer and scoring jobs sized from a
measured run's accounting (convrag.sizing).

Units: sharding per question (the measured dataset's questions; the target's ``n_questions``);
answer jobs per task of the benchmark (all its domains; the measured ``job.tasks``, pooled by
delivery and benchmark kind: a sharded question asks once per shard); scoring per final answer
(the measured ``job.final_answers``; the target's tasks summed over the benchmark's answer
jobs). Passages: a reader's prompt holds ``top_k`` of them (none closed-book); the content
label asks per passage (more passages: proportionally more requests)."""

from __future__ import annotations

from pathlib import Path

from convrag.cost import WorkList
from convrag.layout import Layout
from convrag.retrieval import is_closed_book, retriever_llm
from convrag.sizing import Pools, job_field, new_worklist, passage_tokens, task_count, work
from convrag.studies.cross import paths
from convrag.studies.cross.plan import answer_jobs, benchmarks, domains, is_multihop, model_jobs
from convrag.studies.cross.wiring import shard_benchmarks

KEY = "cross"
SCORE_ROLES = {"answer_correctness": "judge", "worse_labels_content": "content"}


def _field(f, key: str) -> float:
    return (job_field(f, key) or 0.0) if Path(f).exists() else 0.0


def _kind(config: dict, benchmark: str) -> str:
    return "multihop" if is_multihop(config, benchmark) else "turns"


def _measure(mcfg: dict, results: str) -> Pools:
    L, p = Layout(str(results)), Pools()
    if KEY not in mcfg.get("studies", []):
        return p
    for d in shard_benchmarks(mcfg):
        q = Path(L.questions(d))
        if q.exists():
            with open(q, encoding="utf-8") as fh:
                p.add(("shard",), paths.shards(L, d, "accounting.json"), sum(1 for line in fh if line.strip()),
                      flat_role="sharding")
    for j in answer_jobs(mcfg):
        f = paths.answers(L, j["benchmark"], j["retriever"], j["policy"], j["reader"], j["delivery"], "accounting.json")
        closed = "closed" if is_closed_book(mcfg, j["retriever"]) else "open"
        p.add(("answer", j["delivery"], _kind(mcfg, j["benchmark"]), closed), f, _field(f, "tasks"))
        p.add(("answer", j["delivery"], _kind(mcfg, j["benchmark"])), f, _field(f, "tasks"))
    for b in benchmarks(mcfg):
        f = paths.scores(L, b, "accounting.json")
        p.add(("score",), f, _field(f, "final_answers"))
    return p


def estimate(config: dict, measured: dict, throughput=None) -> WorkList:
    """``Study.estimate`` of cross (see the module doc); what cannot be sized is noted."""
    mcfg, c = measured["config"], config[KEY]
    pools = _measure(mcfg, measured["results"])
    out, measured_any = new_worklist(pools, KEY, measured["results"])
    out.chunk_keys["score"] = ("cross_score_chunk" if c.get("score_chunks", 1) > 1 else "cross_score",
                               "cross.score_chunks", "jobs")
    if not measured_any:
        return out
    notes = out.notes
    mc = mcfg[KEY]
    ptok, how = passage_tokens(measured)
    k_t, k_m = c["top_k"], mc["top_k"]
    tasks: dict[str, float | None] = {}
    for b in benchmarks(config):
        n, why = task_count(config, b)
        tasks[b] = n
        if n is None:
            notes.append(f"benchmark {b}: its answer and scoring jobs are not sized: {why}")
    calls: dict[str, float] = {}

    def add(kind, job, model, role, key, units, cap, delta=0.0, scale=1.0, prole=None, series=None):
        per = pools.per_unit(key, prole or role)
        if per is None:
            notes.append(f"{kind} jobs: the {role} ({model}) is not sized: no measured {kind} job has a "
                         f"'{prole or role}' accounting (the measured grid runs no such cell)")
            return
        out.extend(work(KEY, kind, job, model, role, per.scaled(scale), units, cap, delta,
                        series=series or "", chunk_units=units if series else 0.0))
        calls[role] = calls.get(role, 0.0) + per.requests * scale * units

    answered: dict[str, float] = {}
    for j in model_jobs(config):
        st = j["stage"]
        if st == "shard":
            add("shard", f"shard/{j['benchmark']}", j["model"], "sharding", ("shard",),
                config["datasets"][j["benchmark"]]["n_questions"], c["sharding"]["max_tokens"])
            continue
        b = j["benchmark"]
        if tasks[b] is None:
            continue
        if st == "score":  # cross.score_chunks jobs share the benchmark's final answers evenly
            n = c.get("score_chunks", 1)
            for k in range(n):
                for role, model in (("answer_correctness", c["judge"]["model"]), ("worse_labels_content",
                                                                                 c["content"]["model"])):
                    if model:
                        cap = c[SCORE_ROLES[role]]["max_tokens"]
                        add("score", f"score/{b}" + (f"/chunk{k}" if n > 1 else ""), model, role, ("score",),
                            answered.get(b, 0.0) / n, cap, scale=k_t / k_m if role == "worse_labels_content" else 1.0,
                            series=f"score/{b}")
            continue
        what = f"answer/{b}/{j['retriever']}/{j['policy']}/{j['reader']}/{j['delivery']}"
        closed = is_closed_book(config, j["retriever"])
        key = ("answer", j["delivery"], _kind(config, b))
        okey = key + ("closed" if closed else "open",)
        if pools.per_unit(okey, "reader") is not None:
            key, delta = okey, (0.0 if closed else (k_t - k_m) * ptok)
        else:  # closed book not measured: the open cells without their passages
            delta = -k_m * ptok if closed else (k_t - k_m) * ptok
        add("answer", what, j["reader"], "reader", key, tasks[b], c["sampling"]["max_tokens"], delta)
        answered[b] = answered.get(b, 0.0) + tasks[b]
        if j["policy"] == "llm_rewrite":
            add("answer", what, c["rewrite"]["model"], "rewriter", key, tasks[b], c["rewrite"].get("max_tokens"))
        r_llm = retriever_llm(config, j["retriever"])
        if r_llm:
            add("answer", what, r_llm, "retriever", key, tasks[b], None)
    n_domains = {b: len(domains(config, b)) for b in benchmarks(config)}
    out.facts.update({
        "grid": f"{len(answer_jobs(config)):,} answer jobs over {len(benchmarks(config))} benchmarks ("
                + ", ".join(f"{b} {n:,.0f} tasks / {n_domains[b]} domains" for b, n in tasks.items() if n is not None)
                + "); " + ", ".join(f"{r} {v:,.0f} calls" for r, v in calls.items()),
        "units": "tasks per answer job (all the benchmark's domains); final answers per scoring job (the "
                 f"benchmark's over cross.score_chunks, now {c.get('score_chunks', 1)})",
        "passages": f"{ptok:.0f} tokens per passage ({how}); top_k {k_t} (measured {k_m})"})
    # notes of the same cause once
    out.notes[:] = list(dict.fromkeys(out.notes))
    return out
