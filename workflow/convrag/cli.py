"""`convrag <stage>`: one entry per workflow stage, so each rule is one shell line and every
stage runs (and is tested) without Snakemake. Heavy imports happen inside the handlers so
`convrag --help` stays instant."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from convrag.errors import ConfigError, ConvragError


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
    from convrag.retrieval import build_index, uses_llm

    _set_threads(a.threads)
    llm = pool = None
    if uses_llm(a.retriever):
        from convrag.llm.engine import EnginePool

        if not (a.llm and a.registry):
            raise ConfigError(f"build-index: retriever '{a.retriever}' calls an LLM: give --llm and --registry")
        pool = EnginePool(a.registry, a.cache)
        llm = pool.engine(a.llm)
    try:
        build_index(a.retriever, a.corpus, a.out_dir, a.params, llm=llm, graph_dir=a.graph_dir)
    finally:
        if pool is not None:
            pool.close()


def cmd_build_graph(a):
    from convrag.llm.engine import EnginePool
    from convrag.retrieval.graph.openie import build_graph

    _set_threads(a.threads)
    pool = EnginePool(a.registry, a.cache)
    try:
        engine = pool.engine(a.model)
        build_graph(a.corpus, a.out_dir, engine, a.params)
        engine.write_accounting(a.accounting)
    finally:
        pool.close()


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
    prompts = ShardPrompts.from_dict(yaml.safe_load(open(a.prompts)), source=a.source)
    engine = _engine(a.model, a.registry, a.cache)
    sets = shard_questions(qs, engine, prompts, a.settings)
    write_records(a.out, sets)
    with atomic_open(a.report) as fh:
        fh.write(shard_report(sets, qs))
    engine.write_accounting(a.accounting)


def cmd_shard_review(a):
    from convrag.io import atomic_open
    from convrag.records import Question, ShardSet, read_records, write_records
    from convrag.simulate.review import apply_review, export_review

    sets, qs = read_records(a.shards, ShardSet), read_records(a.questions, Question)
    if a.action == "export":
        with atomic_open(a.out) as fh:
            fh.write(export_review(sets, qs))
    else:
        write_records(a.out, apply_review(sets, qs, a.review) if a.review else sets)


def _cells(text: str) -> list[tuple[str, str]]:
    """``FULL:none,SHARDED:history`` -> [("FULL", "none"), ("SHARDED", "history")]."""
    out = []
    for part in text.split(","):
        cond, sep, pol = part.strip().partition(":")
        if not sep or not cond or not pol:
            raise argparse.ArgumentTypeError(f"cell {part!r} is not CONDITION:POLICY")
        out.append((cond, pol))
    return out


def cmd_simulate(a):
    import yaml

    from convrag.io import write_json
    from convrag.judges import label
    from convrag.llm.engine import EnginePool
    from convrag.records import Passage, Question, ShardSet, read_records, write_records
    from convrag.retrieval import load_retriever, uses_llm
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
    pool = EnginePool(a.registry, a.cache)
    roles = {"assistant": pool.engine(a.model), "user_simulator": pool.engine(a.user_model)}
    if a.classifier_model:
        roles["classifier"] = pool.engine(a.classifier_model)
    if a.judge_model:
        roles["judge"] = pool.engine(a.judge_model)
    if uses_llm(a.retriever):
        roles["retriever"] = pool.engine(a.retriever_llm or a.model)
    retriever = load_retriever(a.retriever, a.index_dir, a.retriever_params, llm=roles.get("retriever"))
    runner = ConversationRunner(
        cells=a.cells, retriever=retriever, retriever_name=a.retriever_name,
        model_name=a.model, user_model_name=a.user_model, dataset=a.dataset, passages=passages,
        assistant_engine=roles["assistant"], user_engine=roles["user_simulator"],
        prompts=yaml.safe_load(open(a.prompts)), settings=settings,
    )
    by_cell = runner.run(chunk, shards)
    if "classifier" in roles or "judge" in roles:
        if not (a.classifier_model and a.judge_model and a.classifier_prompts and a.judge_prompts):
            raise ConfigError("simulate: give --classifier-model/--classifier-prompts and --judge-model/--judge-prompts "
                              "together (or none of them: conversations are then not labelled)")
        label([c for v in by_cell.values() for c in v], {(q.dataset, q.qid): q for q in chunk},
              roles["classifier"], yaml.safe_load(open(a.classifier_prompts)),
              roles["judge"], yaml.safe_load(open(a.judge_prompts)),
              a.settings.get("classifier", {}).get("max_tokens", 8), a.settings.get("judge", {}).get("max_tokens", 8))
    try:
        for (cond, pol), convs in by_cell.items():
            write_records(f"{a.out_dir}/{cond}_{pol}/chunk{a.chunk}.jsonl", convs)
        acc = {role: eng.accounting.to_dict() for role, eng in roles.items()}
        acc["cells"] = {
            f"{c}_{p}": {"conversations": len(v), "unanswered_turns": sum(x.n_unanswered_turns for x in v),
                         **runner.usage.get(f"{c}_{p}", {})}
            for (c, p), v in by_cell.items()
        }
        acc["job"] = {"conversations": sum(len(v) for v in by_cell.values()), "questions": len(chunk),
                      "cells": len(by_cell), "wall_seconds": round(time.time() - t0, 3),
                      "unanswered_turns": sum(c.n_unanswered_turns for v in by_cell.values() for c in v)}
        write_json(a.accounting, acc)
    except BaseException:
        # all or nothing: a failed job leaves no conversation file that looks finished
        for (cond, pol) in by_cell:
            Path(f"{a.out_dir}/{cond}_{pol}/chunk{a.chunk}.jsonl").unlink(missing_ok=True)
        raise
    finally:
        pool.close()


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

    convs, turns = score_conversations(a.conversations, a.questions, a.recall_k)
    write_parquet(convs, a.out)
    write_parquet(turns, a.out_turns)


def cmd_lic_rag(a):
    from convrag.studies import lic_rag

    ctx = {"boot": a.bootstrap, "analysis": a.analysis, "closed_retrievers": a.closed_retrievers,
           "retrievers_of_kind": a.retriever_kinds}
    lic_rag.build_target(a.target, a.scores, a.turns, ctx, a.out_stem)


def cmd_lic_rag_datasets(a):
    from convrag.report.tables import write_table
    from convrag.studies.lic_rag import caption, dataset_table

    datasets = {}
    for spec in a.dataset:
        name, sep, rest = spec.partition("=")
        parts = rest.split(",")
        if not sep or len(parts) != 3:
            raise ConfigError(f"lic-rag-datasets: --dataset {spec!r} is not NAME=QUESTIONS,SHARDS,CORPUS")
        datasets[name] = dict(zip(("questions", "shards", "corpus"), parts))
    write_table(dataset_table(datasets), a.out_stem, caption=caption("table1_datasets"))


def cmd_accounting(a):
    from convrag.report.tables import write_table
    from convrag.studies.lic_rag import accounting_table

    df = accounting_table(a.jobs)
    stem = a.out[: -len(".csv")] if a.out.endswith(".csv") else a.out
    write_table(df, stem, caption="LLM accounting per simulate job and role (assistant, user simulator, retriever).")


def cmd_estimate(a):
    from convrag.estimate import Throughput, format_report, run_estimate

    tp = Throughput(**{k: v for k, v in (("prefill_mfu", a.prefill_mfu), ("decode_mfu", a.decode_mfu),
                                         ("load_fixed_s", a.load_seconds), ("load_gb_per_s", a.load_gb_per_s))
                       if v is not None})
    est = run_estimate(a.config, a.accounting_glob, a.shard_accounting_glob, tp,
                       job_minutes=a.job_minutes, passage_tokens=a.passage_tokens,
                       graph_globs=a.graph_accounting_glob, index_manifest_globs=a.index_manifest_glob,
                       **({"measured_config": a.measured_config} if a.measured_config else {}))
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
    s.add_argument("--retriever", required=True, help="closed_book | bm25 | dense | hipporag | hipporag2 | lightrag | "
                   "raptor | tog2 | pog")
    s.add_argument("--params", type=_json, default={})
    s.add_argument("--corpus", required=True)
    s.add_argument("--out-dir", required=True)
    s.add_argument("--graph-dir", default=None, help="the corpus's knowledge-graph artifact (graph retrievers)")
    s.add_argument("--llm", default=None, help="registry model for an LLM-using index build (RAPTOR summaries)")
    s.add_argument("--registry", default=None)
    s.add_argument("--cache", default=None)
    s.add_argument("--threads", type=int, default=None)

    s = add("build-graph", cmd_build_graph, "build the shared knowledge-graph artifact of one corpus (LLM OpenIE, "
            "synonym edges, embeddings)")
    for k in ("corpus", "model", "registry", "cache", "out-dir", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--params", type=_json, default={})
    s.add_argument("--threads", type=int, default=None)

    s = add("shard", cmd_shard, "LLM shard construction with automatic checks and a report")
    for k in ("questions", "prompts", "model", "registry", "cache", "out", "report", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--settings", type=_json, default={})
    s.add_argument("--source", default=None, help="source dataset of the prompt pairs (hotpotqa, 2wikimultihopqa, "
                   "musique, miniworld)")
    s.add_argument("--threads", type=int, default=None)

    s = add("shard-review", cmd_shard_review, "export shard sets to an editable review file, or apply an edited one")
    s.add_argument("action", choices=["export", "apply"])
    s.add_argument("--shards", required=True)
    s.add_argument("--questions", required=True)
    s.add_argument("--review", default=None, help="apply: the edited review file (none: copy the shards as they are)")
    s.add_argument("--out", required=True)

    s = add("simulate", cmd_simulate, "simulate one chunk of lic_rag conversations for every cell of one retriever "
            "(lockstep batched)")
    for k in ("questions", "shards", "corpus", "index-dir", "retriever", "retriever-name", "prompts", "dataset",
              "model", "user-model", "registry", "cache", "out-dir", "accounting"):
        s.add_argument(f"--{k}", required=True)
    for k in ("classifier-model", "classifier-prompts", "judge-model", "judge-prompts"):
        s.add_argument(f"--{k}", default=None, help="label turns and judge answers after the simulation (all four)")
    s.add_argument("--cells", type=_cells, required=True, help="CONDITION:POLICY,... e.g. FULL:none,SHARDED:history")
    s.add_argument("--retriever-llm", default=None, help="registry model of an LLM-using retriever (default: --model)")
    s.add_argument("--retriever-params", type=_json, default={})
    s.add_argument("--settings", type=_json, default={})
    s.add_argument("--chunk", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = add("convert-model", cmd_convert_model, "dequantise a registry model's GGUF once into a safetensors HF folder")
    s.add_argument("--model", required=True)
    s.add_argument("--registry", default="config/models.yaml")
    s.add_argument("--out", default=None, help="target folder (default: the model cache, $CONVRAG_MODEL_CACHE)")
    s.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (default: the registry dtype)")

    s = add("score", cmd_score, "score lic_rag conversations (EM/F1 per turn, BEST, recall, categories, judge, "
            "dependency order) into Parquet")
    s.add_argument("--conversations", nargs="+", required=True)
    s.add_argument("--questions", nargs="+", required=True)
    s.add_argument("--recall-k", "--top-k", dest="recall_k", type=int, default=5)
    s.add_argument("--out", required=True)
    s.add_argument("--out-turns", required=True)

    s = add("lic-rag", cmd_lic_rag, "one lic_rag table or figure from the score tables")
    s.add_argument("target", help="a target name, e.g. table2_full_vs_sharded (convrag.studies.lic_rag.TARGETS)")
    s.add_argument("--scores", required=True)
    s.add_argument("--turns", required=True)
    s.add_argument("--bootstrap", type=_json, default={})
    s.add_argument("--analysis", type=_json, default={})
    s.add_argument("--closed-retrievers", nargs="*", default=[])
    s.add_argument("--retriever-kinds", type=_json, default={}, help="JSON kind -> retriever names of the grid")
    s.add_argument("--out-stem", required=True)

    s = add("lic-rag-datasets", cmd_lic_rag_datasets, "Table 1 of lic_rag: the datasets of the grid")
    s.add_argument("--dataset", action="append", required=True, metavar="NAME=QUESTIONS,SHARDS,CORPUS")
    s.add_argument("--out-stem", required=True)

    s = add("accounting", cmd_accounting, "gather per-job LLM accounting into one table")
    s.add_argument("--jobs", nargs="+", required=True, help="simulate jobs' chunk<i>.accounting.json files")
    s.add_argument("--out", required=True)

    s = add("estimate", cmd_estimate, "size a lic_rag grid (conversations, LLM calls, tokens, GPU-hours, SLURM "
            "layout) for any config from a finished run's accounting (see docs/scaling.md)")
    s.add_argument("--config", required=True, help="the config to size, e.g. config/studies/lic_rag.yaml")
    s.add_argument("--accounting-glob", action="append", default=None, metavar="GLOB",
                   help="simulate accounting files of the measured run (repeatable; default "
                        "results/lic_rag/conversations/**/chunk*.accounting.json)")
    s.add_argument("--shard-accounting-glob", action="append", default=None, metavar="GLOB",
                   help="shard accounting files (repeatable; default results/lic_rag/shards/*/accounting.json)")
    for flag, what in (("--graph-accounting-glob", "knowledge-graph builds (results/graphs/*/accounting.json)"),
                       ("--index-manifest-glob", "index manifests with LLM build cost (results/indexes/*/*/manifest.json)")):
        s.add_argument(flag, action="append", default=None, metavar="GLOB", help=f"accounting of the measured {what}")
    s.add_argument("--measured-config", default=None, help="the config of the measured run (default config/config.yaml)")
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
