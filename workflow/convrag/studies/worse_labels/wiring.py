"""What worse_labels' rule file asks of the config (inputs, outputs, arguments), as plain functions."""

from __future__ import annotations

import json

from convrag.cliargs import sampling_flag
from convrag.data.benchmarks import corpus_id
from convrag.data.gold import gold_files
from convrag.layout import Layout
from convrag.retrieval import graph_inputs
from convrag.studies.worse_labels import paths
from convrag.studies.worse_labels.plan import (analysed_rungs, answer_judges, content_judges, fitted_rungs,
                                               human_benchmark,
                                               human_judge, part_benchmark, parts, primary, readers, rung_jobs, sets,
                                               slice_domains, slices)


def _slice(config, s):
    return slices(config)[s]


def rung(config: dict, s: str, r: str) -> dict:
    return _slice(config, s)["ladder"][r]


def rung_names(config: dict, kinds: tuple[str, ...]) -> list[str]:
    """Rung names of the given kinds over every slice (the rule's wildcard constraint)."""
    return sorted({r for sp in slices(config).values() for r, x in sp["ladder"].items() if x["kind"] in kinds}) or ["-"]


def slice_names(config: dict) -> list[str]:
    return list(slices(config))


def all_domains(config: dict) -> list[str]:
    return sorted({d for s in slices(config) for d in slice_domains(config, s)})


def answerability_arg(config: dict, s: str) -> str:
    a = _slice(config, s)["answerability"]
    return "" if a is None else f"--answerability '{json.dumps(a)}'"


def index(config: dict, L: Layout, s: str, domain: str, retriever: str) -> str:
    """Train and eval turns of a slice search the same index: the eval benchmark's domain corpus."""
    return L.index_manifest(corpus_id(_slice(config, s)["benchmark"], domain), retriever)


def search_inputs(config: dict, L: Layout, prompts_dir: str, s: str, part: str, r: str, domain: str) -> dict:
    x = rung(config, s, r)
    ins = {"tasks": L.benchmark_tasks(part_benchmark(config, s, part)),
           "index": index(config, L, s, domain, x["retriever"]),
           "graph": graph_inputs(config, L, corpus_id(_slice(config, s)["benchmark"], domain), x["retriever"])}
    if x["kind"] == "expansion":
        ins["expand_prompts"] = f"{prompts_dir}/worse_labels/expand.yaml"
        if x.get("released"):
            ins["released"] = released_file(config, L, s, r)
    return ins


def released_file(config: dict, L: Layout, s: str, r: str) -> str | None:
    """An expansion rung's released expansions: the user's file, or where the download lands."""
    rel = rung(config, s, r).get("released")
    if not rel:
        return None
    return rel["path"] or paths.released(L, s, r, rel["format"])


def released_rungs(config: dict) -> list[dict]:
    """(slice, rung, url, sha256, format) of every rung whose released expansions are downloaded."""
    return [dict(slice=n, rung=r, **{k: x["released"][k] for k in ("url", "sha256", "format")})
            for n, sp in slices(config).items() for r, x in sp["ladder"].items()
            if x.get("released") and x["released"]["url"]]


def download_spec(config: dict, s: str, r: str) -> str:
    rel = rung(config, s, r)["released"]
    return json.dumps({"url": rel["url"], "sha256": rel["sha256"]})


def expansions_used(config: dict, s: str) -> str | list[str] | None:
    """What the slice's expansion rungs read, for the reproduction table: ``released`` or
    ``regenerated:<model>`` (one value when every expansion rung agrees; None without one)."""
    used = sorted({"released" if x.get("released") else f"regenerated:{x['model']}"
                   for x in _slice(config, s)["ladder"].values() if x["kind"] == "expansion"})
    return used[0] if len(used) == 1 else (used or None)


def search_args(config: dict, s: str, r: str, registry: str, cache: str) -> str:
    from convrag.retrieval import retriever_kind

    x = rung(config, s, r)
    args = [f"--retriever {retriever_kind(config, x['retriever'])}",
            f"--retriever-params '{json.dumps(config['retrievers'][x['retriever']].get('params') or {}, sort_keys=True)}'",
            f"--recall-k {config['worse_labels']['retrieval_k']}", answerability_arg(config, s)]
    if x["kind"] == "query":
        args.append(f"--query {x['query']}")
    else:
        args.append(f"--expansions {' '.join(x['expansions'])}")
        if x.get("released"):  # no model call: the released texts
            args.append(f"--released-format {x['released']['format']}")
        else:
            args.append(f"--model {x['model']} {sampling_flag(x)} --registry {registry} --cache {cache}")
    return " ".join(a for a in args if a)


def search_models(config: dict, s: str, r: str) -> list[str]:
    x = rung(config, s, r)
    return [x["model"]] if x["kind"] == "expansion" and not x.get("released") else []


