"""``convrag worse-labels <stage>``: the study's own stages (one per rule)."""

from __future__ import annotations

from convrag.cliargs import fill_help, json_arg, sampling_arg
from convrag.llm.types import Sampling


def _tasks(path, domain=None, answerability=None):
    from convrag.records import TurnTask, read_records
    from convrag.studies.worse_labels.contexts import select_tasks

    tasks = select_tasks(read_records(path, TurnTask), answerability)
    return [t for t in tasks if domain is None or t.labels.get("domain") == domain]


def _retriever(a):
    from convrag.retrieval import load_retriever

    return load_retriever(a.retriever, a.index_dir, a.retriever_params)


def cmd_retrieve(a):
    """A query rung: one query per turn (its mode), one batched search."""
    from convrag.rag.jobs import Job
    from convrag.rag.retrieve import write_run
    from convrag.studies.worse_labels.retrieve import query_texts, search

    with Job(threads=a.threads) as job:
        tasks = _tasks(a.tasks, a.domain, a.answerability)
        run, records = search(_retriever(a), tasks, query_texts(tasks, a.query), a.recall_k)
        job.write({a.out_queries: records}, a.accounting,
                  first=[(a.out_run, lambda p: write_run(p, run, tag=f"{a.rung}-{a.query}"))],
                  tasks=len(tasks), empty_rankings=sum(r["hits"] == 0 for r in records))


def cmd_expand(a):
    """An expansion rung's components: the expansions of every turn, each expansion kind's queries
    searched by the rung's retriever. ``--released FILE``: the paper's released expansions
    (``released.py``; no model call); otherwise the LLM regenerates them (one batched call)."""
    from convrag.errors import ConfigError
    from convrag.io import write_json
    from convrag.rag.jobs import Job
    from convrag.studies.worse_labels import ladder
    from convrag.studies.worse_labels.retrieve import search

    if a.released is None and not (a.model and a.registry and a.cache):
        raise ConfigError("worse-labels expand: give --released FILE, or --model, --registry and --cache to regenerate")
    with Job(a.registry, a.cache, a.threads) as job:
        tasks = _tasks(a.tasks, a.domain, a.answerability)
        if a.released is not None:
            from convrag.studies.worse_labels.released import read_released, released_records

            records = released_records(tasks, read_released(a.released, a.released_format), a.expansions,
                                       where=a.released)
        else:
            engine = job.engine(a.model, role="expander")
            records = [{**r, "source": f"regenerated:{a.model}"} for r in
                       ladder.expand(tasks, engine, ladder.load_prompts(a.prompts), kinds=a.expansions,
                                     sampling=Sampling.from_config(a.sampling))]
        retriever = _retriever(a)
        by = {(r["task_id"], r["kind"]): r["query"] for r in records}
        components = {kind: search(retriever, tasks, [by[(t.task_id, kind)] for t in tasks], a.recall_k)[0]
                      for kind in a.expansions}
        job.write({a.out_expansions: records}, a.accounting,
                  first=[(a.out_components, lambda p: write_json(p, components))],
                  tasks=len(tasks), fallbacks=sum(bool(r["fallback"]) for r in records),
                  expansions="released" if a.released is not None else f"regenerated:{a.model}")


def _component_runs(components: list[str], runs: dict, names: list[str] | None = None) -> tuple[list[str], list[dict]]:
    """Component names and their runs, every domain merged: an expansion rung's components files,
    or a fuse rung's runs ({rung: [trec paths]})."""
    from convrag.io import read_json
    from convrag.metrics.retrieval import read_trec_run

    if components:
        parts = [read_json(p) for p in components]
        names = names or list(parts[0])
        return names, [{q: h for p in parts for q, h in p[n].items()} for n in names]
    names = names or list(runs)
    return names, [{q: h for p in runs[n] for q, h in read_trec_run(p).items()} for n in names]


