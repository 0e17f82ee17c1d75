"""``convrag mtrag-un <stage>``: the study's own stages."""

from __future__ import annotations

from convrag.cli import json_arg


def cmd_score_retrieval(a):
    from convrag.records import TurnTask, read_records
    from convrag.io import write_parquet
    from convrag.studies.mtrag_un.analyses import score_runs

    write_parquet(score_runs(read_records(a.tasks, TurnTask), a.runs, a.measures), a.out)


def add_cli(sub) -> None:
    s = sub.add_parser("score-retrieval", help="score every retrieval run per task with ir_measures into Parquet")
    s.set_defaults(fn=cmd_score_retrieval)
    s.add_argument("--tasks", required=True)
    s.add_argument("--runs", type=json_arg, required=True, help="JSON [{retriever, policy, domain, path}]")
    s.add_argument("--measures", nargs="+", required=True, help="ir_measures names, e.g. R@5 nDCG@10")
    s.add_argument("--out", required=True)