def _component_inputs(config: dict, L: Layout, s: str, part: str, r: str, domains_: list[str]) -> dict:
    x = rung(config, s, r)
    if x["kind"] == "expansion":
        return {"components": [paths.components(L, s, part, r, d) for d in domains_]}
    return {"runs": [paths.run(L, s, part, c, d) for c in x["rungs"] for d in domains_]}


def _component_args(config: dict, L: Layout, s: str, part: str, r: str, domains_: list[str]) -> str:
    x = rung(config, s, r)
    if x["kind"] == "expansion":
        return "--components " + " ".join(paths.components(L, s, part, r, d) for d in domains_)
    runs = {c: [paths.run(L, s, part, c, d) for d in domains_] for c in x["rungs"]}
    return f"--runs '{json.dumps(runs)}'"


def fit_inputs(config: dict, L: Layout, s: str, r: str) -> dict:
    sp = _slice(config, s)
    if rung(config, s, r)["weights"] is not None or not sp["train"]:
        return {}
    return {**_component_inputs(config, L, s, "train", r, slice_domains(config, s)),
            "tasks": L.benchmark_tasks(sp["train"])}


def component_names(config: dict, s: str, r: str) -> list[str]:
    x = rung(config, s, r)
    return list(x["expansions"] if x["kind"] == "expansion" else x["rungs"])


def fit_args(config: dict, L: Layout, s: str, r: str) -> str:
    sp, x = _slice(config, s), rung(config, s, r)
    f = config["worse_labels"]["fit"]
    names = "--names " + " ".join(component_names(config, s, r))
    if x["weights"] is not None:
        return f"{names} --weights '{json.dumps(x['weights'])}'"
    if not sp["train"]:
        return names  # equal weights
    args = _component_args(config, L, s, "train", r, slice_domains(config, s))
    return (f"{args} --tasks {L.benchmark_tasks(sp['train'])} --domains {' '.join(slice_domains(config, s))}"
            f" {answerability_arg(config, s)} --step {f['step']}"
            f" --measure '{f['measure']}'")


def fuse_inputs(config: dict, L: Layout, s: str, part: str, r: str, domain: str) -> dict:
    return {**_component_inputs(config, L, s, part, r, [domain]), "weights": paths.weights(L, s, r)}


def fuse_args(config: dict, L: Layout, s: str, part: str, r: str, domain: str) -> str:
    return f"{_component_args(config, L, s, part, r, [domain])} --recall-k {config['worse_labels']['retrieval_k']}"


def eval_runs(config: dict, L: Layout, s: str) -> dict[str, list[str]]:
    sp = _slice(config, s)
    return {r: [paths.run(L, s, "eval", r, d) for d in slice_domains(config, s)] for r in sp["ladder"]}


def contexts_inputs(config: dict, L: Layout, s: str) -> dict:
    sp = _slice(config, s)
    return {"tasks": L.benchmark_tasks(sp["benchmark"]), "runs": [p for ps in eval_runs(config, L, s).values() for p in ps],
            "corpora": [L.corpus(corpus_id(sp["benchmark"], d)) for d in slice_domains(config, s)]}


def contexts_args(config: dict, L: Layout, s: str) -> str:
    sp = _slice(config, s)
    control = f"--control {sp['control']}" if sp["control"] else ""
    return (f"--runs '{json.dumps(eval_runs(config, L, s))}' --domains {' '.join(slice_domains(config, s))} --top-k {config['worse_labels']['top_k']} {control} "
            f"{answerability_arg(config, s)}")


def read_sets(config: dict, s: str) -> str:
    return " ".join(x for x in sets(config, s) if x != "control")


def label_sets(config: dict, s: str) -> str:
    return " ".join(x for x in sets(config, s) if x != "none")


def human_raw_names(config: dict) -> list[str]:
    """The raw files of the feedback benchmark that the human-feedback rule reads (its task inputs:
    conversations.json and the questions files, or the index tsv; no corpus)."""
    from convrag.data.benchmarks import benchmark_loader

    spec = config["benchmarks"][human_benchmark(config)]
    return list(benchmark_loader(spec["kind"]).task_inputs(spec))


def human_domains(config: dict) -> str:
    from convrag.studies.worse_labels.plan import domains

    return " ".join(domains(config, human_benchmark(config)))


def audited(config: dict) -> list[str]:
    w = config["worse_labels"]
    return [w["main"]] if w["judges"]["audit"]["model"] else []


def audit_models(config: dict) -> list[str]:
    m = config["worse_labels"]["judges"]["audit"]["model"]
    return [m] if m else []


def answer_models(config: dict) -> list[str]:
    return [a["model"] for a in answer_judges(config)]