def cmd_fit(a):
    """The fusion weights of one rung: given, fitted on the train turns (grid over the simplex), or
    equal when the slice has no train benchmark."""
    from convrag.io import write_json
    from convrag.studies.worse_labels import ladder

    if a.weights is not None:
        out, names = {"weights": a.weights, "source": "given"}, a.names
    elif not a.tasks:
        out, names = {"weights": [1.0 / len(a.names)] * len(a.names), "source": "equal (no train benchmark)"}, a.names
    else:
        names, runs = _component_runs(a.components, a.runs)
        tasks = [t for t in _tasks(a.tasks, None, a.answerability) if t.labels.get("domain") in a.domains]
        fit = ladder.fit_weights(runs, {t.task_id: t.gold_docs for t in tasks}, step=a.step, measure=a.measure)
        out = {**fit, "source": f"fitted on {len(tasks)} train turns"}
    write_json(a.out, {**out, "components": list(names)})


def cmd_fuse(a):
    """An expansion or fuse rung's run: its components min-max fused with the rung's weights."""
    from convrag.io import read_json, write_json
    from convrag.rag.jobs import write_outputs
    from convrag.rag.retrieve import write_run
    from convrag.studies.worse_labels import ladder

    w = read_json(a.weights)
    names, runs = _component_runs(a.components, a.runs, w["components"])
    fused = ladder.fuse(runs, w["weights"], a.recall_k)
    acc = {"job": {"tasks": len(fused), "weights": w["weights"], "weights_source": w["source"]}}
    write_outputs([(a.out_run, lambda p: write_run(p, fused, tag=a.rung)), (a.accounting, lambda p: write_json(p, acc))])


def cmd_contexts(a):
    from convrag.io import write_jsonl, write_parquet
    from convrag.metrics.retrieval import read_trec_run
    from convrag.rag.jobs import write_outputs
    from convrag.records import Passage, read_records
    from convrag.studies.worse_labels.contexts import build_contexts

    tasks = [t for t in _tasks(a.tasks, None, a.answerability) if t.labels.get("domain") in a.domains]
    runs = {rung: {q: h for p in paths for q, h in read_trec_run(p).items()} for rung, paths in a.runs.items()}
    texts = {p.doc_id: (f"{p.title}\n{p.text}" if p.title else p.text) for c in a.corpora
             for p in read_records(c, Passage)}
    df, items = build_contexts(a.slice, tasks, runs, texts, a.top_k, a.control)
    write_outputs([(a.items, lambda p: write_jsonl(p, items)), (a.out, lambda p: write_parquet(df, p))])


def _items(path, sets):
    from convrag.io import read_jsonl

    return [it for it in read_jsonl(path) if it["set"] in sets]


def cmd_read(a):
    """One reader over every context of the slice (retrieval rungs, gold, none): status line,
    answer and p(answerable), one batched call."""
    from convrag.rag.jobs import Job
    from convrag.studies.worse_labels import readers

    with Job(a.registry, a.cache, a.threads) as job:
        items = [{**it, "item_id": it["context_id"]} for it in _items(a.items, a.sets)]
        engine = job.engine(a.model, role="reader")
        recs = readers.read(items, engine, readers.load_reader_prompts(a.prompts_dir), Sampling.from_config(a.sampling),
                            label_mode=a.label_mode)
        job.write({a.out: [{**r, "reader": a.model} for r in recs]}, a.accounting,
                  contexts=len(items), no_status=sum(r["status"] is None for r in recs))


def _run_judge(a, which, items, run):
    """One judge over ``items`` in one batched call: verdicts (unparsed replies recorded and
    counted) and accounting, all or nothing."""
    from convrag.llm.judge import summary
    from convrag.rag.jobs import Job
    from convrag.studies.worse_labels import judges

    with Job(a.registry, a.cache, a.threads) as job:
        prompts = judges.load_prompts(a.prompts_dir, which=(which,))[which]
        verdicts = run(items, job.engine(a.model, role="judge"), prompts)
        job.write({a.out: [{**v, "judge_model": a.model} for v in verdicts]}, a.accounting, **summary(verdicts))


