"""worse_labels: *Better Retrievers, Worse Labels: How Incomplete Relevance Judgments Distort
Abstention Evaluation in Conversational RAG*.

Is "no gold document in the top k" a good label for "this context cannot answer the turn"? Per
benchmark slice (RECOR in the main analyses, MTRAG in the replication): a retriever ladder
(BM25-turn and BM25-hist exactly as the RETECO baselines score, Fusion over LLM query expansions,
Hybrid with a dense retriever), the top-k contexts each rung makes per turn, readers that answer
every context with an ANSWERABLE / UNANSWERABLE status line and p(answerable), content judges
(yes / partial / no with supporting documents), a panel of small judges, a blind audit and an
answer-correctness judge; then the paper's analyses (Figures 2 and 3, Tables 1-3 and the
sections' numbers), over any benchmark of TurnTasks with qrels (the mini world rendered as a
RECOR-like benchmark offline, whose planted unjudged answers give a ground-truth labeller).

Modules: ``plan`` (the grid), ``paths``, ``wiring`` (rule-file helpers), ``ladder`` (expansions,
min-max fusion, weight fitting), ``contexts`` (contexts, qrels labels, copies, evidence classes),
``readers``, ``judges`` (content, correctness, audit), ``label_quality`` and ``abstention`` (the
analyses), ``corrected`` (judge-corrected shares), ``targets``, ``cli`` (``convrag worse-labels
...``).
"""

from __future__ import annotations

from convrag.errors import ConfigError
from convrag.schema import check_names, unknown_name
from convrag.studies.base import Study


def _check_acyclic(ladder: dict, where: str) -> None:
    """A fuse rung may not reach itself through the rungs it fuses."""
    def visit(n, path):
        if n in path:
            raise ConfigError(f"{where}: fuse rungs form a cycle: {' -> '.join([*path, n])}")
        for c in ladder[n].get("rungs") or ():
            visit(c, [*path, n])

    for n in ladder:
        visit(n, [])


def _answer_judges(raw, where: str) -> list[dict]:
    """``judges.answer`` as a list of ``{model, max_tokens}``: a single mapping is one judge (none
    when its model is null), a list is every judge in order (the first is Table 2's). Idempotent."""
    items = [raw] if isinstance(raw, dict) else list(raw)
    out = []
    for i, a in enumerate(items):
        a = {"model": None, "max_tokens": 8, **a}
        if a["model"] is None:
            if isinstance(raw, dict):
                continue
            raise ConfigError(f"{where}[{i}].model: a listed answer judge needs a model (leave it out instead)")
        out.append(a)
    models = [a["model"] for a in out]
    if len(set(models)) != len(models):
        raise ConfigError(f"{where}: a model is listed twice ({models})")
    return out


