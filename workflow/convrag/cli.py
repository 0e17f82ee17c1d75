"""`convrag <stage>`: one entry per workflow stage, so each rule is one shell line and every
stage runs (and is tested) without Snakemake. Shared stages are here; each study adds its own
under ``convrag <study> <stage>`` (``Study.add_cli``). Heavy imports happen inside the
handlers so `convrag --help` stays instant."""

from __future__ import annotations

import argparse
import json
import os
import sys

from convrag.cliargs import fill_help, json_arg, sampling_arg, set_threads  # noqa: F401  (json_arg: the stages' --spec types)
from convrag.errors import ConfigError, ConvragError


# ---- data -----------------------------------------------------------------------------


def cmd_download(a):
    from convrag.data.download import download_file, download_url

    s = a.spec
    if "url" in s:
        download_url(s["url"], a.out, sha256=s.get("sha256"), git_blob=s.get("git_blob"), lock=s.get("lock"))
    else:
        download_file(s["repo_id"], s["filename"], s["revision"], a.out, repo_type=s.get("repo_type", "dataset"),
                      sha256=s.get("sha256"), lock=s.get("lock"))


def cmd_sources(a):
    """Every download of every config given (default: all of config/), with its revision and
    checksum; exit 1 naming the config key of each unpinned one (convrag.sources)."""
    from pathlib import Path

    from convrag.config import REPO_ROOT, load_config, load_configs
    from convrag.downloads import config_downloads, describe, problems

    def read(p: Path) -> dict:
        # a miniature overlay is read laid over its paper config, as `convrag miniature` runs it
        if p.resolve().parent == (REPO_ROOT / "config" / "miniatures").resolve():
            return load_configs([REPO_ROOT / "config" / "studies" / p.name, p])
        return load_config(p)

    if a.prefetch and not a.configs:
        raise ConfigError("--prefetch: name the configs whose models to fetch (e.g. config/studies/lic_rag.yaml)")
    paths = [Path(p) for p in a.configs] or sorted([REPO_ROOT / "config" / "config.yaml",
                                                    *(REPO_ROOT / "config").glob("*/*.yaml")])
    bad, every = [], []
    for p in paths:
        entries = config_downloads(read(p))
        every += entries
        shown = str(p.resolve().relative_to(REPO_ROOT)) if p.resolve().is_relative_to(REPO_ROOT) else str(p)
        print(f"{shown}: {len(entries)} downloads" + ("" if entries else " (generated or packaged data only)"))
        for e in entries:
            print(f"  {describe(e)}  <- {e['key']}")
        bad += [f"{shown}: {x}" for x in problems(entries)]
    for x in bad:
        print(f"UNPINNED {x}", file=sys.stderr)
    if a.prefetch and not bad:
        from convrag.downloads import prefetch_models

        for line in prefetch_models(every):
            print(f"fetched {line}")
    return 1 if bad else 0


def cmd_miniature(a):
    """The paper config of a study run for real, in miniature (convrag.miniature)."""
    from convrag.miniature import _overlay, checksums, run

    if a.checksums:
        for key, digest in checksums((_overlay(a.study)[2].get("serve") or {})).items():
            print(f"{digest}  {key}")
        return 0
    extra = (["--workflow-profile", a.workflow_profile] if a.workflow_profile else []) + list(a.snakemake_args)
    return run(a.study, cores=a.cores, directory=a.directory, extra=extra)


def cmd_list(a):
    """Studies, their targets and the configs that build them, from the study registry."""
    from pathlib import Path

    from convrag.catalogue import catalogue, format_catalogue

    cat = catalogue([Path(p) for p in a.configs] or None)
    print(json.dumps(cat, indent=2) if a.json else format_catalogue(cat))


