"""``convrag cross <stage>``: the cross grid's own stages (one per rule)."""

from __future__ import annotations

from convrag.cliargs import fill_help, json_arg, sampling_arg


def cmd_tasks(a):
    """A multi-hop dataset's questions (and shard sets, for sharded delivery) as TurnTasks."""
    from convrag.io import write_json
    from convrag.records import Question, ShardSet, read_records, write_records
    from convrag.studies.cross.tasks import multihop_tasks

    sets = read_records(a.shards, ShardSet) if a.shards else None
    tasks, report = multihop_tasks(read_records(a.questions, Question), sets, where=a.shards or a.questions)
    write_records(a.out, tasks)
    write_json(a.report, report)


def cmd_answer(a):
    """One cell: every domain of a benchmark, one retriever, policy, reader and delivery."""
    import yaml

    from convrag.llm.types import Sampling
    from convrag.rag.jobs import Job
    from convrag.rag.replay import ChatPrompt, answer_tasks
    from convrag.records import Passage, TurnTask, read_records
    from convrag.retrieval import capabilities, load_retriever
    from convrag.studies.cross.deliver import answer

    with Job(a.registry, a.cache, a.threads) as job:
        tasks = read_records(a.tasks, TurnTask)
        caps = capabilities(a.retriever)
        sampling = Sampling.from_config(a.sampling)
        prompt = ChatPrompt(yaml.safe_load(open(a.prompts)))
        reader = job.engine(a.model, role="reader")
        llm = job.engine(a.retriever_llm or a.model, role="retriever") if caps.uses_llm else None
        rewriter = rewrite_prompts = None
        if a.policy == "llm_rewrite":
            rewriter = job.engine(a.rewrite_model, role="rewriter")
            rewrite_prompts = yaml.safe_load(open(a.rewrite_prompts))
        records = []
        for domain, where in a.domains.items():
            dtasks = [t for t in tasks if t.labels.get("domain") == domain]
            if not dtasks:
                continue
            if caps.closed_book:
                passages_from, retriever, corpus = "none", None, {}
            else:
                passages_from = "retrieved"
                retriever = load_retriever(a.retriever, where["index"], a.retriever_params, llm=llm)
                corpus = {p.doc_id: p for p in read_records(where["corpus"], Passage)}

            def answer_fn(batch, retriever=retriever, corpus=corpus, passages_from=passages_from):
                return answer_tasks(batch, engine=reader, prompt=prompt, sampling=sampling,
                                    policy=a.policy, passages_from=passages_from, retriever=retriever,
                                    capabilities=caps, corpus=corpus, top_k=a.top_k, recall_k=a.recall_k,
                                    seed=a.seed, setting={"model": a.model, "retriever": a.retriever_name},
                                    rewrite_llm=rewriter, rewrite_prompts=rewrite_prompts,
                                    rewrite_max_tokens=a.rewrite_max_tokens)

            records += answer(dtasks, a.delivery, answer_fn)
        missing = sorted({t.labels.get("domain") for t in tasks} - set(a.domains))
        if missing:
            from convrag.errors import DataError

            raise DataError(f"{a.tasks}: tasks of domain '{missing[0]}', which the job was given no index for")
        finals = [r for r in records if r["final"]]
        job.write({a.out: records}, a.accounting, tasks=len(tasks), turns=len(records), final=len(finals),
                  unanswered=sum(not r["answered"] for r in finals))


