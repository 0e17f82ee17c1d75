"""The generic cost model of ``convrag estimate``: tokens, GPU time and a SLURM layout.

A study measures its own accounting and plans its own jobs (``Study.estimate``); it hands
back ``Work`` items: what one planned job asks of one model in one role, in each scenario
(``measured``: measured tokens per call; ``long``: every reply at its max_tokens). This module
only adds them up (per model, per study and role, per model-size class), turns a local GPU
model's tokens into GPU-hours with a FLOP model, and times every job against a SLURM limit.
It knows no study. docs/scaling.md lists every assumption.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from convrag.errors import ConfigError

SCENARIOS = ("measured", "long")
# Peak dense bf16 tensor throughput per GPU, TFLOP/s (NVIDIA datasheets; V100 has no bf16:
# its fp16 figure). Keys are the registry's gpu_model values.
PEAK_BF16_TFLOPS = {"a100": 312.0, "h100": 989.0, "h200": 989.0, "b200": 2250.0, "l40s": 362.0,
                    "a40": 150.0, "a10": 125.0, "l4": 121.0, "v100": 125.0}
SIZE_CLASSES = ((10.0, "small (<=10B)"), (40.0, "medium (10-40B)"), (math.inf, "large (>40B)"))


@dataclass
class Throughput:
    """The GPU-time model; every number is an assumption (docs/scaling.md).

    Per GPU, tokens/s = efficiency x peak bf16 FLOP/s / (2 x params) (a forward pass costs ~2
    FLOP per parameter and token). Prefill runs compute-bound in large batches (``prefill_mfu``);
    decode is bandwidth-bound (``decode_mfu``, set against published vLLM offline throughput).
    n-way tensor parallelism keeps ``tp_efficiency[n]`` of n GPUs. A job loads each of its local
    models once: ``load_fixed_s`` (engine start, CUDA graphs) + bf16 weights at ``load_gb_per_s``.
    """

    prefill_mfu: float = 0.40
    decode_mfu: float = 0.15
    tp_efficiency: dict[int, float] = field(default_factory=lambda: {1: 1.0, 2: 0.9, 4: 0.8, 8: 0.7})
    load_fixed_s: float = 90.0
    load_gb_per_s: float = 1.0
    default_gpu: str = "a100"

    def peak_flops(self, gpu_model: str | None) -> float:
        key = (gpu_model or self.default_gpu).lower()
        return PEAK_BF16_TFLOPS.get(key, PEAK_BF16_TFLOPS[self.default_gpu]) * 1e12

    def rates(self, params_b: float, gpu_model: str | None) -> tuple[float, float]:
        """(prefill, decode) tokens/s per GPU."""
        per_token, peak = 2.0 * params_b * 1e9, self.peak_flops(gpu_model)
        return self.prefill_mfu * peak / per_token, self.decode_mfu * peak / per_token

    def tp_eff(self, n: int) -> float:
        below = [k for k in self.tp_efficiency if k <= n]
        return self.tp_efficiency[max(below)] if below else 1.0

    def gpu_seconds(self, prompt_tokens: float, completion_tokens: float, params_b: float,
                    gpu_model: str | None, gpus: int) -> float:
        """GPU-seconds (all the job's GPUs together) to process these tokens."""
        pre, dec = self.rates(params_b, gpu_model)
        return (prompt_tokens / pre + completion_tokens / dec) / self.tp_eff(max(gpus, 1))

    def load_seconds(self, params_b: float) -> float:
        return self.load_fixed_s + 2.0 * params_b / self.load_gb_per_s


@dataclass
class Tokens:
    """Additive LLM counters (the accounting's names): ``requests`` asked for, ``calls`` that
    reach a backend (distinct requests of a job), and their prompt and completion tokens."""

    requests: float = 0.0
    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    backend_prompt_tokens: float = 0.0
    backend_completion_tokens: float = 0.0

    def add(self, other: "Tokens", scale: float = 1.0) -> "Tokens":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + scale * getattr(other, f.name))
        return self

    def scaled(self, scale: float) -> "Tokens":
        return Tokens().add(self, scale)

    def grown(self, prompt: float = 0.0, completion: float = 0.0) -> "Tokens":
        """Plus asked-for tokens; the backend figures grow in the same backend/asked ratio."""
        t = self.scaled(1.0)
        rp = self.backend_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 1.0
        rc = self.backend_completion_tokens / self.completion_tokens if self.completion_tokens else 1.0
        t.prompt_tokens, t.backend_prompt_tokens = t.prompt_tokens + prompt, t.backend_prompt_tokens + prompt * rp
        t.completion_tokens = t.completion_tokens + completion
        t.backend_completion_tokens = t.backend_completion_tokens + completion * rc
        return t

    def to_dict(self, digits: int = 1) -> dict[str, float]:
        return {k: round(v, digits) for k, v in asdict(self).items()}