def version() -> str:
    """The installed distribution's version (pyproject's, through the package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("convrag")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def cmd_prepare_corpus(a):
    from pathlib import Path

    from convrag.data import corpus_loader
    from convrag.records import write_records

    questions, passages, *left_out = corpus_loader(a.spec["kind"])(a.name, a.spec, a.files)
    write_records(Path(a.out_dir) / "corpus.jsonl", passages)
    write_records(Path(a.out_dir) / "questions_all.jsonl", questions)
    print(f"{a.name}: {len(questions)} questions, {len(passages)} passages", file=sys.stderr)
    for counts in left_out:  # what the loader left out (convrag.data: empty passages under `drop`)
        if counts.get("empty_passages_dropped"):
            print(f"{a.name}: {counts['empty_passages_dropped']} passages with empty text left out "
                  f"(corpora.{a.name}.empty_passages: drop): {', '.join(counts['first_empty_passages'])}"
                  f"{' ...' if counts['empty_passages_dropped'] > len(counts['first_empty_passages']) else ''}",
                  file=sys.stderr)


def cmd_benchmark_tasks(a):
    from convrag.data.benchmarks import benchmark_loader
    from convrag.io import write_json
    from convrag.records import write_records

    tasks, report = benchmark_loader(a.spec["kind"]).tasks(a.name, a.spec, a.files)
    write_records(a.out, tasks)
    write_json(a.report, {"benchmark": a.name, "kind": a.spec["kind"], **report})
    print(f"{a.name}: {len(tasks)} tasks", file=sys.stderr)


def cmd_benchmark_corpus(a):
    from convrag.data.benchmarks import benchmark_loader
    from convrag.records import write_records

    from convrag.data.gold import check_gold
    from convrag.io import write_json
    from convrag.records import TurnTask, read_records

    passages, left_out = benchmark_loader(a.spec["kind"]).corpus_with_counts(a.name, a.spec, a.domain, a.files)
    # every gold id of the domain's turns must be in the corpus (convrag.data.gold): checked
    # before the corpus is written, so no index or score is ever built on an unchecked corpus;
    # the report also counts the passages the loader left out (empty_passages: drop)
    gold = check_gold(read_records(a.tasks, TurnTask), (p.doc_id for p in passages), benchmark=a.name,
                      domain=a.domain, allow_missing=bool(a.spec.get("allow_missing_gold")), corpus=a.out)
    gold.update(left_out)
    write_json(a.gold, gold)
    write_records(a.out, passages)
    print(f"{a.name}.{a.domain}: {len(passages)} passages; {gold['gold_ids']} gold ids, "
          f"{gold['missing_ids']} not in the corpus; {gold.get('empty_passages_dropped', 0)} empty passages left out",
          file=sys.stderr)


def cmd_select_questions(a):
    from convrag.data.hipporag import sample_questions
    from convrag.records import Question, read_records, write_records

    qs = read_records(a.questions, Question)
    hops = a.spec.get("hops") or []
    if hops:
        qs = [q for q in qs if q.hops in hops]
    n = a.spec["n_questions"]
    # the reserve (lic_rag.sharding.replace_failed) continues the same seeded order after the
    # first n (a draw is a prefix of one permutation), as far as the pool allows
    extra = max(0, min(a.reserve, len(qs) - n))
    try:
        picked = sample_questions(qs, n + extra, a.spec.get("sample_seed", 0))
    except ConfigError as e:
        raise ConfigError(f"datasets.{a.dataset}.n_questions (hops {hops or 'all'}, from {a.questions}): {e}") from e
    for q in picked:
        q.dataset = a.dataset
    if a.out:
        write_records(a.out, picked[:n])
    if a.reserve_out:
        write_records(a.reserve_out, picked[n:])
        print(f"{a.dataset}: {len(picked) - n} reserve questions (asked for {a.reserve})", file=sys.stderr)


# ---- sharding (lic_rag's SHARDED conditions, cross's sharded delivery) ----------------------


def cmd_shard(a):
    import yaml

    from convrag.io import atomic_open, write_json
    from convrag.rag.jobs import Job
    from convrag.records import Question, read_records
    from convrag.sharding import ShardPrompts, shard_questions, shard_report, shard_variability, shard_with_replacements

    with Job(a.registry, a.cache, a.threads) as job:
        qs = read_records(a.questions, Question)
        prompts = ShardPrompts.from_dict(yaml.safe_load(open(a.prompts)), source=a.source)
        engine = job.engine(a.model, role="sharder")
        if a.reserve is not None:  # lic_rag.sharding.replace_failed: failed shard sets are replaced from the reserve
            reserve = read_records(a.reserve, Question)
            sets, replaced = shard_with_replacements(qs, reserve, engine, prompts, a.settings)
            qs = qs + reserve[:replaced["reserve_tried"]]
        else:
            sets, replaced = shard_questions(qs, engine, prompts, a.settings), None
        first = []
        if a.variability:  # lic_rag.sharding.variability (§A.2): repeated shard sets of the first questions
            var = a.settings.get("variability") or {}
            samples = shard_variability(qs[:var.get("questions", 0)], engine, prompts, a.settings,
                                        var.get("samples", 15))
            first.append((a.variability, lambda p: write_json(p, samples)))
        report = shard_report(sets, qs, replaced)

        def write_report(path):
            with atomic_open(path) as fh:
                fh.write(report)

        job.write({a.out: sets}, a.accounting, first=[*first, (a.report, write_report)], engine=engine)



# ---- retrieval --------------------------------------------------------------------------


def cmd_build_index(a):
    from convrag.rag.jobs import Job
    from convrag.retrieval import build_index, capabilities

    with Job(a.registry, a.cache, a.threads) as job:
        llm = None
        if capabilities(a.retriever).uses_llm:
            if not (a.llm and a.registry):
                raise ConfigError(f"build-index: retriever '{a.retriever}' calls an LLM: give --llm and --registry")
            llm = job.engine(a.llm, role="indexer")
        build_index(a.retriever, a.corpus, a.out_dir, a.params, llm=llm, graph_dir=a.graph_dir)


def cmd_build_graph(a):
    from convrag.rag.jobs import Job
    from convrag.retrieval.graph.openie import build_graph

    with Job(a.registry, a.cache, a.threads) as job:
        engine = job.engine(a.model, role="openie")
        build_graph(a.corpus, a.out_dir, engine, a.params)
        engine.write_accounting(a.accounting)


# ---- models and judges ------------------------------------------------------------------


def cmd_convert_model(a):
    from convrag.llm.convert import convert_gguf
    from convrag.llm.registry import get_spec, load_registry

    spec = get_spec(load_registry(a.registry), a.model)
    folder, gguf = spec.weights_location()
    if not gguf:
        raise ConfigError(f"{spec.where('weights')}: {a.model} has no GGUF weights to convert")
    print(convert_gguf(folder, gguf, out_dir=a.out, dtype=a.dtype or spec.dtype or "float32"))


def cmd_answer(a):
    import yaml

    from convrag.llm.types import Sampling
    from convrag.rag.jobs import Job
    from convrag.rag.replay import ChatPrompt, answer_tasks
    from convrag.records import Passage, TurnTask, read_records
    from convrag.retrieval import capabilities, load_retriever

    with Job(a.registry, a.cache, a.threads) as job:
        tasks = [t for t in read_records(a.tasks, TurnTask) if a.domain is None or t.labels.get("domain") == a.domain]
        tasks = tasks[a.chunk * a.chunk_size:(a.chunk + 1) * a.chunk_size]
        reader = job.engine(a.model, role="reader")
        run = run_queries = corpus = retriever = caps = rewriter = rewrite_prompts = None
        if a.passages == "run":
            from convrag.rag.replay import read_run

            if not (a.run and a.run_queries and a.corpus):
                raise ConfigError("answer: --passages run needs --run, --run-queries and --corpus")
            run, run_queries = read_run(a.run, a.run_queries)
            corpus = {p.doc_id: p for p in read_records(a.corpus, Passage)}
        if a.passages == "retrieved":
            if not (a.retriever and a.index_dir and a.corpus):
                raise ConfigError("answer: --passages retrieved needs --retriever, --index-dir and --corpus")
            caps = capabilities(a.retriever)
            llm = job.engine(a.retriever_llm or a.model, role="retriever") if caps.uses_llm else None
            retriever = load_retriever(a.retriever, a.index_dir, a.retriever_params, llm=llm)
            corpus = {} if caps.closed_book else {p.doc_id: p for p in read_records(a.corpus, Passage)}
            if a.policy == "llm_rewrite":
                if not (a.rewrite_model and a.rewrite_prompts):
                    raise ConfigError("answer: --policy llm_rewrite needs --rewrite-model and --rewrite-prompts")
                rewriter = job.engine(a.rewrite_model, role="rewriter")
                rewrite_prompts = yaml.safe_load(open(a.rewrite_prompts))
        records = answer_tasks(
            tasks, engine=reader, prompt=ChatPrompt(yaml.safe_load(open(a.prompts))),
            sampling=Sampling.from_config(a.sampling), policy=a.policy, passages_from=a.passages,
            retriever=retriever, capabilities=caps, corpus=corpus, top_k=a.top_k, recall_k=a.recall_k,
            runs=a.runs, seed=a.seed, setting={"model": a.model, "retriever": a.retriever_name},
            rewrite_llm=rewriter, rewrite_prompts=rewrite_prompts, run=run, run_queries=run_queries)
        job.write({a.out: records}, a.accounting, tasks=len(tasks), answers=len(records),
                  unanswered=sum(not r["answered"] for r in records))


def cmd_retrieve(a):
    import yaml

    from convrag.rag.jobs import Job
    from convrag.rag.retrieve import retrieve_tasks, write_run
    from convrag.records import TurnTask, read_records
    from convrag.retrieval import capabilities, load_retriever

    with Job(a.registry, a.cache, a.threads) as job:
        tasks = [t for t in read_records(a.tasks, TurnTask)
                 if (a.domain is None or t.labels.get("domain") == a.domain) and (not a.with_qrels or t.gold_docs)]
        llm = rewriter = prompts = None
        if capabilities(a.retriever).uses_llm:
            if not (a.registry and a.retriever_llm):
                raise ConfigError(f"retrieve: retriever '{a.retriever}' calls an LLM: give --registry and --retriever-llm")
            llm = job.engine(a.retriever_llm, role="retriever")
        if a.policy == "llm_rewrite":
            if not (a.registry and a.rewrite_model and a.rewrite_prompts):
                raise ConfigError("retrieve: --policy llm_rewrite needs --registry, --rewrite-model and --rewrite-prompts")
            rewriter = job.engine(a.rewrite_model, role="rewriter")
            prompts = yaml.safe_load(open(a.rewrite_prompts))
        retriever = load_retriever(a.retriever, a.index_dir, a.retriever_params, llm=llm)
        run, records, counts = retrieve_tasks(tasks, retriever, a.policy, a.recall_k, llm=rewriter,
                                              rewrite_prompts=prompts, rewrite_max_tokens=a.rewrite_max_tokens)
        tag = f"{a.retriever_name or a.retriever}-{a.policy}"
        job.write({a.out_queries: records}, a.accounting, first=[(a.out_run, lambda p: write_run(p, run, tag=tag))],
                  **counts)


def cmd_score_retrieval(a):
    from convrag.io import write_parquet
    from convrag.metrics.registry import score_task_runs
    from convrag.records import TurnTask, read_records

    write_parquet(score_task_runs(read_records(a.tasks, TurnTask), a.runs, a.measures, labels=tuple(a.labels)), a.out)


# ---- reports ----------------------------------------------------------------------------


def cmd_target(a):
    from convrag.report.targets import build_target
    from convrag.studies import get_study

    build_target(get_study(a.study), a.name, a.inputs, a.context, a.out_stem)


def cmd_reproduction_plan(a):
    """For every published number of each study of a config: where it will come from in that
    config's grid, or why it cannot (convrag.report.rehearsal); tables rehearsed with synthetic
    scores at the grid's full shape."""
    import tempfile
    from pathlib import Path

    from convrag.config import load_config
    from convrag.report.rehearsal import RESOLVED, check_unambiguous, plan, rehearse, summary_line
    from convrag.report.reproduction import published_path
    from convrag.report.tables import write_table
    from convrag.studies import active_studies

    config = load_config(a.config)
    studies = [s for s in active_studies(config) if not a.study or s.key in a.study]
    if not studies:
        raise ConfigError(f"{a.config}: no active study {' or '.join(a.study) if a.study else ''} to plan")
    without = [s.key for s in studies if not s.has_rehearsal]
    if without and a.study:
        raise ConfigError(f"{', '.join(without)}: no rehearsal yet (Study.rehearsal_inputs): cannot plan")
    with tempfile.TemporaryDirectory(prefix="convrag-rehearsal-") as tmp:
        root = Path(a.out_dir or tmp)
        for study in studies:
            if study.key in without:
                print(f"{study.key}: no rehearsal yet (Study.rehearsal_inputs): not planned")
                continue
            tables = rehearse(study, config, root / study.key, questions=a.questions, runs=a.runs, seed=a.seed)
            df = plan(study, config, tables)
            write_table(df, str(root / study.key / "tables" / "reproduction_plan"),
                        caption=f"Where each published number of {study.key} comes from in {a.config} "
                                f"(rehearsed with synthetic scores, {a.questions} questions x {a.runs} runs per cell).")
            for r in df.itertuples():
                where = f"{r.target} [{r.row}] {r.column}" if r.status == RESOLVED else r.reason
                print(f"{study.key}\t{r.id}\t{r.status}\t{where}")
            print(f"{study.key}: {summary_line(df)}")
            check_unambiguous(df, str(published_path(study.key)))