def cmd_score(a):
    """Every cell of one benchmark: retrieval, answer metrics, the correctness judge, the content label."""
    import pandas as pd
    import yaml

    from convrag.io import read_json, read_jsonl, write_json, write_jsonl, write_parquet
    from convrag.llm.judge import summary
    from convrag.rag.jobs import Job, write_outputs
    from convrag.records import Passage, TurnTask, read_records
    from convrag.studies.cross import score as sc

    if a.chunks > 1:  # one of cross.score_chunks jobs: every n-th answer file
        a.answers = a.answers[a.chunk::a.chunks]
    with Job(a.registry, a.cache, a.threads) as job:
        tasks = {t.task_id: t for t in read_records(a.tasks, TurnTask)}
        records = sc.final_records(a.answers, read_jsonl)
        for r in records:
            sc._task(tasks, r, a.tasks)
        rows = sc.retrieval_rows(records, tasks, a.measures) + sc.answer_rows(records, tasks, a.metrics)
        contexts, verdicts, judged = [], [], {}
        if a.judge_model:
            from convrag.judges.correctness import judge_answers

            engine = job.engine(a.judge_model, role="answer_correctness")
            items = sc.judge_items(records, tasks)
            got = judge_answers(items, engine, yaml.safe_load(open(a.judge_prompts)), a.judge_max_tokens)
            verdicts += [{"judge": "answer_correctness", **v} for v in got]
            rows += sc.judge_rows(records, tasks, {v["key"]: v for v in got})
            judged["answer_correctness"] = summary(got)
        if a.content_model:
            from convrag.judges.content import judge_content, load_content_prompts

            corpus = {p.doc_id: p for path in a.corpora for p in read_records(path, Passage)}
            engine = job.engine(a.content_model, role="worse_labels_content")
            items = sc.content_items(records, tasks, corpus, a.top_k)
            prompts = load_content_prompts(a.prompts_dir)
            got = judge_content(items, engine, prompts, max_tokens=a.content_max_tokens)
            verdicts += [{"judge": "worse_labels_content", **v} for v in got]
            labels = {v["item_id"]: (v["value"] or {}).get("label") for v in got}
            crow, contexts = sc.content_rows(records, tasks, labels, a.top_k, a.partial_insufficient)
            rows += crow
            judged["worse_labels_content"] = summary(got)
        acc = job.accounting(final_answers=len(records), rows=len(rows), contexts=len(contexts))
    if judged:
        acc["verdicts"] = judged
    # the answer jobs' accounting, summed (one accounting row per benchmark; per cell under "cells")
    cells = {"/".join(f[k] for k in ("retriever", "policy", "reader", "delivery")):
             read_json(sc.answer_accounting_path(f["path"])) for f in a.answers}
    acc["answers"] = sc.sum_accounting(list(cells.values()))
    acc["cells"] = cells
    ctx = pd.DataFrame(contexts, columns=[*(k for k in sc.ROW_KEYS if k != "reader"), "context_id", "no_gold",
                                          "label", "n_shown"])
    long = sc.long_frame(rows)
    write_outputs([(a.verdicts, lambda p: write_jsonl(p, verdicts)), (a.contexts, lambda p: write_parquet(ctx, p)),
                   (a.accounting, lambda p: write_json(p, acc)), (a.out, lambda p: write_parquet(long, p))])


def cmd_merge_scores(a):
    """The chunks of one benchmark's scoring (cross.score_chunks) joined: rows and verdicts in chunk
    order, accounting summed (per-cell answer accounting united)."""
    import pandas as pd

    from convrag.io import read_json, read_jsonl, write_json, write_jsonl, write_parquet
    from convrag.rag.jobs import write_outputs
    from convrag.studies.cross import score as sc

    parts = [read_json(p) for p in a.accounting]
    acc = sc.merge_accounting(parts)
    long = pd.concat([pd.read_parquet(p) for p in a.scores], ignore_index=True)
    ctx = pd.concat([pd.read_parquet(p) for p in a.contexts], ignore_index=True)
    verdicts = [v for p in a.verdicts for v in read_jsonl(p)]
    write_outputs([(a.out_verdicts, lambda p: write_jsonl(p, verdicts)),
                   (a.out_contexts, lambda p: write_parquet(ctx, p)),
                   (a.out_accounting, lambda p: write_json(p, acc)), (a.out, lambda p: write_parquet(long, p))])