def cmd_label(a):
    """One content judge over the slice's contexts (rungs, gold, control): yes / partial / no with
    the supporting documents."""
    from convrag.studies.worse_labels import judges

    items = [{**it, "item_id": it["context_id"]} for it in _items(a.items, a.sets)]
    _run_judge(a, "content", items,
               lambda its, eng, pr: judges.judge_content(its, eng, pr, sampling=Sampling.from_config(a.sampling)))


def cmd_correctness(a):
    """Every answer judge over one reader's responses (correctness 1-5 against the reference; a
    response without ANSWERABLE status is not asked), each judge in one batched, cached call, in
    ``--judges`` order; one file with every judge's verdicts (``judge_model``), each judge's
    accounting under its own role (``judge:<model>``). All or nothing."""
    from convrag.errors import ConfigError
    from convrag.io import read_jsonl
    from convrag.llm.judge import run_judge, summary
    from convrag.rag.jobs import Job
    from convrag.studies.worse_labels import judges

    if not a.judges or any(not isinstance(j, dict) or not j.get("model") for j in a.judges):
        raise ConfigError(f"worse-labels correctness: --judges must list {{model, max_tokens}} mappings, got {a.judges!r}")
    ref = {it["context_id"]: it for it in read_jsonl(a.items)}
    items = [{"item_id": r["item_id"], "question": ref[r["item_id"]]["question"],
              "reference": ref[r["item_id"]]["reference"], "answer": r.get("answer") or "",
              "status": r["status"]} for r in read_jsonl(a.reads)]
    with Job(a.registry, a.cache, a.threads) as job:
        prompts = judges.load_prompts(a.prompts_dir, which=("correctness",))["correctness"]
        out, counts = [], {}
        for j in a.judges:
            engine = job.engine(j["model"], role=f"judge:{j['model']}")
            verdicts = run_judge(judges.CORRECTNESS, items, engine, prompts, max_tokens=j.get("max_tokens"),
                                 desc=f"correctness ({j['model']})")
            out += [{**v, "judge_model": j["model"]} for v in verdicts]
            counts[j["model"]] = summary(verdicts)
        job.write({a.out: out}, a.accounting, judges=counts)


def cmd_audit(a):
    """The blind audit: a stratified, shuffled sample of the main slice's contexts, ids and
    retrievers hidden, labelled by two procedures (holistic, claim by claim; each sees the
    reference answer) and adjudicated by a third run where they differ."""
    import pandas as pd

    from convrag.rag.jobs import Job
    from convrag.studies.worse_labels import judges

    with Job(a.registry, a.cache, a.threads) as job:
        contexts = pd.read_parquet(a.contexts)
        sample = judges.audit_sample(contexts, a.strata or judges.AUDIT_STRATA_PAPER, a.seed)
        by_id = {it["context_id"]: it for it in _items(a.items, set(sample["set"]))}
        items = [{"audit_id": row.audit_id, "item_id": row.audit_id, "context_id": row.context_id,
                  **{k: by_id[row.context_id].get(k) for k in ("question", "history", "reference", "passages")}}
                 for row in sample.itertuples()]
        engine = job.engine(a.model, role="auditor")
        prompts = judges.load_prompts(a.prompts_dir, which=("audit",))["audit"]
        recs = judges.run_audit(items, engine, prompts, sampling=Sampling.from_config(a.sampling))
        ids = {it["audit_id"]: it["context_id"] for it in items}
        job.write({a.out: [{**r, "context_id": ids[r["audit_id"]], "auditor": a.model} for r in recs]},
                  a.accounting, contexts=len(items), strata=sample.attrs.get("strata", []),
                  disagreements=sum(not r["agree"] for r in recs))