def cmd_estimate(a):
    from pathlib import Path

    from convrag.config import REPO_ROOT, config_registry, load_config
    from convrag.cost import Throughput, format_report, summarize
    from convrag.studies import active_studies

    config = load_config(a.config)
    if not Path(a.measured).is_dir():
        raise ConfigError(f"--measured {a.measured}: no such folder (the results folder of a measured run)")
    measured = {"results": a.measured, "passage_tokens": a.passage_tokens,
                "config": load_config(a.measured_config or REPO_ROOT / "config" / "config.yaml")}
    tp = Throughput(**{k: v for k, v in (("prefill_mfu", a.prefill_mfu), ("decode_mfu", a.decode_mfu),
                                         ("load_fixed_s", a.load_seconds), ("load_gb_per_s", a.load_gb_per_s))
                       if v is not None})
    studies = active_studies(config)
    work = {s.key: s.estimate(config, measured, tp) for s in studies}
    # a table of zeros would read as "costs nothing": say which study and why instead, unless the
    # study plans no model job at all (then zero is its size: Study.plan)
    empty = [s.key for s in studies if not work[s.key] and s.plan(config)]
    if empty:
        why = {k: " / ".join(dict.fromkeys(getattr(work[k], "notes", []))) or "its Study.estimate gives no work"
               for k in empty}
        raise ConfigError("; ".join(f"{k}: nothing sized ({w})" for k, w in why.items()))
    summary = summarize(work, config_registry(config), tp, a.job_minutes, jobs_per_load=a.jobs_per_load)
    text = json.dumps(summary, indent=2) if a.json else format_report(summary)
    if a.out:
        from convrag.io import atomic_open

        with atomic_open(a.out) as fh:
            fh.write(text + "\n")
    else:
        print(text)
    if summary["over_limit"]:
        raise ConfigError("estimate: jobs over the SLURM time limit in the 'long' scenario (--job-minutes "
                          f"{a.job_minutes:g}):\n" + "\n".join(f"  - {m}" for m in summary["over_limit"]))