def reply_delta(tok: Tokens, max_tokens: float, scenario: str) -> float:
    """Completion tokens to add per request for a scenario: ``measured`` keeps the measured
    length, capped at max_tokens; ``long`` puts every reply at max_tokens."""
    if not tok.requests:
        return 0.0
    per = tok.completion_tokens / tok.requests
    return (min(per, max_tokens) if scenario == "measured" else max_tokens) - per


@dataclass
class Work:
    """What one planned job (``job``, of kind ``kind``: the stage it runs) asks of one model in
    one role, in one scenario. ``units``: what the study's chunking divides among jobs (its
    items), 0 when the job is not chunked; ``series``: the jobs that share one list of units
    (they differ only by chunk)."""

    study: str
    kind: str
    job: str
    model: str
    role: str
    scenario: str
    tokens: Tokens
    units: float = 0.0
    series: str = ""


class WorkList(list):
    """A study's estimate: its ``Work`` items, ``notes`` (what was approximated or left out)
    and ``facts`` (JSON-able, shown above its tables)."""

    def __init__(self, items=(), notes=None, facts=None, chunk_keys=None):
        super().__init__(items)
        self.notes = list(notes or [])
        self.facts = dict(facts or {})
        # job kind -> (Snakemake rule, config key that splits its units, "units" when the key is
        # the units per job (a chunk size) or "jobs" when it is the jobs per series (a chunk count))
        self.chunk_keys = dict(chunk_keys or {})


def size_class(params_b: float | None) -> str:
    if params_b is None:
        return "undisclosed (API)"
    return next(name for limit, name in SIZE_CLASSES if params_b <= limit)


def _gpu(spec) -> bool:
    return spec.backend in ("vllm", "transformers") and int(spec.gpus or 0) > 0


