"""`convrag <stage>`: one entry per workflow stage, so each rule is one shell line and every
stage runs (and is tested) without Snakemake. Heavy imports happen inside the handlers so
`convrag --help` stays instant."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from convrag.errors import ConvragError


def _json(s: str):
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e


# ---- data -----------------------------------------------------------------------------


def cmd_download(a):
    from convrag.data.download import download_file

    s = a.spec
    download_file(s["repo_id"], s["filename"], s["revision"], a.out, repo_type=s.get("repo_type", "dataset"),
                  sha256=s.get("sha256"))


def cmd_prepare_corpus(a):
    from pathlib import Path

    from convrag.data.hipporag import load_hipporag
    from convrag.data.miniworld import generate_world
    from convrag.records import write_records

    if a.spec["kind"] == "miniworld":
        questions, passages = generate_world({**(a.spec.get("spec") or {}), "name": a.name}, a.spec.get("seed", 13))
    else:
        questions, passages = load_hipporag(a.files["questions"], a.files["corpus"], a.name, format=a.spec["format"])
    write_records(Path(a.out_dir) / "corpus.jsonl", passages)
    write_records(Path(a.out_dir) / "questions_all.jsonl", questions)
    print(f"{a.name}: {len(questions)} questions, {len(passages)} passages", file=sys.stderr)


def cmd_select_questions(a):
    from convrag.data.hipporag import sample_questions
    from convrag.errors import ConfigError
    from convrag.records import Question, read_records, write_records

    qs = read_records(a.questions, Question)
    hops = a.spec.get("hops") or []
    if hops:
        qs = [q for q in qs if q.hops in hops]
    try:
        picked = sample_questions(qs, a.spec["n_questions"], a.spec.get("sample_seed", 0))
    except ConfigError as e:
        raise ConfigError(f"datasets.{a.dataset}.n_questions (hops {hops or 'all'}, from {a.questions}): {e}") from e
    for q in picked:
        q.dataset = a.dataset
    write_records(a.out, picked)


# ---- retrieval --------------------------------------------------------------------------


def cmd_build_index(a):
    from convrag.retrieval import build_index

    build_index(a.retriever, a.corpus, a.out_dir, a.params)


# ---- LLM stages -------------------------------------------------------------------------


def _set_threads(n: int | None) -> None:
    if n:
        os.environ["CONVRAG_THREADS"] = str(n)


def _engine(model, registry, cache):
    from convrag.llm.engine import load_engine

    return load_engine(model, registry, cache)


def cmd_shard(a):
    import yaml

    from convrag.io import atomic_open
    from convrag.records import Question, read_records, write_records
    from convrag.simulate.shards import ShardPrompts, shard_questions, shard_report

    _set_threads(a.threads)
    qs = read_records(a.questions, Question)
    prompts = ShardPrompts.from_dict(yaml.safe_load(open(a.prompts)))
    engine = _engine(a.model, a.registry, a.cache)
    sets = shard_questions(qs, engine, prompts, a.settings)
    write_records(a.out, sets)
    with atomic_open(a.report) as fh:
        fh.write(shard_report(sets, qs))
    engine.write_accounting(a.accounting)


def cmd_simulate(a):
    import yaml

    from convrag.records import Passage, Question, ShardSet, read_records, write_records
    from convrag.retrieval import load_retriever
    from convrag.simulate.conversation import ConversationRunner, Settings

    _set_threads(a.threads)
    t0 = time.time()
    settings = Settings.from_dict(a.settings)
    size = a.settings.get("chunk_size", 50)
    shardsets = {s.qid: s for s in read_records(a.shards, ShardSet)}
    questions = [q for q in read_records(a.questions, Question) if shardsets.get(q.qid) and shardsets[q.qid].passed]
    chunk = questions[a.chunk * size:(a.chunk + 1) * size]
    shards = {q.qid: [s["text"] for s in shardsets[q.qid].shards] for q in chunk}
    passages = {p.doc_id: p for p in read_records(a.corpus, Passage)} if a.retriever != "closed_book" else {}
    retriever = load_retriever(a.retriever, a.index_dir, a.retriever_params)
    engine = _engine(a.model, a.registry, a.cache)
    user_engine = engine if a.user_model == a.model else _engine(a.user_model, a.registry, a.cache)
    runner = ConversationRunner(
        condition=a.condition, policy=a.policy, retriever=retriever, retriever_name=a.retriever_name,
        model_name=a.model, user_model_name=a.user_model, dataset=a.dataset, passages=passages,
        assistant_engine=engine, user_engine=user_engine, prompts=yaml.safe_load(open(a.prompts)), settings=settings,
    )
    convs = runner.run(chunk, shards)
    write_records(a.out, convs)
    acc = {"assistant": engine.accounting.to_dict()}
    if user_engine is not engine:
        acc["user_simulator"] = user_engine.accounting.to_dict()
    acc["job"] = {"conversations": len(convs), "questions": len(chunk), "wall_seconds": round(time.time() - t0, 3),
                  "unanswered_turns": sum(c.n_unanswered_turns for c in convs)}
    from convrag.io import write_json

    write_json(a.accounting, acc)


def cmd_convert_model(a):
    from convrag.llm.convert import convert_gguf
    from convrag.llm.registry import get_spec, load_registry
    from convrag.errors import ConfigError

    spec = get_spec(load_registry(a.registry), a.model)
    folder, gguf = spec.weights_location()
    if not gguf:
        raise ConfigError(f"{spec.where('weights')}: {a.model} has no GGUF weights to convert")
    print(convert_gguf(folder, gguf, out_dir=a.out, dtype=a.dtype or spec.dtype or "float32"))


# ---- scoring and reporting --------------------------------------------------------------


def cmd_score(a):
    from convrag.studies.lic_rag import score_conversations, write_parquet

    convs, turns = score_conversations(a.conversations, a.questions, a.top_k)
    write_parquet(convs, a.out)
    write_parquet(turns, a.out_turns)


def cmd_lic_rag(a):
    from convrag.studies import lic_rag

    {"table2": lic_rag.run_table2, "figure-delivery": lic_rag.run_figure}[a.what](a.scores, a.bootstrap, a.out_stem)


def cmd_accounting(a):
    from convrag.report.tables import write_table
    from convrag.studies.lic_rag import accounting_table

    df = accounting_table(a.conversations)
    stem = a.out[: -len(".csv")] if a.out.endswith(".csv") else a.out
    write_table(df, stem, caption="LLM accounting per simulate job.")


def cmd_estimate(a):
    from convrag.estimate import DEFAULT_PROMPTS, Throughput, format_report, run_estimate

    tp = Throughput(**{k: v for k, v in (("prefill_mfu", a.prefill_mfu), ("decode_mfu", a.decode_mfu),
                                         ("load_fixed_s", a.load_seconds), ("load_gb_per_s", a.load_gb_per_s))
                       if v is not None})
    est = run_estimate(a.config, a.accounting_glob, a.shard_accounting_glob, a.prompts or DEFAULT_PROMPTS, tp,
                       job_minutes=a.job_minutes, passage_tokens=a.passage_tokens)
    text = json.dumps(est, indent=2) if a.json else format_report(est)
    if a.out:
        from convrag.io import atomic_open

        with atomic_open(a.out) as fh:
            fh.write(text + "\n")
    else:
        print(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="convrag", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True, metavar="STAGE")

    def add(name, fn, help):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(fn=fn)
        return sp

    s = add("download", cmd_download, "download one file of a Hugging Face dataset repo and record its sha256")
    s.add_argument("--spec", type=_json, required=True, help="JSON {repo_id, revision, repo_type, filename, sha256}")
    s.add_argument("--out", required=True)

    s = add("prepare-corpus", cmd_prepare_corpus, "write a corpus and its question pool as common records")
    s.add_argument("--name", required=True)
    s.add_argument("--spec", type=_json, required=True, help="the corpora.<name> config entry as JSON")
    s.add_argument("--files", type=_json, default={}, help="JSON {questions, corpus} input paths")
    s.add_argument("--out-dir", required=True)

    s = add("select-questions", cmd_select_questions, "draw a reproducible question sample for one dataset")
    s.add_argument("--dataset", required=True)
    s.add_argument("--spec", type=_json, required=True)
    s.add_argument("--questions", required=True)
    s.add_argument("--out", required=True)

    s = add("build-index", cmd_build_index, "build one retrieval index for one corpus")
    s.add_argument("--retriever", required=True, help="closed_book | bm25 | dense")
    s.add_argument("--params", type=_json, default={})
    s.add_argument("--corpus", required=True)
    s.add_argument("--out-dir", required=True)

    s = add("shard", cmd_shard, "LLM shard construction with automatic checks and a report")
    for k in ("questions", "prompts", "model", "registry", "cache", "out", "report", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--settings", type=_json, default={})
    s.add_argument("--threads", type=int, default=None)

    s = add("simulate", cmd_simulate, "simulate one chunk of lic_rag conversations (lockstep batched)")
    for k in ("questions", "shards", "corpus", "index-dir", "retriever", "retriever-name", "prompts", "dataset",
              "model", "user-model", "condition", "policy", "registry", "cache", "out", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--retriever-params", type=_json, default={})
    s.add_argument("--settings", type=_json, default={})
    s.add_argument("--chunk", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = add("convert-model", cmd_convert_model, "dequantise a registry model's GGUF once into a safetensors HF folder")
    s.add_argument("--model", required=True)
    s.add_argument("--registry", default="config/models.yaml")
    s.add_argument("--out", default=None, help="target folder (default: the model cache, $CONVRAG_MODEL_CACHE)")
    s.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (default: the registry dtype)")

    s = add("score", cmd_score, "score lic_rag conversations (EM/F1 per turn, BEST, recall) into Parquet")
    s.add_argument("--conversations", nargs="+", required=True)
    s.add_argument("--questions", nargs="+", required=True)
    s.add_argument("--top-k", type=int, default=5)
    s.add_argument("--out", required=True)
    s.add_argument("--out-turns", required=True)

    s = add("lic-rag", cmd_lic_rag, "lic_rag tables and figures from the score tables")
    s.add_argument("what", choices=["table2", "figure-delivery"])
    s.add_argument("--scores", required=True)
    s.add_argument("--bootstrap", type=_json, default={})
    s.add_argument("--out-stem", required=True)

    s = add("accounting", cmd_accounting, "gather per-job LLM accounting into one table")
    s.add_argument("--conversations", nargs="+", required=True)
    s.add_argument("--out", required=True)

    s = add("estimate", cmd_estimate, "size a lic_rag grid (conversations, LLM calls, tokens, GPU-hours, SLURM "
            "layout) for any config from a finished run's accounting (see docs/scaling.md)")
    s.add_argument("--config", required=True, help="the config to size, e.g. config/studies/lic_rag.yaml")
    s.add_argument("--accounting-glob", action="append", default=None, metavar="GLOB",
                   help="simulate accounting files of the measured run (repeatable; default "
                        "results/lic_rag/conversations/**/chunk*.accounting.json)")
    s.add_argument("--shard-accounting-glob", action="append", default=None, metavar="GLOB",
                   help="shard accounting files (repeatable; default results/lic_rag/shards/*/accounting.json)")
    s.add_argument("--prompts", default=None, help="lic_rag assistant prompts of the measured run (default: the repo's)")
    s.add_argument("--passage-tokens", type=float, default=None,
                   help="mean tokens per retrieved passage in the target corpora (default: as measured)")
    s.add_argument("--prefill-mfu", type=float, default=None, help="prefill efficiency (default 0.40)")
    s.add_argument("--decode-mfu", type=float, default=None, help="decode efficiency (default 0.15)")
    s.add_argument("--load-seconds", type=float, default=None, help="fixed model start-up per job (default 90)")
    s.add_argument("--load-gb-per-s", type=float, default=None, help="weight loading speed (default 1.0)")
    s.add_argument("--job-minutes", type=float, default=240.0, help="SLURM time limit of a simulate job (default 240)")
    s.add_argument("--json", action="store_true", help="print the full estimate as JSON")
    s.add_argument("--out", default=None, help="write to this file instead of stdout")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.fn(args)
    except ConvragError as e:
        print(f"convrag {args.stage}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
