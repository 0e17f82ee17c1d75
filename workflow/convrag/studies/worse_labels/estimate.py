"""worse_labels' side of ``convrag estimate``: its planned expansion, reader, content-judge and
answer-judge jobs sized from a measured run's accounting (convrag.sizing).

Units: expansions per turn (the measured components' ``job.tasks`` x expansions; the target's
turns x its rung's expansions, an expansion another rung already asks with the same model and
token cap left out: the LLM cache answers it); readers, content and answer judges per context of a slice (the
measured reads' ``job.contexts``; the target's turns x context sets x the measured contexts per
turn and set). Turns: the measured eval runs' ``job.tasks``; the target's
``estimate.tasks.<benchmark>`` over the slice's domains. A reader's prompt holds ``top_k``
passages (more passages: more prompt tokens); a content judge labels each passage (more passages:
proportionally more requests)."""

from __future__ import annotations

from pathlib import Path

from convrag.cost import WorkList
from convrag.layout import Layout
from convrag.sizing import Pools, job_field, new_worklist, passage_tokens, task_count, work
from convrag.studies.worse_labels import paths
from convrag.studies.worse_labels.plan import (answer_judges, content_judges, model_jobs, readers, rung_jobs, sets,
                                               slice_domains, slices)

KEY = "worse_labels"


def _field(f, key: str) -> float:
    return (job_field(f, key) or 0.0) if Path(f).exists() else 0.0


def _answer_role(role: str) -> str:
    return "answer_judge" if role.startswith("judge:") else role


def _measure(mcfg: dict, results: str) -> tuple[Pools, dict]:
    """Pools per stage and slice, and per measured slice (turns, contexts)."""
    L, p, size = Layout(str(results)), Pools(), {}
    if KEY not in mcfg.get("studies", []):
        return p, size
    for name, s in slices(mcfg).items():
        first = next(iter(s["ladder"]))
        turns = sum(_field(paths.run(L, name, "eval", first, d, "accounting.json"), "tasks")
                    for d in slice_domains(mcfg, name))
        ctx = max((_field(paths.reads(L, name, m, "accounting.json"), "contexts") for m in readers(mcfg)), default=0.0)
        size[name] = (turns, ctx, len(sets(mcfg, name)))
        for j in rung_jobs(mcfg):
            spec = s["ladder"].get(j["rung"], {}) if j["slice"] == name else {}
            if spec.get("kind") == "expansion" and not spec.get("released"):
                f = paths.components(L, name, j["part"], j["rung"], j["domain"], "accounting.json")
                p.add(("expand",), f, _field(f, "tasks") * len(spec["expansions"]))
        for m in readers(mcfg):
            p.add(("read", name), paths.reads(L, name, m, "accounting.json"), ctx)
            p.add(("correctness", name), paths.correctness(L, name, m, "accounting.json"), ctx, _answer_role)
        for m in content_judges(mcfg):
            p.add(("label", name), paths.labels(L, name, m, "accounting.json"), ctx)
    return p, size


def _twin(size: dict, pools: Pools, stage: str, name: str, role: str) -> str | None:
    """The measured slice of the same name, else any measured slice with this stage's role."""
    for s in [name] + sorted(size):
        if pools.per_unit((stage, s), role) is not None:
            return s
    return None


