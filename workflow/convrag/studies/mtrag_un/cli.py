"""``convrag mtrag-un <stage>``: the study's own stages."""

from __future__ import annotations

from convrag.cliargs import json_arg, set_threads


def _score_and_write(items, a, setting: dict, extra=None):
    """Score ``items`` with the judge model and write the metrics (with ``setting`` and the
    columns of ``extra``, row-aligned with ``items``), the verdicts and the accounting together
    (all or nothing)."""
    from convrag.io import write_json, write_jsonl, write_parquet
    from convrag.rag.jobs import Job, write_outputs
    from convrag.studies.mtrag_un.evaluate import bertscore_config, score_items

    with Job(a.registry, a.cache) as job:
        engine = job.engine(a.judge_model, role="judge")
        df, verdicts, counts = score_items(items, engine, a.prompts_dir, a.judges, a.max_tokens,
                                           bertscore_config(a.bertscore))
        df = df.assign(**setting, judge_model=a.judge_model)
        if extra is not None:
            import pandas as pd

            df = pd.concat([df.reset_index(drop=True), extra.reset_index(drop=True)], axis=1)
        acc = job.accounting(**counts)
        write_outputs([(a.verdicts, lambda p: write_jsonl(p, verdicts)), (a.accounting, lambda p: write_json(p, acc)),
                       (a.out, lambda p: write_parquet(df, p))])


def cmd_evaluate(a):
    from convrag.io import read_jsonl
    from convrag.records import Passage, TurnTask, read_records
    from convrag.studies.mtrag_un.evaluate import answer_items

    set_threads(a.threads)
    corpus = {p.doc_id: p for p in read_records(a.corpus, Passage)} if a.corpus else None
    answers = read_jsonl(a.answers)
    items = answer_items(read_records(a.tasks, TurnTask), answers, corpus)
    _score_and_write(items, a, {"model": a.model, "setting": a.setting})


def cmd_human_eval(a):
    from pathlib import Path

    from convrag.data.mtrag import load_human_evaluations
    from convrag.studies.mtrag_un.human import human_rows

    set_threads(a.threads)
    src = a.evaluations
    if src.startswith(("http://", "https://")):
        from convrag.data.download import download_url

        local = Path(a.out).with_name("human_evaluations.json")
        download_url(src, local, sha256=a.sha256)
        src = local
    rows = human_rows(load_human_evaluations(src))
    items = [{**r, "item_id": f"{r['task_id']}|{r['system']}"} for r in rows.to_dict("records")]
    keep = ["system", *(c for c in rows.columns if c.startswith(("human_", "n_", "official_")))]
    _score_and_write(items, a, {}, extra=rows[keep])


def _judge_args(s):
    for k in ("judge-model", "registry", "cache", "prompts-dir", "out", "verdicts", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--judges", nargs="+", required=True, help="idk rb_llm clarification faithfulness")
    s.add_argument("--max-tokens", type=json_arg, default={}, help="JSON judge -> max new tokens")
    s.add_argument("--bertscore", type=json_arg, default="offline", help='JSON: "paper", "offline" or a dict')
    s.add_argument("--threads", type=int, default=None)


def add_cli(sub) -> None:
    s = sub.add_parser("evaluate", help="score one answers file as the official MTRAG scorer does (metrics, "
                                        "judges, conditioning) into Parquet, with every verdict")
    s.set_defaults(fn=cmd_evaluate)
    for k in ("tasks", "answers", "model", "setting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--corpus", default=None, help="the domain's passages (answers from retrieved passages)")
    _judge_args(s)

    s = sub.add_parser("human-eval", help="re-score MTRAG's human-evaluated responses with the project's metrics "
                                          "and judges (the judge-human correlation)")
    s.set_defaults(fn=cmd_human_eval)
    s.add_argument("--evaluations", required=True, help="reference_subset_with_human_evaluations.json (path or URL)")
    s.add_argument("--sha256", default=None, help="expected sha256 of a downloaded file")
    _judge_args(s)