def summarize(studies: dict[str, list], registry: dict, throughput: Throughput | None = None,
              job_minutes: float = 240.0, budget_fraction: float = 0.5, jobs_per_load: int = 1) -> dict[str, Any]:
    """Everything ``format_report`` prints, JSON-able. ``studies``: study key -> its Work list.

    GPU-seconds of a local GPU model = backend prompt / prefill rate + backend completion /
    decode rate, over the tensor-parallel efficiency, plus one load per job it works in (times
    its GPUs). API models get tokens only; CPU models no GPU time. A job's wall time is the sum
    over its local GPU models of load + GPU-seconds / GPUs (the models of a job take turns); its
    API calls add nothing: a job that overlaps them with its GPU work (lic_rag's simulate) takes
    about max(GPU, API), the GPU figure where the API's is smaller (docs/scaling.md).

    ``jobs_per_load``: consecutive jobs of one kind and model that share one loaded engine on a
    node (config model_server.mode: node, convrag.llm.node): the GPU-hours count ceil(jobs / it)
    loads per (study, kind, model) instead of one per job. A job's minutes keep one whole load
    (the first job on a node pays it), so the time-limit check never counts on the sharing.
    """
    if int(jobs_per_load) < 1:
        raise ConfigError(f"estimate: jobs_per_load must be >= 1, got {jobs_per_load}")
    tp = throughput or Throughput()
    notes = [f"{s}: {n}" for s, w in studies.items() for n in getattr(w, "notes", [])]
    specs: dict[str, Any] = {}
    tok = defaultdict(Tokens)  # (study, model, role, scenario)
    job_tok = defaultdict(Tokens)  # (study, kind, job, model, scenario)
    jobs: dict[tuple[str, str, str], dict] = {}  # (study, kind, job) -> units, series, models
    for key, work in studies.items():
        for w in work:
            if w.model not in specs:
                if w.model not in registry:
                    raise ConfigError(f"estimate: {key}: model '{w.model}' is not in the model registry")
                specs[w.model] = registry[w.model]
            tok[(key, w.model, w.role, w.scenario)].add(w.tokens)
            job_tok[(key, w.kind, w.job, w.model, w.scenario)].add(w.tokens)
            j = jobs.setdefault((key, w.kind, w.job), {"units": w.units, "series": w.series, "models": set()})
            j["models"].add(w.model)

    gpu_models = {m for m, s in specs.items() if _gpu(s) and s.params_b is not None}
    notes += [f"{m}: params_b is not set in the registry: no GPU time" for m, s in specs.items()
              if _gpu(s) and s.params_b is None]
    local = gpu_models.__contains__

    def gpu_s(m, t: Tokens) -> float:
        s = specs[m]
        return tp.gpu_seconds(t.backend_prompt_tokens, t.backend_completion_tokens, s.params_b, s.gpu_model, s.gpus)

    def load_s(m) -> float:
        return tp.load_seconds(specs[m].params_b)

    per_kind = Counter((key, kind, m) for (key, kind, _), j in jobs.items() for m in j["models"])
    loads = Counter()
    for (key, _, m), n in per_kind.items():
        loads[(key, m)] += math.ceil(n / int(jobs_per_load))
    # GPU-seconds per (study, model, scenario): compute plus loads
    gs: dict[tuple[str, str, str], float] = {}
    for (key, m, role, sc), t in tok.items():
        if local(m):
            gs[(key, m, sc)] = gs.get((key, m, sc), loads[(key, m)] * load_s(m) * specs[m].gpus) + gpu_s(m, t)

    def hours(pred) -> dict[str, float | None]:
        got = {sc: [v for (k, m, s), v in gs.items() if s == sc and pred(k, m)] for sc in SCENARIOS}
        return {sc: (round(sum(v) / 3600.0, 3) if v else None) for sc, v in got.items()}

    def sum_tok(pred) -> dict[str, dict]:
        out = {sc: Tokens() for sc in SCENARIOS}
        for (k, m, r, sc), t in tok.items():
            if pred(k, m, r):
                out[sc].add(t)
        return {sc: t.to_dict(0) for sc, t in out.items()}

    models = []
    for m, s in specs.items():
        kind = "gpu" if _gpu(s) else ("api" if s.backend == "openai" else "cpu")
        models.append({
            "model": m, "backend": s.backend, "params_b": s.params_b, "size_class": size_class(s.params_b),
            "kind": kind, "gpus": int(s.gpus or 0) if kind == "gpu" else 0,
            "gpu_model": s.gpu_model if kind == "gpu" else None,
            "roles": sorted({r for (_, mm, r, _) in tok if mm == m}),
            "jobs": sum(1 for j in jobs.values() if m in j["models"]),
            "tokens": sum_tok(lambda k, mm, r, m=m: mm == m),
            "gpu_hours": hours(lambda k, mm, m=m: mm == m),
        })
    by_role = [{"study": k, "role": r, "tokens": sum_tok(lambda kk, m, rr, k=k, r=r: (kk, rr) == (k, r))}
               for k, r in sorted({(k, r) for (k, _, r, _) in tok})]
    per_study = [{"study": k, "jobs": dict(Counter(kind for (kk, kind, _) in jobs if kk == k)),
                  "facts": getattr(studies[k], "facts", {}), "tokens": sum_tok(lambda kk, m, r, k=k: kk == k),
                  "gpu_hours": hours(lambda kk, m, k=k: kk == k)} for k in studies]
    classes = defaultdict(list)
    for row in models:
        if row["kind"] == "gpu" and row["params_b"] is not None:
            classes[row["size_class"]].append(row["model"])
    order = [name for _, name in SIZE_CLASSES]
    size_classes = [{"size_class": c, "models": ms, "gpu_hours": hours(lambda k, m, ms=ms: m in ms)}
                    for c, ms in sorted(classes.items(), key=lambda kv: order.index(kv[0]))]
    layout = _layout(jobs, job_tok, specs, local, gpu_s, load_s, job_minutes * 60.0 * budget_fraction)
    keys = {(k, kind): v for k, w in studies.items() for kind, v in getattr(w, "chunk_keys", {}).items()}
    for c in layout["chunking"]:
        rule, key, what = keys.get((c["study"], c["kind"]), (None, None, None))
        c.update(rule=rule, config_key=key,
                 config_value=(c["units_per_job_recommended"] if what == "units" else
                               c["jobs_per_series_recommended"] if what == "jobs" else None))
        if what == "jobs":  # one count for every series (cross.score_chunks): each gets that many jobs
            c["jobs_recommended"] = c["series"] * c["jobs_per_series_recommended"]
    over = over_limit(layout, job_minutes, keys, budget_fraction)
    notes += [f"{c['study']}: even one unit per {c['kind']} job takes more than {budget_fraction:.0%} of "
              f"{job_minutes:.0f} minutes in the 'long' scenario" for c in layout["chunking"] if not c["fits"]]
    return {
        "studies": per_study, "models": models, "roles": by_role, "size_classes": size_classes,
        "totals": {"tokens": sum_tok(lambda k, m, r: True), "gpu_hours": hours(lambda k, m: True)},
        "layout": {"job_minutes": job_minutes, "budget_fraction": budget_fraction, "jobs_per_load": int(jobs_per_load),
                   **layout},
        "over_limit": over,
        "assumptions": {**asdict(tp), "peak_bf16_tflops": PEAK_BF16_TFLOPS},
        "notes": notes,
    }