def answer_args(config: dict) -> str:
    """The correctness job's judges: ``--judges '[{model, max_tokens}, ...]'``."""
    return f"--judges '{json.dumps(answer_judges(config))}'"


def audit_args(config: dict, registry: str, cache: str, prompts_dir: str) -> str:
    a = config["worse_labels"]["judges"]["audit"]
    strata = f"--strata '{json.dumps(a['strata'])}'" if a["strata"] else ""
    return (f"--model {a['model']} --registry {registry} --cache {cache} --prompts-dir {prompts_dir} --seed {a['seed']}"
            f" {sampling_flag(a)} {strata}")


# ---- what the Study returns -------------------------------------------------------------------


def model_outputs(config: dict, L: Layout, ext: str = "jsonl") -> list[str]:
    out = []
    for s in slice_names(config):
        out += [paths.reads(L, s, m, ext) for m in readers(config)]
        out += [paths.labels(L, s, j, ext) for j in content_judges(config)]
        if answer_judges(config):
            out += [paths.correctness(L, s, m, ext) for m in readers(config)]
    out += [paths.human_labels(L, human_judge(config), ext)] if human_judge(config) else []
    return out + [paths.audit(L, s, ext) for s in audited(config)]


def accounting_files(config: dict, L: Layout) -> list[str]:
    runs = [paths.run(L, j["slice"], j["part"], j["rung"], j["domain"], "accounting.json")
            for j in rung_jobs(config) if j["kind"] == "query"]
    runs += [paths.components(L, j["slice"], j["part"], j["rung"], j["domain"], "accounting.json")
             for j in rung_jobs(config) if j["kind"] == "expansion"]
    return runs + model_outputs(config, L, "accounting.json")


def artifacts(config: dict, L: Layout) -> dict:
    return {"contexts": [paths.contexts(L, s) for s in slice_names(config)],
            "labels": [paths.labels(L, s, j) for s in slice_names(config) for j in content_judges(config)],
            "reads": [paths.reads(L, s, m) for s in slice_names(config) for m in readers(config)] or None,
            "correctness": ([paths.correctness(L, s, m) for s in slice_names(config) for m in readers(config)]
                            if answer_judges(config) else None),
            # the answer judges compared: only with two or more (None drops answer_judges / judge_survival)
            "correctness_compared": ([paths.correctness(L, s, m) for s in slice_names(config) for m in readers(config)]
                                     if len(answer_judges(config)) > 1 else None),
            # optional inputs: an empty list, not None (None would drop every target that reads them)
            "audit": [paths.audit(L, s) for s in audited(config)],
            "weights": [paths.weights(L, j["slice"], j["rung"]) for j in fitted_rungs(config)],
            # MTRAG's annotator feedback: optional for false_miss_origin ([] when off), needed by mtrag_human
            "human_feedback": [paths.human(L)] if human_benchmark(config) else [],
            "human_labels": [paths.human_labels(L, human_judge(config))] if human_judge(config) else None,
            # the gold-in-corpus checks of the evaluated domains (their counts go into the captions)
            "gold": [p for s in slice_names(config)
                     for p in gold_files(config, L, slices(config)[s]["benchmark"], slice_domains(config, s))]}


def families(config: dict) -> dict[str, str]:
    """Each labeller's model family (the registry's ``family``, else its name's leading letters):
    the content judges, the panel members and the audit (its auditor's), for §6's "labellers
    from five model families"."""
    from convrag.schema import config_registry

    registry = config_registry(config)
    j = config["worse_labels"]["judges"]
    names = {m: m for m in content_judges(config)}
    if j["audit"]["model"]:
        names["audit"] = j["audit"]["model"]
    return {who: registry[m].model_family() for who, m in names.items() if m in registry}


def context(config: dict) -> dict:
    w = config["worse_labels"]
    j = w["judges"]
    # ladders: every rung (ladder_retrieval scores them all); ladder: the analysed ones
    return {"ladders": {s: list(sp["ladder"]) for s, sp in slices(config).items()},
            "ladder": {s: analysed_rungs(config, s) for s in slices(config)}, "main_slice": w["main"],
            "replication_slice": w["replication"], "primary": primary(config),
            "labellers": [*content_judges(config), *(["panel"] if j["panel"] else [])],
            "content_judges": list(j["content"]),   # the swap of §4.3: the first two
            "panel_members": j["panel"], "audit": bool(j["audit"]["model"]), "readers": readers(config),
            "boot": w["bootstrap"], "top_k": w["top_k"],
            "audit_strata": j["audit"]["strata"], "ppi": w["ppi"],
            "compared_rungs": {s: list(sp["compared"]) for s, sp in slices(config).items() if sp.get("compared")},
            "benchmarks": {s: sp["benchmark"] for s, sp in slices(config).items()},
            "families": families(config),
            "answer_judges": answer_models(config)}


__all__ = ["parts", "sets"]