def cmd_status(a):
    """The running jobs' progress from their logs (convrag.status); --watch repeats it."""
    import time

    from convrag.status import status

    while True:
        print(status(a.results, a.directory, show_all=a.all, stale_s=a.stale), flush=True)
        if not a.watch:
            return 0
        time.sleep(a.watch)
        print()


# ---- LLM cache bundles -------------------------------------------------------------------


def cmd_cache_export(a):
    from convrag.llm.bundle import export_bundle, summary

    manifest = export_bundle(a.cache, a.trace, a.out)
    print(f"exported {a.out} from {a.cache}: {summary(manifest)}")


def cmd_cache_import(a):
    from convrag.llm.bundle import import_bundle

    n = import_bundle(a.bundle, a.cache)
    print(f"imported {a.bundle} into {a.cache}: {n['entries']} entries, {n['added']} added, "
          f"{n['present']} already present")


# help of the shared stages' options that COMMON_HELP (convrag.cliargs) words too generally
SHARED_HELP = {
    "download.out": "where the downloaded file goes",
    "prepare-corpus.name": "the corpus's config name (corpora.<name>)",
    "prepare-corpus.out_dir": "folder for corpus.jsonl and questions_all.jsonl",
    "benchmark-tasks.name": "the benchmark's config name (benchmarks.<name>)",
    "benchmark-tasks.out": "the TurnTask records (JSONL) to write",
    "benchmark-tasks.report": "JSON report of what was read (counts per domain, skipped turns)",
    "benchmark-corpus.name": "the benchmark's config name (benchmarks.<name>)",
    "benchmark-corpus.spec": "the benchmarks.<name> config entry as JSON",
    "benchmark-corpus.domain": "the domain whose corpus is written",
    "benchmark-corpus.out": "the domain's passages (JSONL) to write",
    "select-questions.dataset": "the dataset's config name (datasets.<name>)",
    "select-questions.spec": "the datasets.<name> config entry as JSON (n_questions, hops, sample_seed)",
    "select-questions.questions": "the corpus's whole question pool (questions_all.jsonl)",
    "shard.questions": "the selected questions (JSONL)",
    "shard.prompts": "the sharding prompt file (resources/prompts/shard.yaml or lic_rag.prompts.shard)",
    "shard.model": "registry model that writes the shards",
    "shard.out": "the shard sets (JSONL) to write",
    "shard.report": "Markdown report of the automatic checks",
    "build-index.corpus": "the passages (JSONL) to index",
    "build-index.params": "the retriever's params as JSON (config retrievers.<name>.params)",
    "build-index.registry": "the model registry (for --llm)",
    "build-index.cache": "the LLM cache (for --llm)",
    "build-graph.corpus": "the passages (JSONL) the graph is built from",
    "build-graph.model": "registry model of the OpenIE extraction",
    "build-graph.params": "the graph's params as JSON (synonym threshold, embedding model, ...)",
    "convert-model.model": "the registry model to convert",
    "answer.prompts": "the answer prompt file",
    "answer.out": "the answers (JSONL) to write",
    "answer.index_dir": "--passages retrieved: the index searched",
    "answer.corpus": "--passages retrieved / run: the passages (JSONL) shown",
    "answer.passages": "the passages shown: retrieved now, a TREC run (--run), the task's reference passages, "
                       "or none",
    "answer.runs": "answers per turn (independent samples)",
    "answer.chunk": "with --chunk-size: which chunk of the tasks this job answers (0-based)",
    "answer.chunk_size": "tasks per chunk (default: all in one)",
    "retrieve.index_dir": "the index searched",
    "score-retrieval.tasks": "the TurnTask records with the qrels",
    "score-retrieval.out": "the per-turn scores (Parquet) to write",
    "target.study": "a study key (convrag list)",
    "target.out_stem": "output path without extension (a table's .csv/.md, a figure's .png/.pdf/.csv/.md)",
    "plan.seed": "seed of the synthetic scores",
    "import.bundle": "the bundle file (convrag cache export)",
}