class WorseLabels(Study):
    key = "worse_labels"
    title = ("Better Retrievers, Worse Labels: How Incomplete Relevance Judgments Distort Abstention "
             "Evaluation in Conversational RAG")

    def check(self, config, registry, source):
        from convrag.metrics.registry import check_metric_names

        w = config["worse_labels"]
        key = "worse_labels"
        w["slices"] = {k: v for k, v in w["slices"].items() if v is not None}  # null: removed by an overlay
        for v in w["slices"].values():
            v["ladder"] = {k: r for k, r in v["ladder"].items() if r is not None}
        if not w["slices"]:
            raise ConfigError(f"{source}: {key}.slices: no slice left (every slice is null)")
        for k in ("main", "replication"):
            if w[k] is not None and w[k] not in w["slices"]:
                raise unknown_name(source, f"{key}.{k}", w[k], w["slices"])
        hf = w.get("human_feedback")
        if hf is not None:
            if hf not in config["benchmarks"]:
                raise unknown_name(source, f"{key}.human_feedback", hf, config["benchmarks"])
            if config["benchmarks"][hf]["kind"] != "mtrag_conversations":
                raise ConfigError(f"{source}: {key}.human_feedback: benchmarks.{hf} is of kind "
                                  f"{config['benchmarks'][hf]['kind']}; the annotator feedback is MTRAG's "
                                  "conversations (kind mtrag_conversations)")
        check_metric_names([w["fit"]["measure"]], f"{key}.fit.measure", kind="retrieval")
        if abs(round(1 / w["fit"]["step"]) * w["fit"]["step"] - 1) > 1e-9:
            raise ConfigError(f"{source}: {key}.fit.step: 1 / step must be a whole number, got {w['fit']['step']}")
        for name, s in w["slices"].items():
            at = f"{key}.slices.{name}"
            for k in ("benchmark", "train"):
                if s[k] is not None and s[k] not in config["benchmarks"]:
                    raise unknown_name(source, f"{at}.{k}", s[k], config["benchmarks"])
            from convrag.studies.worse_labels.plan import domains

            if s["domains"] is not None:
                have = domains(config, s["benchmark"])
                for i, d in enumerate(s["domains"]):
                    if d not in have:
                        raise unknown_name(source, f"{at}.domains[{i}]", d, have)
            if s["train"]:

                missing = sorted(set(s["domains"] or domains(config, s["benchmark"])) - set(domains(config, s["train"])))
                if missing:
                    raise ConfigError(f"{source}: {at}.train: benchmarks.{s['train']} lacks the domain(s) "
                                      f"{', '.join(missing)} of benchmarks.{s['benchmark']} (train and eval share "
                                      "each domain's corpus and index)")
            ladder = list(s["ladder"])
            for i, (rung, r) in enumerate(s["ladder"].items()):
                rk = f"{at}.ladder.{rung}"
                if rung in ("gold", "none", "control"):
                    raise ConfigError(f"{source}: {rk}: '{rung}' names a context set of its own; rename the rung")
                need = {"query": ("retriever", "query"),
                        "expansion": ("retriever", "expansions", *(() if r.get("released") else ("model",))),
                        "fuse": ("rungs",)}[r["kind"]]
                for k in need:
                    if k not in r:
                        raise ConfigError(f"{source}: {rk}: a rung of kind {r['kind']} needs '{k}'")
                if r["kind"] == "query":
                    from convrag.studies.worse_labels.retrieve import check_query

                    check_query(r["query"], f"{source}: {rk}.query")
                if "retriever" in r and r["retriever"] not in config["retrievers"]:
                    raise unknown_name(source, f"{rk}.retriever", r["retriever"], config["retrievers"])
                if r["kind"] == "expansion" and "model" in r and r["model"] not in registry:
                    raise unknown_name(source, f"{rk}.model", r["model"], registry)
                rel = r.get("released")
                if rel is not None:
                    if r["kind"] != "expansion":
                        raise ConfigError(f"{source}: {rk}.released: only an expansion rung reads released expansions")
                    if (rel["path"] is None) == (rel["url"] is None):
                        raise ConfigError(f"{source}: {rk}.released: give exactly one of 'path' (a local file) "
                                          "and 'url' (a pinned download)")
                    if rel["url"] is not None and rel["sha256"] is None:
                        raise ConfigError(f"{source}: {rk}.released.sha256: a released-expansions URL must be "
                                          "pinned by its sha256")
                if r["kind"] == "fuse":  # any other rung (YAML writers may sort keys); cycles checked below
                    for j, c in enumerate(r["rungs"]):
                        if c == rung or c not in ladder:
                            raise ConfigError(f"{source}: {rk}.rungs[{j}]: '{c}' must be another rung of the "
                                              f"ladder (known: {', '.join(x for x in ladder if x != rung)})")
                n = len(r.get("expansions") or r.get("rungs") or [])
                if r.get("weights") is not None and (len(r["weights"]) != n or not any(r["weights"])):
                    raise ConfigError(f"{source}: {rk}.weights: need {n} non-negative weights, not all 0 "
                                      f"(got {r['weights']})")
            _check_acyclic(s["ladder"], f"{source}: {at}.ladder")
            if s["control"] is not None and s["control"] not in s["ladder"]:
                raise unknown_name(source, f"{at}.control", s["control"], s["ladder"])
            analysed = [r for r, x in s["ladder"].items() if not x.get("retrieval_only")]
            if not analysed:
                raise ConfigError(f"{source}: {at}.ladder: every rung is retrieval_only; the analyses need one rung "
                                  "whose contexts are read and labelled")
            for i, r in enumerate(s.get("compared") or []):
                if r not in analysed:
                    raise ConfigError(f"{source}: {at}.compared[{i}]: '{r}' is not an analysed rung of the ladder "
                                      f"(analysed: {', '.join(analysed)}; a retrieval_only rung is not read)")
        j = w["judges"]
        check_names(source, f"{key}.readers.models", w["readers"]["models"], registry)
        check_names(source, f"{key}.judges.content", j["content"], registry)
        check_names(source, f"{key}.judges.panel", j["panel"], registry)
        if not j["content"]:
            raise ConfigError(f"{source}: {key}.judges.content: name at least one content judge (the first is "
                              "the primary labeller)")
        if j["primary"] is not None and j["primary"] not in [*j["content"], *j["panel"], "world", "panel"]:
            raise unknown_name(source, f"{key}.judges.primary", j["primary"], [*j["content"], *j["panel"], "world"])
        j["answer"] = _answer_judges(j["answer"], f"{source}: {key}.judges.answer")
        for i, a in enumerate(j["answer"]):
            if a["model"] not in registry:
                raise unknown_name(source, f"{key}.judges.answer[{i}].model", a["model"], registry)
        if j["audit"]["model"] is not None and j["audit"]["model"] not in registry:
            raise unknown_name(source, f"{key}.judges.audit.model", j["audit"]["model"], registry)
        if j["audit"]["model"] and j["audit"]["strata"]:
            from convrag.studies.worse_labels.plan import sets

            known = sets(config, w["main"])
            for i, st in enumerate(j["audit"]["strata"]):
                if st["set"] not in known:
                    raise unknown_name(source, f"{key}.judges.audit.strata[{i}].set", st["set"], known)

    def artifacts(self, config, layout):
        from convrag.report.reproduction import reproduction_artifacts
        from convrag.studies.worse_labels import wiring

        arts = wiring.artifacts(config, layout)
        return {**arts, **reproduction_artifacts(self, layout, arts)}

    def context(self, config):
        from convrag.report.reproduction import benchmark_identity, retriever_identity
        from convrag.studies.worse_labels import wiring

        ctx = wiring.context(config)
        w = config["worse_labels"]
        main, rep = w["slices"][w["main"]], w["slices"].get(w["replication"]) if w["replication"] else None
        # what the run used, against what each published number requires (resources/published/worse_labels.yaml)
        ctx["reproduction"] = {
            "data": [benchmark_identity(config, main["benchmark"])],
            "replication_data": [benchmark_identity(config, rep["benchmark"])] if rep else [],
            "human_data": [benchmark_identity(config, w["human_feedback"])] if w.get("human_feedback") else [],
            "retrievers": sorted({retriever_identity(config, r["retriever"]) for r in main["ladder"].values()
                                  if "retriever" in r}),
            "readers": list(ctx["readers"]), "table3_reader": ctx["readers"][0] if ctx["readers"] else None,
            "judges": list(w["judges"]["content"]), "primary_labeller": ctx["primary"],
            "panel": list(w["judges"]["panel"]), "audit": ctx["audit"], "top_k": w["top_k"],
            "answer_judges": list(ctx["answer_judges"]), "auditor": w["judges"]["audit"]["model"],
            "expansions": wiring.expansions_used(config, w["main"])}
        return ctx

    def outputs(self, config, layout):
        """Reads, labels and correctness verdicts are final outputs: deleting one redoes its job
        from the LLM cache."""
        from convrag.studies.worse_labels import wiring

        return wiring.model_outputs(config, layout)

    def accounting_files(self, config, layout):
        from convrag.studies.worse_labels import wiring

        return wiring.accounting_files(config, layout)


STUDY = WorseLabels()