def _layout(jobs, job_tok, specs, local, gpu_s, load_s, budget_s: float) -> dict[str, Any]:
    """Minutes of every job, grouped by (study, kind, local GPU models), and the units per job
    (the study's chunk size) whose fullest job stays within ``budget_s`` in the long scenario.
    A job's time is its loads plus its work per unit times its units, so at most
    min over jobs of (budget - loads) / (work per unit) units fit; the advice is the largest
    balanced chunk (ceil(n / k) for a series of n units) within that. Fewer, fuller jobs pay
    fewer model loads and give the engine bigger batches."""
    rows: dict[tuple, dict] = {}
    limits_by_kind: dict[tuple[str, str], list] = {}
    for (key, kind, job), j in jobs.items():
        gpu_models = sorted(m for m in j["models"] if local(m))
        load = sum(load_s(m) for m in gpu_models)
        wall = {sc: load + sum(gpu_s(m, job_tok.get((key, kind, job, m, sc), Tokens())) / specs[m].gpus
                               for m in gpu_models) for sc in SCENARIOS}
        row = rows.setdefault((key, kind, tuple(gpu_models)), {
            "study": key, "kind": kind, "models": "+".join(gpu_models) or "-",
            "gpus": "+".join(f"{specs[m].gpu_model or 'any'}:{specs[m].gpus}" for m in gpu_models) or "-",
            "jobs": 0, "max_minutes": {sc: 0.0 for sc in SCENARIOS}, "units_max": 0.0, "_per_unit": 0.0,
            "_load": load})
        row["jobs"] += 1
        row["units_max"] = max(row["units_max"], j["units"])
        for sc in SCENARIOS:
            row["max_minutes"][sc] = round(max(row["max_minutes"][sc], wall[sc] / 60.0), 2)
        if gpu_models and j["units"] > 0:
            per_unit = (wall["long"] - load) / j["units"]
            row["_per_unit"] = max(row["_per_unit"], per_unit)
            limit = (budget_s - load) / per_unit if per_unit > 0 else math.inf
            limits_by_kind.setdefault((key, kind), []).append(limit)
    chunking = []
    for (key, kind), limits in limits_by_kind.items():
        totals = defaultdict(float)
        for (k, kd, _), j in jobs.items():
            if (k, kd) == (key, kind):
                totals[j["series"]] += j["units"]
        fit = min(limits)
        units = max((math.ceil(t / k) for t in {int(math.ceil(v)) for v in totals.values()} for k in range(1, t + 1)
                     if math.ceil(t / k) <= fit), default=1)
        now = max(j["units"] for (k, kd, _), j in jobs.items() if (k, kd) == (key, kind))
        chunking.append({"study": key, "kind": kind, "units_per_job_now": now, "units_per_job_recommended": units,
                         "jobs_now": sum(1 for (k, kd, _) in jobs if (k, kd) == (key, kind)),
                         "jobs_recommended": sum(math.ceil(t / units) for t in totals.values()),
                         "jobs_per_series_recommended": max(math.ceil(t / units) for t in totals.values()),
                         "series": len(totals),
                         "fits": fit >= 1})
        for (k, kd, _), row in rows.items():
            if (k, kd) == (key, kind) and row["_per_unit"]:
                row["minutes_recommended_long"] = round((row["_load"] + units * row["_per_unit"]) / 60.0, 2)
    out = []
    for row in rows.values():
        row = {k: v for k, v in row.items() if not k.startswith("_")}
        if row["models"] == "-":
            row["max_minutes"] = {sc: None for sc in SCENARIOS}
        out.append(row)
    return {"rows": out, "chunking": chunking}