def build_parser() -> argparse.ArgumentParser:
    from convrag.studies import all_studies

    p = argparse.ArgumentParser(prog="convrag", description=__doc__)
    p.add_argument("--version", action="version", version=f"convrag {version()}",
                   help="print the installed convrag's version and exit")
    sub = p.add_subparsers(dest="stage", required=True, metavar="STAGE")

    def add(name, fn, help):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(fn=fn)
        return sp

    s = add("sources", cmd_sources, "list every download of the configs with its pinned revision and checksum "
            "(resources/sources.yaml); exit 1 on an unpinned one")
    s.add_argument("configs", nargs="*", help="config files (default: config/config.yaml and config/*/*.yaml)")
    s.add_argument("--prefetch", action="store_true",
                   help="also download the weights of every Hugging Face model the configs use into the hub cache "
                        "(HF_HOME) at the commit the jobs load (a login node's step before a cluster run)")

    s = add("list", cmd_list, "every study (from the study registry) with its targets, and the studies and targets "
            "each config builds")
    s.add_argument("configs", nargs="*", help="config files (default: config/config.yaml and config/studies/*.yaml)")
    s.add_argument("--json", action="store_true", help="print the listing as JSON")

    s = add("miniature", cmd_miniature, "run a study's paper config for real, in miniature (config/miniatures/"
            "<study>.yaml laid over config/studies/<study>.yaml), with a loopback download mirror of the shared "
            "samples and a loopback OpenAI-compatible endpoint; last line: 'miniature <study>: executed E of P "
            "rules' (P: the paper config's dry-run); exit 1 when E < P")
    s.add_argument("study", help="lic_rag, mtrag_un, coral, worse_labels or cross")
    s.add_argument("--cores", type=int, default=2, help="Snakemake's --cores (default 2)")
    s.add_argument("--directory", default=None,
                   help="Snakemake's working directory (default: the repository); results under the overlay's "
                        "results_dir there")
    s.add_argument("--checksums", action="store_true",
                   help="only print the sha256 of every file the mirror serves (what the overlay names)")
    s.add_argument("--workflow-profile", default=None, metavar="DIR",
                   help="Snakemake's --workflow-profile (default: profiles/default, the workstation's); e.g. a "
                        "copy of profiles/slurm filled in for your cluster, so the miniature's jobs go through "
                        "SLURM while its loopback servers run here (the SLURM lane does this on one node)")
    s.add_argument("snakemake_args", nargs="*", help="more Snakemake arguments, after --")

    s = add("download", cmd_download, "download one file (Hugging Face dataset repo or URL) and record its sha256")
    s.add_argument("--spec", type=json_arg, required=True,
                   help="JSON {repo_id, revision, repo_type, filename, sha256} or {url, sha256}")
    s.add_argument("--out", required=True)

    s = add("prepare-corpus", cmd_prepare_corpus, "write a corpus and its question pool as common records")
    s.add_argument("--name", required=True)
    s.add_argument("--spec", type=json_arg, required=True, help="the corpora.<name> config entry as JSON")
    s.add_argument("--files", type=json_arg, default={}, help="JSON {questions, corpus} input paths")
    s.add_argument("--out-dir", required=True)

    s = add("benchmark-tasks", cmd_benchmark_tasks, "read a benchmark's conversation turns into TurnTask records")
    s.add_argument("--name", required=True)
    s.add_argument("--spec", type=json_arg, required=True, help="the benchmarks.<name> config entry as JSON")
    s.add_argument("--files", type=json_arg, default={}, help="JSON raw file name -> path")
    s.add_argument("--out", required=True)
    s.add_argument("--report", required=True)

    s = add("benchmark-corpus", cmd_benchmark_corpus, "write one domain's passage corpus of a benchmark")
    s.add_argument("--name", required=True)
    s.add_argument("--spec", type=json_arg, required=True)
    s.add_argument("--domain", required=True)
    s.add_argument("--files", type=json_arg, default={})
    s.add_argument("--tasks", required=True, help="the benchmark's tasks.jsonl: their gold ids are looked up")
    s.add_argument("--out", required=True)
    s.add_argument("--gold", required=True, help="JSON report of the gold-in-corpus check (convrag.data.gold)")

    s = add("select-questions", cmd_select_questions, "draw a reproducible question sample for one dataset")
    s.add_argument("--dataset", required=True)
    s.add_argument("--spec", type=json_arg, required=True)
    s.add_argument("--questions", required=True)
    s.add_argument("--out", default=None, help="the first n_questions of the draw")
    s.add_argument("--reserve", type=int, default=0, help="also draw this many reserve questions, the same seeded "
                   "order after the first n_questions (lic_rag.sharding.replace_failed)")
    s.add_argument("--reserve-out", default=None, help="where the reserve questions go")

    s = add("shard", cmd_shard, "multi-hop questions -> shard sets by an LLM, with automatic checks and a report")
    for k in ("questions", "prompts", "model", "registry", "cache", "out", "report", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--settings", type=json_arg, required=True, help="the sharding settings (model, steps, "
                   "attempts, temperature, max_tokens, fallback, variability) as JSON")
    s.add_argument("--source", default=None, help="source dataset of the prompt pairs (hotpotqa, 2wikimultihopqa, "
                   "musique, miniworld; convrag.sharding.corpus_source)")
    s.add_argument("--reserve", default=None, help="reserve questions (select-questions --reserve-out): failed "
                   "shard sets are replaced from them in order (lic_rag.sharding.replace_failed)")
    s.add_argument("--variability", default=None, help="write the shard-wording variability samples here (JSON; "
                   "settings variability: {questions, samples})")
    s.add_argument("--threads", type=int, default=None)

    s = add("build-index", cmd_build_index, "build one retrieval index for one corpus")
    s.add_argument("--retriever", required=True, help="a retriever kind (convrag.retrieval.KINDS)")
    s.add_argument("--params", type=json_arg, default={})
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
    s.add_argument("--params", type=json_arg, default={})
    s.add_argument("--threads", type=int, default=None)

    s = add("convert-model", cmd_convert_model, "dequantise a registry model's GGUF once into a safetensors HF folder")
    s.add_argument("--model", required=True)
    s.add_argument("--registry", default="config/models.yaml")
    s.add_argument("--out", default=None, help="target folder (default: the model cache, $CONVRAG_MODEL_CACHE)")
    s.add_argument("--dtype", default=None, help="float32 | bfloat16 | float16 (default: the registry dtype)")

    s = add("answer", cmd_answer, "answer one chunk of benchmark turns (TurnTask JSONL) after their recorded "
            "histories: retrieve with a query policy (or use the reference passages), prompt, generate in one batch")
    for k in ("tasks", "model", "prompts", "registry", "cache", "out", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--passages", choices=["retrieved", "run", "reference", "none"], default="retrieved")
    s.add_argument("--domain", default=None, help="only the tasks of this domain (labels.domain)")
    s.add_argument("--run", default=None, help="--passages run: a TREC run of these tasks (convrag retrieve)")
    s.add_argument("--run-queries", default=None, help="--passages run: the run's queries JSONL (recorded)")
    s.add_argument("--policy", default="current", help="query policy (convrag.rag.policies)")
    s.add_argument("--retriever", default=None, help="retriever kind")
    s.add_argument("--retriever-name", default=None, help="the retriever's config name (recorded)")
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--retriever-llm", default=None)
    s.add_argument("--index-dir", default=None)
    s.add_argument("--corpus", default=None)
    s.add_argument("--rewrite-model", default=None)
    s.add_argument("--rewrite-prompts", default=None)
    sampling_arg(s, required=True)
    s.add_argument("--top-k", type=int, default=5)
    s.add_argument("--recall-k", type=int, default=None)
    s.add_argument("--runs", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--chunk", type=int, default=0)
    s.add_argument("--chunk-size", type=int, default=10**9)
    s.add_argument("--threads", type=int, default=None)

    s = add("retrieve", cmd_retrieve, "retrieve for benchmark turns (TurnTask JSONL) with a query policy: one TREC "
            "run and the queries (with any LLM rewrite) per (tasks, retriever, policy)")
    for k in ("tasks", "retriever", "index-dir", "policy", "out-run", "out-queries", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--domain", default=None, help="only the tasks of this domain (labels.domain)")
    s.add_argument("--with-qrels", action="store_true", help="only the tasks with gold passages")
    s.add_argument("--retriever-name", default=None)
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--retriever-llm", default=None)
    s.add_argument("--rewrite-model", default=None)
    s.add_argument("--rewrite-prompts", default=None)
    s.add_argument("--rewrite-max-tokens", type=int, default=None)
    s.add_argument("--recall-k", type=int, default=10)
    s.add_argument("--registry", default=None)
    s.add_argument("--cache", default=None)
    s.add_argument("--threads", type=int, default=None)

    s = add("score-retrieval", cmd_score_retrieval, "score TREC runs per turn with ir_measures into Parquet (one "
            "row per task, run and measure)")
    s.add_argument("--tasks", required=True)
    s.add_argument("--runs", type=json_arg, required=True, help="JSON [{retriever, policy, domain, path}]")
    s.add_argument("--measures", nargs="+", required=True, help="ir_measures names, e.g. R@5 nDCG@10")
    s.add_argument("--labels", nargs="*", default=[], help="task labels copied into every row (a study's breakdowns)")
    s.add_argument("--out", required=True)

    s = add("target", cmd_target, "build one named table or figure of a study")
    s.add_argument("study")
    s.add_argument("name", help="a target name of the study (Study.targets)")
    s.add_argument("--inputs", type=json_arg, required=True, help="JSON artifact name -> path(s)")
    s.add_argument("--context", type=json_arg, default={}, help="JSON settings of the study's targets")
    s.add_argument("--out-stem", required=True)

    s = add("estimate", cmd_estimate, "size every active study of a config (LLM calls, tokens, GPU-hours, SLURM "
            "layout) from a measured run's accounting (see docs/scaling.md)")
    s.add_argument("--config", required=True, help="the config to size, e.g. config/studies/lic_rag.yaml")
    s.add_argument("--measured", default="results", help="the results folder of the measured run (default results)")
    s.add_argument("--measured-config", default=None,
                   help="the config of the measured run (default: the repository's config/config.yaml)")
    s.add_argument("--passage-tokens", type=float, default=None,
                   help="mean tokens per retrieved passage in the target corpora (default: as measured)")
    s.add_argument("--prefill-mfu", type=float, default=None, help="prefill efficiency (default 0.40)")
    s.add_argument("--decode-mfu", type=float, default=None, help="decode efficiency (default 0.15)")
    s.add_argument("--load-seconds", type=float, default=None, help="fixed model start-up per job (default 90)")
    s.add_argument("--load-gb-per-s", type=float, default=None, help="weight loading speed (default 1.0)")
    s.add_argument("--job-minutes", type=float, default=240.0, help="SLURM time limit of a job (default 240)")
    s.add_argument("--jobs-per-load", type=int, default=1,
                   help="consecutive jobs of a kind and model that share one loaded engine on a node (config "
                        "model_server.mode: node; convrag.llm.node): GPU-hours count one load per that many jobs "
                        "(default 1: every job loads its models; profiles/slurm groups 3 jobs to an allocation)")
    s.add_argument("--json", action="store_true", help="print the full estimate as JSON")
    s.add_argument("--out", default=None, help="write to this file instead of stdout")

    s = add("status", cmd_status, "per running job of a workflow: the task, items done of total, rate and ETA, "
            "read from the [progress] lines in <results>/logs; with Snakemake's step count")
    s.add_argument("--results", default="results", help="the run's results folder (config results_dir; default results)")
    s.add_argument("--directory", default=".", help="Snakemake's working directory (for .snakemake/log; default .)")
    s.add_argument("--all", action="store_true", help="also the finished and stopped jobs' last progress")
    s.add_argument("--stale", type=float, default=120.0,
                   help="a job on another host (cluster) counts as running while its log changed within this many "
                        "seconds (default 120)")
    s.add_argument("--watch", type=float, default=0.0, help="print again every this many seconds (Ctrl-C stops)")

    sp = sub.add_parser("reproduction", help="the reproduction of the papers' published numbers")
    rs = sp.add_subparsers(dest="study_stage", required=True, metavar="STAGE")
    s = rs.add_parser("plan", help="for every published number, the target, row and column of a config's grid it will "
                      "be compared with, or why it cannot be (tables rehearsed with synthetic scores, no model)")
    s.set_defaults(fn=cmd_reproduction_plan)
    s.add_argument("--config", required=True, help="a config file (e.g. config/studies/lic_rag.yaml)")
    s.add_argument("--study", nargs="*", default=[], help="only these studies (default: every active one)")
    s.add_argument("--questions", type=int, default=4, help="synthetic questions per cell")
    s.add_argument("--runs", type=int, default=2, help="synthetic runs per question")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out-dir", default=None, help="keep the rehearsed tables and figures here (default: a temporary folder)")

    sp = sub.add_parser("cache", help="export / import the LLM-cache entries of a set of targets (portable bundle)",
                        description="Move the LLM answers that some targets need between results trees: run the "
                        "targets with --config llm_cache='{trace: DIR}', export, import elsewhere, rebuild there with "
                        "--config llm_cache='{replay: strict}' (no model is loaded).")
    # dest study_stage: main() names a failing `convrag cache export` by it
    cs = sp.add_subparsers(dest="study_stage", required=True, metavar="STAGE")
    s = cs.add_parser("export", help="write the cache entries that traced runs used to one bundle file")
    s.set_defaults(fn=cmd_cache_export)
    s.add_argument("--cache", required=True, help="the LLM cache, e.g. results/cache/llm.sqlite")
    s.add_argument("--trace", required=True, action="append", help="a trace folder (llm_cache.trace); repeatable")
    s.add_argument("--out", required=True, help="the bundle file to write (e.g. targets.convrag-cache)")
    s = cs.add_parser("import", help="add a bundle's entries to an LLM cache (checks its hashes; fails on conflicts)")
    s.set_defaults(fn=cmd_cache_import)
    s.add_argument("bundle")
    s.add_argument("--cache", required=True, help="the LLM cache to add to (created if absent)")

    for study in all_studies().values():
        sp = sub.add_parser(study.cli_name, help=f"stages of the {study.key} study", description=study.title)
        study.add_cli(sp.add_subparsers(dest="study_stage", required=True, metavar="STAGE"))
    fill_help(p, SHARED_HELP)  # after the studies' own (Study.add_cli), so theirs come first
    return p


def main(argv: list[str] | None = None) -> int:
    from convrag.lifeline import watch

    watch()  # a job of a local Snakemake run ends when that run does (killed, crashed)
    if argv is None and os.environ.get("CONVRAG_WARM_SOCKET"):  # a job of a local Snakemake run
        from convrag.warm import delegate

        code = delegate(sys.argv[1:])
        if code is not None:
            return code
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest:
        # argparse fills a stage's trailing nargs="*" list (`convrag miniature <study> ... -- <Snakemake
        # arguments>`) only when no option stands between it and the positional before it; with
        # `--cores 2` there, what follows `--` comes back unparsed: it is that list's
        if rest[0] == "--" and hasattr(args, "snakemake_args"):
            args.snakemake_args = [*args.snakemake_args, *rest[1:]]
        else:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        code = args.fn(args)
    except ConvragError as e:
        stage = args.stage + (f" {args.study_stage}" if getattr(args, "study_stage", None) else "")
        print(f"convrag {stage}: error: {e}", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
