"""mtrag_un's side of ``convrag estimate``: its planned rewrite, answer and judge jobs sized
from a measured run's accounting (convrag.sizing). Units are benchmark tasks per domain: the
measured jobs' ``job.tasks`` / ``job.items``, the target's ``estimate.tasks.<benchmark>`` (a
sample of local files: its tasks counted; the human-evaluation file: its evaluated responses).
Rewriter and reader: tokens per task; judge: per evaluated item (all its metrics' calls)."""

from __future__ import annotations

from pathlib import Path

from convrag.cost import WorkList
from convrag.layout import Layout
from convrag.sizing import Pools, job_field, new_worklist, passage_tokens, task_count, work
from convrag.studies.mtrag_un import paths
from convrag.studies.mtrag_un.plan import domains, model_jobs

KEY = "mtrag_un"


def _measure(mcfg: dict, results: str) -> Pools:
    L, p = Layout(str(results)), Pools()
    for j in model_jobs(mcfg) if KEY in mcfg.get("studies", []) else []:
        if j["stage"] == "retrieve":
            f = paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"], "accounting.json")
            p.add(("rewriter",), f, job_field(f, "tasks") if Path(f).exists() else 0)
        elif j["stage"] == "answer":
            f = paths.answers(L, j["benchmark"], j["model"], j["setting"], j["domain"], "accounting.json")
            p.add(("reader", j["setting"]), f, job_field(f, "tasks") if Path(f).exists() else 0)
        elif j["stage"] == "evaluate":
            f = paths.evaluation(L, j["benchmark"], j["model"], j["setting"], j["domain"], "accounting.json")
            p.add(("judge", j["setting"]), f, job_field(f, "items") if Path(f).exists() else 0)
    return p


def human_items(config: dict) -> tuple[float | None, str]:
    """The items the human_eval job judges (one per evaluated response: task x system):
    ``estimate.tasks.mtrag_human`` when given, else counted in a local human-evaluation file
    (the sample config's); (None, why) for a URL not yet downloaded."""
    import json

    from convrag.sizing import local_path

    n, src = task_count(config, "mtrag_human")
    path = config[KEY]["evaluation"]["human_evaluations"] or ""
    if n is not None or path.startswith(("http://", "https://")) or not local_path(path).is_file():
        return n, src
    data = json.loads(local_path(path).read_text(encoding="utf-8"))
    return float(len(data.get("evaluations") or [])), f"evaluated responses in {path}"


def estimate(config: dict, measured: dict, throughput=None) -> WorkList:
    """``Study.estimate`` of mtrag_un (see the module doc); what cannot be sized is noted."""
    mcfg, m = measured["config"], config[KEY]
    pools = _measure(mcfg, measured["results"])
    out, measured_any = new_worklist(pools, KEY, measured["results"])
    if not measured_any:
        return out
    notes = out.notes
    mm, g = mcfg[KEY], m["generation"]
    ptok, how = passage_tokens(measured, [f"{mm['benchmark']}.{d}" for d in domains(mcfg)])
    shown = {"rag": (g["top_k"], mm["generation"]["top_k"]), "reference": (g["reference_k"], mm["generation"]["reference_k"])}
    judge_cap = max(m["evaluation"]["max_tokens"].values())
    doms, calls, unknown = domains(config), {}, {}
    for j in model_jobs(config):
        st = j["stage"]
        bench = j.get("benchmark")
        if st == "human_eval":
            n, src = human_items(config)
        else:
            n, src = task_count(config, bench, j.get("domain"), doms if j.get("domain") else None)
        what = "/".join(str(j[k]) for k in ("stage", "benchmark", "domain", "model", "setting", "retriever", "policy")
                        if j.get(k))
        if n is None:  # one note per benchmark below, not one per job
            unknown.setdefault((bench, src), []).append(what)
            continue
        if st == "retrieve":
            key, cap, delta = ("rewriter",), m["rewrite"]["max_tokens"], 0.0
        elif st == "answer":
            key, cap = ("reader", j["setting"]), g["sampling"]["max_tokens"]
            target, was = shown[j["setting"]]
            delta = (target - was) * ptok
        else:  # evaluate, human_eval: the judge's calls per item (human_eval: as the reference setting's)
            key, cap, delta = ("judge", j.get("setting", "reference")), judge_cap, 0.0
            if st == "human_eval":
                notes.append("human_eval: sized as the measured reference-setting judge per item (the default does "
                             "not re-score MTRAG's human-evaluated responses)")
        per = pools.per_unit(key, key[0])
        if per is None:
            notes.append(f"{what}: not sized: the measured run has no {'/'.join(key)} accounting")
            continue
        kind = {"retrieve": "rewrite"}.get(st, st)
        out += work(KEY, kind, what, j["model"] if st != "evaluate" else j["judge"], key[0], per, n, cap, delta)
        calls[key[0]] = calls.get(key[0], 0.0) + per.requests * n
    for (bench, src), jobs in unknown.items():
        stages = ", ".join(dict.fromkeys(w.split("/", 1)[0] for w in jobs))
        notes.append(f"{len(jobs)} {stages} job{'s' if len(jobs) > 1 else ''} of {bench} not sized: its number of "
                     f"tasks is unknown ({src})")
    out.notes[:] = list(dict.fromkeys(out.notes))  # one note per cause
    out.facts.update({
        "grid": f"{len(model_jobs(config))} model jobs: " + ", ".join(f"{r} {c:,.0f} calls" for r, c in calls.items()),
        "units": "benchmark tasks per domain (estimate.tasks.<benchmark> before the data exist)",
        "passages": f"{ptok:.0f} tokens per passage ({how}); rag shows top_k {g['top_k']} (measured "
                    f"{mm['generation']['top_k']}), reference up to reference_k {g['reference_k']} (measured "
                    f"{mm['generation']['reference_k']}: an upper bound)",
        "judge": f"every judge reply capped at the largest evaluation.max_tokens ({judge_cap}); its prompts keep the "
                 "measured answer and passage lengths"})
    return out
