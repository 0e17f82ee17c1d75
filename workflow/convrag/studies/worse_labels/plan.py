"""The worse_labels grid, from the validated config block.

A *slice* is one benchmark audited the paper's way (RECOR in the paper's main analyses, MTRAG in
its replication, Table 3): its retriever *ladder* (ordered rungs), the contexts each rung's top k
makes per turn, plus three context sets the analyses need: ``gold`` (the turn's judged-relevant
documents: the paper's setting 2b), ``none`` (no documents) and ``control`` (another dialogue's
context of the control rung, same domain, the turn's own gold removed: the negative control).
Rung kinds: ``query`` (one retriever, one query per turn), ``expansion`` (BM25 over LLM query
expansions, min-max fused: the paper's Fusion) and ``fuse`` (min-max fusion of other rungs: the
paper's Hybrid). Fusion weights are fitted on the slice's ``train`` benchmark when it has one."""

from __future__ import annotations

SETS_EXTRA = ("gold", "none", "control")
PARTS = ("eval", "train")


def slices(config: dict) -> dict:
    return config["worse_labels"]["slices"]


def domains(config: dict, benchmark: str) -> list[str]:
    from convrag.data.benchmarks import benchmark_loader

    spec = config["benchmarks"][benchmark]
    return benchmark_loader(spec["kind"]).domains(spec)


def slice_domains(config: dict, slice_: str) -> list[str]:
    """The slice's domains: its ``domains`` list, else every domain of its benchmark."""
    s = slices(config)[slice_]
    return list(s.get("domains") or domains(config, s["benchmark"]))


def part_benchmark(config: dict, slice_: str, part: str) -> str | None:
    s = slices(config)[slice_]
    return s["benchmark"] if part == "eval" else s.get("train")


def parts(config: dict, slice_: str) -> list[str]:
    return ["eval"] + (["train"] if slices(config)[slice_].get("train") else [])


def needs_train(config: dict, slice_: str, rung: str) -> bool:
    """A rung runs on the train part when the slice has one and a fitted rung reads it: a fitted
    expansion rung its own components, a fitted fuse rung the rungs it fuses (recursively)."""
    s = slices(config)[slice_]
    if not s.get("train"):
        return False
    ladder, need = s["ladder"], set()
    todo = [n for n, r in ladder.items() if r["kind"] in ("expansion", "fuse") and r.get("weights") is None]
    while todo:
        n = todo.pop()
        if ladder[n]["kind"] == "expansion":
            need.add(n)
        elif ladder[n]["kind"] == "fuse":
            for c in ladder[n]["rungs"]:
                if c not in need:
                    need.add(c)
                    todo.append(c)
    return rung in need


def rung_jobs(config: dict) -> list[dict]:
    """Every (slice, part, domain, rung) retrieval job; the train part only where a fit needs it."""
    out = []
    for name, s in slices(config).items():
        for part in parts(config, name):
            bench = part_benchmark(config, name, part)
            for d in slice_domains(config, name):
                for rung, r in s["ladder"].items():
                    if part == "train" and not needs_train(config, name, rung):
                        continue
                    out.append(dict(slice=name, part=part, benchmark=bench, domain=d, rung=rung, kind=r["kind"]))
    return out


def fitted_rungs(config: dict) -> list[dict]:
    """(slice, rung) of every expansion / fuse rung: each gets a weights file (fitted or given)."""
    return [dict(slice=n, rung=r) for n, s in slices(config).items() for r, spec in s["ladder"].items()
            if spec["kind"] in ("expansion", "fuse")]


def content_judges(config: dict) -> list[str]:
    j = config["worse_labels"]["judges"]
    return list(dict.fromkeys([*j["content"], *j["panel"]]))


def answer_judges(config: dict) -> list[dict]:
    """The answer-correctness judges ``{model, max_tokens}`` in order (the first is Table 2's);
    ``judges.answer`` as the study's check leaves it (a list)."""
    a = config["worse_labels"]["judges"]["answer"]
    if isinstance(a, dict):  # a block not through the study's check: a single mapping
        return [a] if a.get("model") else []
    return list(a)


def readers(config: dict) -> list[str]:
    return config["worse_labels"]["readers"]["models"]


def primary(config: dict) -> str:
    j = config["worse_labels"]["judges"]
    return j["primary"] or j["content"][0]


def human_benchmark(config: dict) -> str | None:
    """The benchmark (kind mtrag_conversations) whose annotator feedback the study reads, or None."""
    return config["worse_labels"].get("human_feedback")


def human_judge(config: dict) -> str | None:
    """The content judge of MTRAG's single human-judged passages (section 4.2: the primary
    labeller): the primary when it is a content judge, else the first content judge; None when
    the study reads no feedback."""
    if not human_benchmark(config):
        return None
    p = config["worse_labels"]["judges"]["primary"]
    return p if p in content_judges(config) else config["worse_labels"]["judges"]["content"][0]


def analysed_rungs(config: dict, slice_: str) -> list[str]:
    """The rungs whose contexts are read, labelled and analysed, in ladder order: every rung but
    the ``retrieval_only`` ones (scored for nDCG and gold in the top k only)."""
    return [r for r, x in slices(config)[slice_]["ladder"].items() if not x.get("retrieval_only")]


def sets(config: dict, slice_: str) -> list[str]:
    """The context sets readers read and judges label: the analysed rungs, gold, none, control."""
    s = slices(config)[slice_]
    return [*analysed_rungs(config, slice_), "gold", "none", *(["control"] if s.get("control") else [])]


def context_sets(config: dict, slice_: str) -> list[str]:
    """Every context set the contexts stage builds: ``sets`` and the retrieval-only rungs."""
    s = slices(config)[slice_]
    return [*s["ladder"], "gold", "none", *(["control"] if s.get("control") else [])]


def model_jobs(config: dict) -> list[dict]:
    """Every model-calling job (for sizing): expansions, readers, content judges, answer judge, audit."""
    wl = config["worse_labels"]
    jobs = [dict(stage="expand", role="expander", model=slices(config)[j["slice"]]["ladder"][j["rung"]]["model"], **j)
            for j in rung_jobs(config) if j["kind"] == "expansion"
            and not slices(config)[j["slice"]]["ladder"][j["rung"]].get("released")]
    for name in slices(config):
        jobs += [dict(stage="read", role="reader", model=m, slice=name) for m in readers(config)]
        jobs += [dict(stage="label", role="judge", model=m, slice=name) for m in content_judges(config)]
        jobs += [dict(stage="correctness", role="judge", model=a["model"], slice=name, reader=m)
                 for m in readers(config) for a in answer_judges(config)]
        if wl["judges"]["audit"]["model"]:
            jobs.append(dict(stage="audit", role="judge", model=wl["judges"]["audit"]["model"], slice=name))
    if human_judge(config):
        jobs.append(dict(stage="label_human", role="judge", model=human_judge(config), benchmark=human_benchmark(config)))
    return jobs