# help of the options below that convrag.cliargs.COMMON_HELP words too generally ("stage.dest" or "dest")
HELP = {
    "tasks.questions": "the multi-hop dataset's selected questions (JSONL)",
    "tasks.out": "the dataset's turns as TurnTasks (JSONL) to write",
    "answer.model": "registry model of the reader",
    "answer.delivery": "how the question reaches the reader (the grid's delivery: full, sharded, recorded, ...)",
    "answer.out": "the cell's answers (JSONL) to write",
    "score.out": "the benchmark's per-cell scores (Parquet) to write",
    "score.contexts": "the contexts with their content label (Parquet) to write",
    "metrics": "answer metric names (convrag.metrics.registry)",
    "judge_prompts": "prompt file of the answer judge",
    "judge_max_tokens": "maximum new tokens of a judge reply (default: the judge's own; the rules pass the config's)",
    "content_model": "registry model of the content label (does the context support the answer?)",
    "content_max_tokens": "maximum new tokens of a content-label reply (default: the judge's own; the rules pass the config's)",
    "partial_insufficient": "count a partly supporting context as insufficient (default: as sufficient)",
}


def add_cli(sub) -> None:
    s = sub.add_parser("tasks", help="a multi-hop dataset (with its shard sets) as TurnTasks")
    s.set_defaults(fn=cmd_tasks)
    for k in ("questions", "out", "report"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--shards", default=None, help="shard sets (convrag lic-rag shard); none: recorded delivery only")

    s = sub.add_parser("answer", help="one cell: a benchmark's tasks, one retriever, policy, reader, delivery")
    s.set_defaults(fn=cmd_answer)
    for k in ("tasks", "model", "prompts", "policy", "retriever", "retriever-name", "delivery", "registry",
              "cache", "out", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--domains", type=json_arg, required=True, help="JSON {domain: {index, corpus}}")
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--retriever-llm", default=None)
    s.add_argument("--rewrite-model", default=None)
    s.add_argument("--rewrite-prompts", default=None)
    s.add_argument("--rewrite-max-tokens", type=int, default=None)
    sampling_arg(s, required=True)
    s.add_argument("--top-k", type=int, required=True)
    s.add_argument("--recall-k", type=int, required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("score", help="every cell of one benchmark: metrics, the judge and the content label")
    s.set_defaults(fn=cmd_score)
    for k in ("tasks", "out", "contexts", "verdicts", "accounting", "registry", "cache", "prompts-dir"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--answers", type=json_arg, required=True,
                   help="JSON [{path, benchmark, retriever, policy, reader, delivery}]")
    s.add_argument("--corpora", nargs="*", default=[])
    s.add_argument("--measures", nargs="*", default=[])
    s.add_argument("--metrics", nargs="*", default=[])
    s.add_argument("--top-k", type=int, required=True)
    s.add_argument("--judge-model", default=None)
    s.add_argument("--judge-prompts", default=None)
    s.add_argument("--judge-max-tokens", type=int, default=None)
    s.add_argument("--content-model", default=None)
    s.add_argument("--content-max-tokens", type=int, default=None)
    s.add_argument("--partial-insufficient", action="store_true")
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--chunk", type=int, default=0, help="this job's chunk (0-based) of --chunks")
    s.add_argument("--chunks", type=int, default=1, help="scoring jobs of the benchmark (every n-th answer file)")

    s = sub.add_parser("merge-scores", help="one benchmark's scoring chunks joined (cross.score_chunks)")
    s.set_defaults(fn=cmd_merge_scores)
    for k in ("scores", "contexts", "verdicts", "accounting"):
        s.add_argument(f"--{k}", nargs="+", required=True, help=f"the chunks' {k} files, in chunk order")
    for k in ("out", "out-contexts", "out-verdicts", "out-accounting"):
        what = k.removeprefix("out-") if k != "out" else "scores"
        s.add_argument(f"--{k}", required=True, help=f"the benchmark's joined {what} file")
    fill_help(sub, HELP)

