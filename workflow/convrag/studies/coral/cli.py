"""``convrag coral <stage>``: the study's own stages (pages, flows, contextualise, score-retrieval)."""

from __future__ import annotations

from convrag.cli import json_arg, set_threads


def cmd_pages(a):
    from convrag.data.coral_world import page_records
    from convrag.io import write_jsonl

    write_jsonl(a.out, page_records(a.name, a.world))


def cmd_flows(a):
    from convrag.io import read_jsonl, write_json, write_jsonl
    from convrag.studies.coral.construct import read_trees, sample_flows

    flows, report = sample_flows(read_trees(read_jsonl(a.pages)), a.samplers, a.turns, a.long_share, a.seed)
    write_jsonl(a.out, flows)
    write_json(a.report, report)


def cmd_contextualise(a):
    import time

    from convrag.io import read_jsonl, write_json
    from convrag.llm.engine import EnginePool
    from convrag.llm.types import Sampling
    from convrag.rag.jobs import write_job
    from convrag.studies.coral.construct import read_trees
    from convrag.studies.coral.contextualise import build_conversations, load_prompts

    set_threads(a.threads)
    t0 = time.time()
    pages = read_jsonl(a.pages)
    trees = read_trees(pages)
    flows = read_jsonl(a.flows)
    sampling = Sampling(temperature=a.temperature, top_p=a.top_p, max_tokens=a.max_tokens, stop=("\n",))
    pool = EnginePool(a.registry, a.cache)
    try:
        engine = pool.engine(a.model)
        tasks, report = build_conversations(trees, flows, engine, load_prompts(a.prompts),
                                            ref_to_doc={p["page_id"]: p["refs"] for p in pages},
                                            sampling=sampling, seed=a.seed, max_tries=a.tries)
        acc = {"contextualiser": engine.accounting.to_dict(), "job": {"wall_seconds": round(time.time() - t0, 3)}}
        write_json(a.report, report)
        write_job({a.out: tasks}, a.accounting, acc)  # the tasks and their accounting: all or nothing
    finally:
        pool.close()


def cmd_score_retrieval(a):
    from convrag.io import write_parquet
    from convrag.metrics.registry import score_task_runs
    from convrag.records import TurnTask, read_records

    write_parquet(score_task_runs(read_records(a.tasks, TurnTask), a.runs, a.measures, labels=("flow",)), a.out)


def add_cli(sub) -> None:
    s = sub.add_parser("pages", help="render the generated world as Wikipedia-like HTML pages (JSONL, one page a line)")
    s.set_defaults(fn=cmd_pages)
    s.add_argument("--name", required=True, help="the miniworld corpus the pages render (its doc ids are cited)")
    s.add_argument("--world", type=json_arg, required=True, help="JSON: that corpus's block (seed, spec)")
    s.add_argument("--out", required=True)

    s = sub.add_parser("flows", help="title trees and the LDS / SIDS / STRW / DTRW conversation-flow samplers")
    s.set_defaults(fn=cmd_flows)
    s.add_argument("--pages", required=True)
    s.add_argument("--samplers", type=json_arg, required=True, help='JSON {"lds": n, "sids": n, ...}')
    s.add_argument("--turns", type=json_arg, default={}, help='JSON {"lds": [min, max], ...} (default: the paper)')
    s.add_argument("--long-share", type=float, default=0.2)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True)
    s.add_argument("--report", required=True)

    s = sub.add_parser("contextualise", help="the two LLM steps: full questions from keyword chains, then their "
                                             "conversational form; writes the conversations as TurnTasks")
    s.set_defaults(fn=cmd_contextualise)
    for k in ("pages", "flows", "prompts", "model", "registry", "cache", "out", "accounting", "report"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--max-tokens", type=int, default=64)
    s.add_argument("--temperature", type=float, default=0.7)
    s.add_argument("--top-p", type=float, default=1.0)
    s.add_argument("--tries", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("score-retrieval", help="score every retrieval run per turn with ir_measures into Parquet")
    s.set_defaults(fn=cmd_score_retrieval)
    s.add_argument("--tasks", required=True)
    s.add_argument("--runs", type=json_arg, required=True, help="JSON [{retriever, policy, domain, path}]")
    s.add_argument("--measures", nargs="+", required=True, help="ir_measures names, e.g. RR AP nDCG@3 R@20")
    s.add_argument("--out", required=True)