def over_limit(layout: dict, job_minutes: float, keys: dict | None = None,
               budget_fraction: float = 0.5) -> list[str]:
    """One message per (study, kind, local GPU models) row whose fullest job runs past
    ``job_minutes`` in the 'long' scenario: the Snakemake rule, the config key that splits its work
    and the recommended value (the chunking advice), or that no key splits it."""
    keys = keys or {}
    advice = {(c["study"], c["kind"]): c for c in layout["chunking"]}
    out = []
    for r in layout["rows"]:
        long = (r["max_minutes"] or {}).get("long")
        if long is None or long <= job_minutes:
            continue
        c = advice.get((r["study"], r["kind"]), {})
        rule, key, _ = keys.get((r["study"], r["kind"]), (f"{r['study']}_{r['kind']}", None, None))
        head = (f"rule {rule} ({r['study']} {r['kind']} jobs on {r['models']}): the fullest job takes "
                f"{long:.0f} minutes in the 'long' scenario, over the {job_minutes:.0f}-minute limit")
        if key and c.get("config_value") is not None:
            out.append(f"{head}: set {key} to {c['config_value']} (now {c['units_per_job_now']:.0f} units per job; "
                       f"{c['units_per_job_recommended']} units per job keep it within "
                       f"{budget_fraction:.0%} of the limit"
                       + ("" if c.get("fits") else ", or as close as one unit per job gets") + ")")
        else:
            out.append(f"{head}: no config key splits its work (its study sizes it as one unit)")
    return out


# ---- presentation ---------------------------------------------------------------------