def cmd_human_feedback(a):
    """MTRAG's annotator feedback (one row per passage shown) and the single-passage items of the
    passages the annotators judged, from a benchmark's raw files (``--files``: conversations.json
    and the retrieval tasks' questions files, or a conversation_index_to_id.tsv, as the
    mtrag_conversations benchmark kind names them)."""
    from convrag.errors import ConfigError
    from convrag.io import write_jsonl, write_parquet
    from convrag.rag.jobs import write_outputs
    from convrag.studies.worse_labels.followups import human_passages

    files = dict(a.files or {})
    if "conversations.json" not in files:
        raise ConfigError(f"worse-labels human-feedback: --files lacks conversations.json (got {sorted(files)})")
    qs = {n[: -len("_questions.jsonl")]: p for n, p in files.items() if n.endswith("_questions.jsonl")}
    fb, items = human_passages(files["conversations.json"], qs or None, files.get("conversation_index_to_id.tsv"),
                               a.domains)
    write_outputs([(a.items, lambda p: write_jsonl(p, items)), (a.out, lambda p: write_parquet(fb, p))])


def _common(s, model=True):
    if model:
        for k in ("model", "registry", "cache"):
            s.add_argument(f"--{k}", required=True)
    s.add_argument("--threads", type=int, default=None)


