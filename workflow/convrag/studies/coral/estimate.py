"""coral's side of ``convrag estimate``: its planned contextualisation, rewrite, answer, summary
and judge jobs sized from a measured run's accounting (convrag.sizing). Units are conversation
turns (tasks): the measured jobs' ``job.tasks`` (runs), the measured task file (construction)
and ``job.items`` of the matching evaluation (answers, judges); the target's
``estimate.tasks.<benchmark>`` (a sample of local files: its tasks counted; the generated
world: its built task file, else ``coral.world``'s expected turns), Figure 4's sweep
``history_sweep.conversations`` (one turn each). Prompts follow the settings the target changes: passages shown (``top_k``), the sweep's
history length m (a line through the measured m's), LLM4CS samples (``llm4cs.n``)."""

from __future__ import annotations

from pathlib import Path

from convrag.cost import WorkList
from convrag.layout import Layout
from convrag.sizing import Pools, job_field, new_worklist, passage_tokens, task_count, work
from convrag.studies.coral import paths
from convrag.studies.coral.plan import constructed, model_jobs, source, sweep_m
from convrag.studies.coral.wiring import compare_model

KEY = "coral"


def _units(f, key: str) -> float:
    return (job_field(f, key) or 0.0) if Path(f).exists() else 0.0


def _lines(f) -> int:
    with open(f, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def _rewrite_key(j: dict) -> tuple:
    """Measured pools of a rewrite job: LLM4CS (``samples`` per turn) apart from the one-shot rewrite."""
    return ("rewrite", "llm4cs" if "samples" in j else "llm_rewrite")


def _measure(mcfg: dict, results: str) -> tuple[Pools, dict]:
    """Pools keyed by stage (sweep answers by their m; rewrites per turn and sample), and the
    measured sweep prompt per call by m."""
    L, p, sweep = Layout(str(results)), Pools(), {}
    if KEY not in mcfg.get("studies", []):
        return p, sweep
    src = source(mcfg)
    if constructed(mcfg) and Path(paths.tasks(L, src)).exists():
        p.add(("construct",), paths.tasks(L, src, "accounting.json"), _lines(paths.tasks(L, src)))
    for j in model_jobs(mcfg):
        if j["stage"] == "retrieve":
            f = paths.run(L, src, j["retriever"], j["policy"], "accounting.json")
            p.add(_rewrite_key(j), f, _units(f, "tasks") * j.get("samples", 1))
        elif j["stage"] == "answer" and j["role"] == "reader":
            ev = paths.evaluation(L, src, j["model"], j["strategy"], "accounting.json")
            items, m = _units(ev, "items"), sweep_m(j["strategy"])
            key = ("sweep",) if m is not None else (j["strategy"],)
            f = paths.answers(L, src, j["model"], j["strategy"], "accounting.json")
            if p.add(("answer",) + key, f, items) and m is not None:
                one = Pools()
                one.add(0, f, items)
                sweep[m] = one.per_unit(0, "reader")
            p.add(("evaluate",) + key, ev, items)
    return p, sweep


def _world_tasks(config: dict) -> tuple[float, str]:
    """Turns of the conversations built from the generated world: counted in the target run's
    own task file when it exists, else ``estimate.tasks.<world corpus>``, else expected from ``coral.world`` (conversations per sampler
    x the mean of its turn range, or of the paper's mixture of ranges)."""
    from convrag.studies.coral.pages import DEFAULT_TURNS, TURN_RANGES

    w, src = config[KEY]["world"], source(config)
    built = Path(paths.tasks(Layout(config["results_dir"]), src))
    if built.exists():
        return float(_lines(built)), str(built)
    n, why = task_count(config, src)  # estimate.tasks.<world corpus> when given
    if n is not None:
        return n, why
    share = w.get("long_share", 0.2)

    def mean(kind):
        if kind in (w.get("turns") or {}):
            lo, hi = w["turns"][kind]
            return (lo + hi) / 2
        ranges = TURN_RANGES.get(kind, (DEFAULT_TURNS[kind],))
        means = [(lo + hi) / 2 for lo, hi in ranges]
        return means[0] if len(means) == 1 else (1 - share) * means[0] + share * means[1]

    n = sum(k * mean(kind) for kind, k in (w.get("samplers") or {}).items())
    return float(n), "expected from coral.world.samplers x the mean of each turn range"


def _sweep_slope(sweep: dict) -> float:
    """Prompt tokens per call per history turn: least squares through the measured (m, prompt)."""
    pts = [(m, t.prompt_tokens / t.requests) for m, t in sweep.items() if t is not None and t.requests]
    if len(pts) < 2:
        return 0.0
    mx, my = sum(m for m, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    den = sum((m - mx) ** 2 for m, _ in pts)
    return sum((m - mx) * (y - my) for m, y in pts) / den if den else 0.0


def estimate(config: dict, measured: dict, throughput=None) -> WorkList:
    """``Study.estimate`` of coral (see the module doc); what cannot be sized is noted."""
    mcfg, c = measured["config"], config[KEY]
    if not model_jobs(config):  # e.g. Table 4 on a sample without a corpus: nothing calls a model
        bench = c["benchmark"] if not constructed(config) else source(config)
        n_tasks, why = task_count(config, bench)
        return WorkList(facts={"grid": f"{n_tasks or 0:,.0f} tasks of {bench} ({why}); no model job: the config "
                                       "plans no LLM rewrite, no generation and no construction (0 LLM calls)"})
    pools, sweep = _measure(mcfg, measured["results"])
    out, measured_any = new_worklist(pools, KEY, measured["results"])
    if not measured_any:
        return out
    notes = out.notes
    mc, g, e = mcfg[KEY], c["generation"], c["evaluation"]
    ptok, how = passage_tokens(measured, [source(mcfg)] if constructed(mcfg) else None)
    delta_k = (g["top_k"] - mc["generation"]["top_k"]) * ptok
    slope = _sweep_slope(sweep)
    m_mean = sum(sweep) / len(sweep) if sweep else 0.0
    src = source(config)
    bench = c["benchmark"] if not constructed(config) else src
    n_tasks, why = _world_tasks(config) if constructed(config) else task_count(config, bench)
    sw = g["history_sweep"]
    calls: dict[str, float] = {}

    def add(kind, job, model, role, key, units, cap, delta=0.0, scale=1.0):
        per = pools.per_unit(key, role)
        if per is None:
            notes.append(f"{job}: {role} not sized: the measured run has no {'/'.join(key)} '{role}' accounting")
            return
        per = per.scaled(scale)
        out.extend(work(KEY, kind, job, model, role, per, units, cap, delta))
        calls[role] = calls.get(role, 0.0) + per.requests * units

    if n_tasks is None:
        notes.append(f"{src}: its tasks are not sized: {why}")
    if constructed(config) and n_tasks is not None:
        add("contextualise", f"contextualise/{src}", c["contextualise"]["model"], "contextualiser", ("construct",),
            n_tasks, c["contextualise"]["max_tokens"])
    judges = ([compare_model(config)] + list(e["judges"])) if e["compare"] else []
    sft = c.get("sft") or {}
    for j in model_jobs(config):
        st, m = j["stage"], sweep_m(j.get("strategy") or "")
        units = sw["conversations"] if m is not None else n_tasks
        if units is None or st == "contextualise":
            continue
        if st == "retrieve":
            key = _rewrite_key(j)
            if pools.per_unit(key, "rewriter") is None and pools.per_unit(("rewrite", "llm4cs"), "rewriter"):
                notes.append("llm_rewrite: not measured (the measured grid has no such run): sized as one LLM4CS "
                             "rewrite sample per turn")
                key = ("rewrite", "llm4cs")
            add("rewrite", f"rewrite/{src}/{j['retriever']}/{j['policy']}", j["model"], "rewriter", key,
                n_tasks * j.get("samples", 1), c["rewrite"]["max_tokens"])
            continue
        key = ("sweep",) if m is not None else (j["strategy"],)
        job = f"{src}/{j['model']}/{j['strategy']}"
        model = sft[j["model"]]["model"] if j["model"] in sft else j["model"]  # a fine-tuned generator: its base
        if st == "answer" and j["role"] == "reader":
            delta = delta_k + (slope * (m - m_mean) if m is not None else 0.0)
            add("answer", f"answer/{job}", model, "reader", ("answer",) + key, units, g["sampling"]["max_tokens"],
                delta)
        elif st == "answer":
            add("answer", f"answer/{job}", sft.get(j["model"], {}).get("model", j["model"]), "summariser",
                ("answer",) + key, units, None)
        elif st == "evaluate":
            if e["nli"] == "llm":
                add("evaluate", f"evaluate/{job}", e["nli_model"], "judge", ("evaluate",) + key, units, None)
            for jm in judges:  # every comparison judge asks as the measured pairwise judge did
                add("evaluate", f"evaluate/{job}", jm, "pairwise_judge", ("evaluate",) + key, units,
                    e.get("compare_max_tokens"))
    if e["nli"] != "llm":
        notes.append(f"the {e['nli']} NLI judge (citation recall / precision) is a classifier, not an LLM: its "
                     "GPU time is not sized")
    out.notes[:] = list(dict.fromkeys(out.notes))  # one note per cause
    out.facts.update({
        "grid": f"{n_tasks or 0:,.0f} tasks of {bench} ({why}); " + ", ".join(f"{r} {v:,.0f} calls"
                                                                         for r, v in calls.items()),
        "units": "conversation turns per job (Figure 4's sweep: history_sweep.conversations)",
        "passages": f"{ptok:.0f} tokens per passage ({how}); top_k {g['top_k']} (measured {mc['generation']['top_k']})",
        "sweep": f"{slope:+.0f} prompt tokens per call per history turn (measured m {sorted(sweep)})"})
    return out