def _n(x: float | None) -> str:
    if x is None:
        return "-"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f}{suffix}"
    return f"{x:.0f}"


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def format_report(s: dict[str, Any]) -> str:
    """Plain-text tables (GitHub markdown) of a ``summarize`` result."""
    from tabulate import tabulate

    def table(rows, headers):
        return tabulate(rows, headers=headers, tablefmt="github")

    def tok_cols(t):
        return [_n(t["measured"]["requests"]), _n(t["measured"]["prompt_tokens"]),
                _n(t["measured"]["completion_tokens"]), _n(t["long"]["prompt_tokens"]),
                _n(t["long"]["completion_tokens"])]

    tok_heads = ["LLM calls", "prompt tok", "completion tok", "prompt tok (long)", "completion tok (long)"]
    lines = ["Per study. 'measured': measured tokens per call, capped at max_tokens; 'long': every reply at its "
             "max_tokens."]
    for st in s["studies"]:
        lines.append(f"  {st['study']}: " + (", ".join(f"{n:,} {k} jobs" for k, n in st["jobs"].items())
                                              or "no model jobs"))
        lines += [f"    {k}: {v}" for k, v in st["facts"].items()]
    lines.append(table([[st["study"], sum(st["jobs"].values()), *tok_cols(st["tokens"]),
                         _h(st["gpu_hours"]["measured"]), _h(st["gpu_hours"]["long"])] for st in s["studies"]]
                       + [["TOTAL", "", *tok_cols(s["totals"]["tokens"]), _h(s["totals"]["gpu_hours"]["measured"]),
                           _h(s["totals"]["gpu_hours"]["long"])]],
                       ["study", "jobs", *tok_heads, "GPU-h", "GPU-h (long)"]))
    lines += ["", "Per model (all studies):"]
    lines.append(table([[m["model"], "+".join(m["roles"]), "-" if m["params_b"] is None else m["params_b"],
                         f"{m['gpu_model'] or 'any'} x{m['gpus']}" if m["kind"] == "gpu" else m["kind"].upper(),
                         f"{m['jobs']:,}", *tok_cols(m["tokens"]), _h(m["gpu_hours"]["measured"]),
                         _h(m["gpu_hours"]["long"])] for m in s["models"]],
                       ["model", "roles", "params_b", "GPUs/job", "jobs", *tok_heads, "GPU-h",
                        "GPU-h (long)"]))
    lines += ["", "Per study and role:"]
    lines.append(table([[r["study"], r["role"], *tok_cols(r["tokens"])] for r in s["roles"]],
                       ["study", "role", *tok_heads]))
    lines += ["", "GPU-hours per model size:"]
    lines.append(table([[c["size_class"], ", ".join(c["models"]), _h(c["gpu_hours"]["measured"]),
                         _h(c["gpu_hours"]["long"])] for c in s["size_classes"]],
                       ["size", "models", "GPU-h", "GPU-h (long)"]))
    lay = s["layout"]
    lines += ["", f"SLURM layout: minutes of the fullest job (loads + all its work on local GPU models) against a "
              f"{lay['job_minutes']:.0f}-minute limit; the recommended units per job (the study's chunk size) keep "
              f"it within {lay['budget_fraction']:.0%} of the limit in the 'long' scenario."]
    lines.append(table([[r["study"], r["kind"], r["models"], r["gpus"], f"{r['jobs']:,}", _n(r["units_max"] or None),
                         _h(r["max_minutes"]["measured"]), _h(r["max_minutes"]["long"]),
                         _h(r.get("minutes_recommended_long"))] for r in lay["rows"]],
                       ["study", "kind", "local GPU models", "--gpus", "jobs", "units/job", "min/job",
                        "min/job (long)", "min/job (long, recommended)"]))
    if lay["chunking"]:
        lines.append(table([[c["study"], c["kind"], _n(c["units_per_job_now"]), c["units_per_job_recommended"],
                             f"{c['jobs_now']:,}", f"{c['jobs_recommended']:,}"] for c in lay["chunking"]],
                           ["study", "kind", "units/job now", "units/job recommended", "jobs now",
                            "jobs (recommended)"]))
    if s.get("over_limit"):
        lines += ["", "OVER THE TIME LIMIT ('long' scenario):"] + [f"  - {m}" for m in s["over_limit"]]
    a = s["assumptions"]
    lines += ["", "Assumptions (docs/scaling.md): tokens/s per GPU = efficiency x peak bf16 FLOP/s / (2 x params); "
              f"prefill efficiency {a['prefill_mfu']}, decode {a['decode_mfu']}; tensor-parallel efficiency "
              f"{a['tp_efficiency']}; "
              + ("one load per job and local model" if lay.get("jobs_per_load", 1) == 1 else
                 f"one load per {lay['jobs_per_load']} consecutive jobs of a kind and local model in the GPU-hours "
                 "(--jobs-per-load; model_server: node), one in every job's minutes")
              + f", {a['load_fixed_s']:.0f} s + bf16 weights at {a['load_gb_per_s']} GB/s; cold LLM cache; API models: "
              "tokens only."]
    if s["notes"]:
        lines += ["", "Notes:"] + [f"  - {n}" for n in s["notes"]]
    return "\n".join(lines)