def _retrieval_args(s):
    for k in ("tasks", "domain", "index-dir", "retriever"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--answerability", type=json_arg, default=None, help="JSON list of kept answerability labels")
    s.add_argument("--recall-k", type=int, required=True)


# help of the options below that convrag.cliargs.COMMON_HELP words too generally ("stage.dest" or "dest")
HELP = {
    "expansions": "the expansion kinds this rung searches (worse_labels.slices.<s>.ladder)",
    "expand.prompts": "the expansion prompt file",
    "released_format": "the released file's format",
    "out_components": "the components (one TREC run per expansion kind, JSON) to write",
    "out_expansions": "the expansions (JSONL) to write",
    "step": "grid step of the weight search over the simplex",
    "measure": "the ir_measures measure the weights maximise",
    "fit.out": "the weights and their source (JSON) to write",
    "fuse.weights": "the rung's weights (convrag worse-labels fit)",
    "contexts.slice": "the slice's name (worse_labels.slices.<s>)",
    "contexts.out": "the contexts table (Parquet) to write",
    "contexts.items": "the contexts' texts for the readers and judges (JSONL) to write",
    "control": "the rung whose contexts give the negative control (another dialogue's context)",
    "label_mode": "JSON: p(answerable) from the status labels' log-probabilities (true) or not (false)",
    "read.out": "the reader's responses (JSONL) to write",
    "label.out": "the content labels (JSONL) to write",
    "reads": "one reader's responses (convrag worse-labels read)",
    "correctness.out": "the answer judges' verdicts (JSONL) to write",
    "human-feedback.out": "the annotator feedback (Parquet) to write",
    "human-feedback.items": "the single-passage items (JSONL) to write",
    "strata": "JSON audit strata (default: the paper's: 100 Fusion, half none, 50 none per other retriever)",
    "audit.out": "the audit labels (JSONL) to write",
}


def add_cli(sub) -> None:
    s = sub.add_parser("retrieve", help="a query rung: one query per turn, one batched search")
    s.set_defaults(fn=cmd_retrieve)
    _retrieval_args(s)
    s.add_argument("--rung", required=True)
    s.add_argument("--query", required=True, help="a query policy without an LLM (convrag.rag.policies): current | "
                   "history | official_history | rewrite | standalone")
    for k in ("out-run", "out-queries", "accounting"):
        s.add_argument(f"--{k}", required=True)
    _common(s, model=False)

    s = sub.add_parser("expand", help="an expansion rung's components: LLM query expansions, each searched")
    s.set_defaults(fn=cmd_expand)
    _retrieval_args(s)
    s.add_argument("--expansions", nargs="+", required=True)
    s.add_argument("--prompts", required=True)
    sampling_arg(s, help="regenerating: the expander's JSON {temperature, top_p, max_tokens, stop}")
    s.add_argument("--released", default=None, help="the released expansions file (no model call)")
    s.add_argument("--released-format", default="jsonl", choices=["jsonl", "json"])
    for k in ("out-components", "out-expansions", "accounting"):
        s.add_argument(f"--{k}", required=True)
    for k in ("model", "registry", "cache"):
        s.add_argument(f"--{k}", default=None, help="regenerating: the expanding model, registry, LLM cache")
    _common(s, model=False)

    for name, fn, help_ in (("fit", cmd_fit, "the fusion weights of one rung (given, fitted on train, or equal)"),
                            ("fuse", cmd_fuse, "an expansion or fuse rung's run from its components and weights")):
        s = sub.add_parser(name, help=help_)
        s.set_defaults(fn=fn)
        s.add_argument("--components", nargs="*", default=[], help="an expansion rung's components files")
        s.add_argument("--runs", type=json_arg, default={}, help="a fuse rung's runs: JSON {rung: [trec paths]}")
        if name == "fit":
            s.add_argument("--names", nargs="*", default=None, help="component names (given or equal weights)")
            s.add_argument("--tasks", default=None, help="the train turns (omit: equal weights)")
            s.add_argument("--domains", nargs="*", default=None, help="the slice's domains")
            s.add_argument("--answerability", type=json_arg, default=None)
            s.add_argument("--weights", type=json_arg, default=None, help="JSON list: given weights")
            s.add_argument("--step", type=float, default=0.1)
            s.add_argument("--measure", default="nDCG@10")
            s.add_argument("--out", required=True)
        else:
            for k in ("weights", "rung", "out-run", "accounting"):
                s.add_argument(f"--{k}", required=True)
            s.add_argument("--recall-k", type=int, required=True)

    s = sub.add_parser("contexts", help="the slice's contexts: qrels labels, copies, evidence classes, scores")
    s.set_defaults(fn=cmd_contexts)
    for k in ("tasks", "slice", "out", "items"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--runs", type=json_arg, required=True, help="JSON {rung: [trec paths, one per domain]}")
    s.add_argument("--corpora", nargs="+", required=True)
    s.add_argument("--domains", nargs="+", required=True, help="the slice's domains (labels.domain)")
    s.add_argument("--top-k", type=int, required=True)
    s.add_argument("--control", default=None)
    s.add_argument("--answerability", type=json_arg, default=None)

    s = sub.add_parser("read", help="one reader over the slice's contexts: status line and p(answerable)")
    s.set_defaults(fn=cmd_read)
    for k in ("items", "prompts-dir", "out", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--sets", nargs="+", required=True)
    sampling_arg(s, required=True)
    s.add_argument("--label-mode", type=json_arg, default=True)
    _common(s)

    for name, fn, help_ in (("label", cmd_label, "one content judge over the slice's contexts"),
                            ("correctness", cmd_correctness, "every answer judge over one reader's responses")):
        s = sub.add_parser(name, help=help_)
        s.set_defaults(fn=fn)
        for k in ("items", "prompts-dir", "out", "accounting"):
            s.add_argument(f"--{k}", required=True)
        if name == "label":
            s.add_argument("--sets", nargs="+", required=True)
            sampling_arg(s, required=True)
            _common(s)
        else:
            s.add_argument("--reads", required=True)
            s.add_argument("--judges", type=json_arg, required=True,
                           help='JSON list of {"model": ..., "max_tokens": ...}: the answer judges, in order')
            for k in ("registry", "cache"):
                s.add_argument(f"--{k}", required=True)
            _common(s, model=False)

    s = sub.add_parser("human-feedback", help="MTRAG's annotator feedback and its single-passage items")
    s.set_defaults(fn=cmd_human_feedback)
    s.add_argument("--files", type=json_arg, required=True, help="JSON {raw file name: path}")
    s.add_argument("--domains", nargs="*", default=None, help="keep these domains (default: all)")
    for k in ("out", "items"):
        s.add_argument(f"--{k}", required=True)

    s = sub.add_parser("audit", help="the blind audit of a stratified sample of contexts")
    s.set_defaults(fn=cmd_audit)
    for k in ("contexts", "items", "prompts-dir", "out", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--strata", type=json_arg, default=None)
    s.add_argument("--seed", type=int, default=0)
    sampling_arg(s, required=True)
    _common(s)
    fill_help(sub, HELP)