def estimate(config: dict, measured: dict, throughput=None) -> WorkList:
    """``Study.estimate`` of worse_labels (see the module doc); what cannot be sized is noted."""
    mcfg, wl = measured["config"], config[KEY]
    pools, size = _measure(mcfg, measured["results"])
    out, measured_any = new_worklist(pools, KEY, measured["results"])
    if not measured_any:
        return out
    notes = out.notes
    ptok, how = passage_tokens(measured)
    k_t, k_m = wl["top_k"], mcfg[KEY]["top_k"]
    turns, calls = {}, {}
    for name, s in slices(config).items():
        doms, n = slice_domains(config, name), 0.0
        for d in doms:
            c, why = task_count(config, s["benchmark"], d, doms)
            if c is None:
                notes.append(f"slice {name}: not sized: the number of tasks of {s['benchmark']} is unknown ({why})")
                n = None
                break
            n += c
        turns[name] = n

    def contexts(name: str, twin: str) -> float:
        mt, mc, ms = size[twin]
        per = mc / (mt * ms) if mt and ms else 1.0  # measured contexts per turn and context set
        return turns[name] * len(sets(config, name)) * per

    def add(kind, job, model, role, key, units, cap, delta=0.0, scale=1.0):
        per = pools.per_unit(key, role)
        out.extend(work(KEY, kind, job, model, role, per.scaled(scale), units, cap, delta))
        calls[role] = calls.get(role, 0.0) + per.requests * scale * units

    asked: set[tuple] = set()  # (slice, part, domain, model, max_tokens, kind): the LLM cache answers a repeat
    for j in model_jobs(config):
        st, name = j["stage"], j.get("slice")
        what = "/".join(str(j[x]) for x in ("stage", "slice", "part", "domain", "rung", "model", "reader", "benchmark")
                        if j.get(x))
        if st in ("audit", "label_human"):
            notes.append(f"{what}: not sized: the measured default runs no {st.replace('_', ' ')} (no accounting to "
                         "scale)")
            continue
        if turns.get(name) is None:
            continue
        if st == "expand":
            spec = slices(config)[name]["ladder"][j["rung"]]
            if pools.per_unit(("expand",), "expander") is None:
                notes.append(f"{what}: not sized: the measured run has no expansion accounting")
                continue
            n, why = task_count(config, j["benchmark"], j["domain"], slice_domains(config, name))
            if n is None:
                notes.append(f"expand/{name}/{j['part']}/{j['rung']}: not sized: the number of tasks of "
                             f"{j['benchmark']} is unknown ({why})")
                continue
            # an expansion another rung already asks with the same model and cap (the Query2doc-only
            # check repeats Fusion's Query2doc requests) comes from the LLM cache: not a call
            new = [k for k in spec["expansions"]
                   if (name, j["part"], j["domain"], j["model"], spec["max_tokens"], k) not in asked]
            asked.update((name, j["part"], j["domain"], j["model"], spec["max_tokens"], k) for k in spec["expansions"])
            if not new:
                notes.append(f"expand/{name}/{j['rung']}: its requests are another rung's (the LLM cache answers them)")
                continue
            add("expand", what, j["model"], "expander", ("expand",), n * len(new), spec["max_tokens"])
            continue
        stage, role = {"read": ("read", "reader"), "label": ("label", "judge"),
                       "correctness": ("correctness", "answer_judge")}[st]
        twin = _twin(size, pools, stage, name, role)
        if twin is None:
            notes.append(f"{what}: not sized: the measured run has no {stage} accounting")
            continue
        if twin != name:
            notes.append(f"slice {name}: {stage} sized from the measured slice {twin}")
        units = contexts(name, twin)
        if st == "read":
            add(st, what, j["model"], role, (stage, twin), units, wl["readers"]["max_tokens"], (k_t - k_m) * ptok)
        elif st == "label":
            add(st, what, j["model"], role, (stage, twin), units, wl["judges"]["max_tokens"], scale=k_t / k_m)
        else:
            cap = next((a["max_tokens"] for a in answer_judges(config) if a["model"] == j["model"]), None)
            add(st, what, j["model"], role, (stage, twin), units, cap)
    out.notes[:] = list(dict.fromkeys(out.notes))  # one note per cause
    out.facts.update({
        "grid": ", ".join(f"{n}: {t:,.0f} turns x {len(sets(config, n))} context sets" for n, t in turns.items()
                          if t is not None) + "; " + ", ".join(f"{r} {c:,.0f} calls" for r, c in calls.items()),
        "units": "expansions per turn; contexts per slice (readers, content and answer judges)",
        "passages": f"{ptok:.0f} tokens per passage ({how}); top_k {k_t} (measured {k_m}): reader prompts "
                    f"{(k_t - k_m) * ptok:+.0f} tokens, content-judge requests x {k_t / k_m:.2f}"})
    return out
