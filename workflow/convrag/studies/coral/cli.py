"""``convrag coral <stage>``: the study's own stages (pages, flows, contextualise, answer, evaluate, ...)."""

from __future__ import annotations

from pathlib import Path

from convrag.cliargs import fill_help, json_arg, sampling_arg, set_threads


def cmd_pages(a):
    from convrag.studies.coral.world import page_records
    from convrag.io import write_jsonl

    write_jsonl(a.out, page_records(a.name, a.world))


def cmd_flows(a):
    from convrag.io import read_jsonl, write_json, write_jsonl
    from convrag.studies.coral.construct import read_trees, sample_flows

    flows, report = sample_flows(read_trees(read_jsonl(a.pages)), a.samplers, a.turns, a.long_share, a.seed)
    write_jsonl(a.out, flows)
    write_json(a.report, report)


def cmd_contextualise(a):
    from convrag.io import read_jsonl, write_json
    from convrag.llm.types import Sampling
    from convrag.rag.jobs import Job
    from convrag.studies.coral.construct import read_trees
    from convrag.studies.coral.contextualise import build_conversations, load_prompts

    with Job(a.registry, a.cache, a.threads) as job:
        pages = read_jsonl(a.pages)
        sampling = Sampling.from_config({"stop": ["\n"], **a.sampling})  # one line per question
        engine = job.engine(a.model, role="contextualiser")
        tasks, report = build_conversations(read_trees(pages), read_jsonl(a.flows), engine, load_prompts(a.prompts),
                                            ref_to_doc={p["page_id"]: p["refs"] for p in pages},
                                            sampling=sampling, seed=a.seed, max_tries=a.tries)
        if a.cleaning:  # §3.1's filters on the citations (convrag.studies.coral.cleaning)
            from convrag.errors import ConfigError
            from convrag.records import Passage, read_records
            from convrag.studies.coral.cleaning import clean_tasks

            if not a.corpus:
                raise ConfigError("coral contextualise: --cleaning needs --corpus (the cited passages' texts)")
            tasks, report["cleaning"] = clean_tasks(tasks, {p.doc_id: p.text for p in read_records(a.corpus, Passage)},
                                                    **a.cleaning)
        job.write({a.out: tasks}, a.accounting, first=[(a.report, lambda p: write_json(p, report))])


def _framework_passages(a, tasks, summaries):
    """P_k = R(f(H_k), q_k) of the paper's framework (CORAL §4): (task id -> shown passages,
    task id -> retrieval query, report). ``--retrieval shared`` shows the configured run for every
    strategy; ``strategy`` searches the index with the strategy's own query, except the rewrite
    strategy, whose query is the rewrite its run (``--strategy-run``) already searched with."""
    from convrag.rag.replay import ranked_passages, read_run, shown_passages
    from convrag.records import Passage, read_records
    from convrag.studies.coral.framework import retrieval_queries

    if a.retrieval == "shared" or a.strategy_run:
        run_path, q_path = (a.run, a.run_queries) if a.retrieval == "shared" else (a.strategy_run, a.strategy_queries)
        _, queries = read_run(run_path, q_path)
        return shown_passages(tasks, run_path, q_path, a.corpus, a.top_k), queries, {"searched": False, "run": run_path}
    if not (a.index_dir and a.retriever):
        from convrag.errors import ConfigError

        raise ConfigError(f"coral answer: strategy {a.strategy!r} retrieves with its own query: give --index-dir and "
                          "--retriever (or --strategy-run)")
    from convrag.retrieval import load_retriever

    texts = retrieval_queries(tasks, a.strategy, summaries=summaries, max_history_turns=a.max_history_turns)
    hits = load_retriever(a.retriever, a.index_dir, a.retriever_params).search(texts, a.top_k)
    run = {t.task_id: {d: float(s) for d, s in h} for t, h in zip(tasks, hits)}
    passages = ranked_passages(tasks, run, {p.doc_id: p for p in read_records(a.corpus, Passage)}, a.top_k)
    return passages, {t.task_id: q for t, q in zip(tasks, texts)}, {"searched": True, "queries": len(texts)}


def cmd_answer(a):
    from convrag.io import write_json
    from convrag.llm.types import Sampling
    from convrag.rag.jobs import Job
    from convrag.records import TurnTask, read_records
    from convrag.studies.coral.framework import compress, compression_label
    from convrag.studies.coral.generate import answer, at_turn, load_prompts, summaries

    with Job(a.registry, a.cache, a.threads) as job:
        tasks = read_records(a.tasks, TurnTask)
        if a.at_turn is not None:  # Figure 4: one turn of a seeded random sample of the conversations that reach it
            tasks = at_turn(tasks, a.at_turn, a.conversations, seed=a.sample_seed)
        prompts, sampling = load_prompts(a.prompts), Sampling.from_config(a.sampling)
        reader = job.engine(a.model, role="reader")
        summariser = job.engine(a.summary_model, role="summariser") if a.summary_model else None
        summary_map = summary_report = None
        if a.strategy == "llm_summary":  # before retrieval: the summary is part of the query
            summary_map, summary_report = summaries(summariser or reader, tasks, prompts, sampling,
                                                    a.max_history_turns, seed=a.seed)
        passages, queries, retrieval = _framework_passages(a, tasks, summary_map)
        if a.strategy == "rewrite" and a.retrieval == "strategy":  # the rewrite it retrieved with
            from convrag.studies.coral.framework import asked_rewrites

            tasks = asked_rewrites(tasks, queries)
        compression = None
        if a.compress_model:  # f_p
            import yaml

            with open(a.compress_prompts, encoding="utf-8") as fh:
                cprompts = yaml.safe_load(fh)
            shown = {t.task_id: [dict(p) for p in _as_dicts(passages[t.task_id])] for t in tasks}
            from convrag.studies.coral.framework import COMPRESS_MAX_TOKENS

            budget = a.compress_max_tokens or COMPRESS_MAX_TOKENS
            passages, compression = compress(job.engine(a.compress_model, role="compressor"), queries, shown, cprompts,
                                             Sampling(max_tokens=budget), seed=a.seed)
        records, report = answer(reader, tasks, passages, a.strategy, prompts, sampling=sampling, seed=a.seed,
                                 max_history_turns=a.max_history_turns, summary_engine=summariser,
                                 summaries_by_task=summary_map, summary_report=summary_report)
        for r in records:
            r.update(retrieval=a.retrieval_label or a.retrieval, retrieval_query=queries.get(r["task_id"]),
                     compression=compression_label(a.compress_model))
        report.update(retrieval={**retrieval, "label": a.retrieval_label or a.retrieval},
                      compression={"model": a.compress_model, **(compression or {})})
        if a.at_turn is not None:
            report["selection"] = {"turn": a.at_turn, "conversations_asked": a.conversations, "seed": a.sample_seed,
                                   "conversations": len({t.conversation_id for t in tasks}),
                                   "conversation_ids": sorted({t.conversation_id for t in tasks})}
        job.write({a.out: records}, a.accounting, first=[(a.report, lambda p: write_json(p, report))])


def _as_dicts(passages):
    from convrag.records import Passage

    return [{"id": p.doc_id, "title": p.title or "", "text": p.text} if isinstance(p, Passage) else p
            for p in passages]


def cmd_evaluate(a):
    from convrag.io import read_jsonl, write_json, write_jsonl, write_parquet
    from convrag.metrics.citation import TRUE_T5, llm_entail, load_nli_prompts, t5_entail
    from convrag.rag.jobs import Job, write_outputs
    from convrag.records import TurnTask, read_records
    from convrag.studies.coral.evaluate import score_answers

    with Job(a.registry, a.cache, a.threads) as job:
        if a.nli == "true_t5":  # the paper's NLI model (ALCE's TRUE-T5), outside the LLM registry
            entail, nli_name = t5_entail(TRUE_T5), TRUE_T5
        else:
            judge = job.engine(a.nli_model, role="judge")
            entail, nli_name = llm_entail(judge, load_nli_prompts(a.prompts_dir), a.nli_max_tokens), a.nli_model
        records, task_list = read_jsonl(a.answers), read_records(a.tasks, TurnTask)
        df, summary = score_answers(records, task_list, entail,
                                    at_most_citations=a.at_most_citations, first_line=a.first_line)
        df = df.assign(model=a.model, strategy=a.strategy, nli_model=nli_name)
        verdicts = list(getattr(entail, "verdicts", []))
        if a.compare_model:
            from convrag.resources import read_prompt_file
            from convrag.studies.coral.analyses import JUDGE_COLUMN
            from convrag.studies.coral.judges import PROMPT_FILE, check_pairwise_prompts, compare

            by_id = {t.task_id: t for t in task_list}
            ts = [by_id[r["task_id"]] for r in records]
            questions = [(t.rewrite or t.question) for t in ts]
            goldens = [t.reference_answers[0] if t.reference_answers else None for t in ts]
            prompts = read_prompt_file(Path(a.prompts_dir) / PROMPT_FILE, check_pairwise_prompts, "pairwise prompts")
            # the compare model, then Figure 5's other judges on the same pairs with the same prompt
            for j in [a.compare_model, *a.judges]:
                comparer = job.engine(j, role="pairwise_judge" if j == a.compare_model else f"pairwise_judge:{j}")
                outcomes, pair_verdicts, counts = compare(records, questions, goldens, comparer, prompts,
                                                          a.compare_max_tokens)
                if j == a.compare_model:
                    df = df.assign(comparison=outcomes, compare_model=j)
                    summary["comparison"] = counts
                else:
                    df[f"{JUDGE_COLUMN}{j}"] = outcomes
                    summary[f"comparison:{j}"] = counts
                    pair_verdicts = [{**v, "judge_model": j} for v in pair_verdicts]
                verdicts += pair_verdicts
        acc = job.accounting(**summary, nli=entail.summary() if hasattr(entail, "summary") else {"model": nli_name})
        write_outputs([(a.verdicts, lambda p: write_jsonl(p, verdicts)),
                       (a.accounting, lambda p: write_json(p, acc)), (a.out, lambda p: write_parquet(df, p))])


def _dense_tasks(a):
    """The turns of a retrieval job and the dense retriever whose index it searches."""
    from convrag.errors import ConfigError
    from convrag.records import TurnTask, read_records
    from convrag.retrieval import load_retriever

    tasks = [t for t in read_records(a.tasks, TurnTask) if a.domain is None or t.labels.get("domain") == a.domain]
    retriever = load_retriever("dense", a.index_dir, a.retriever_params)
    if not hasattr(retriever, "search_vectors"):
        raise ConfigError(f"{a.index_dir}: not a dense index (session encoders and LLM4CS search query vectors)")
    return tasks, retriever


def cmd_train_session(a):
    from convrag.records import Passage, TurnTask, read_records
    from convrag.retrieval.conv_dense import examples_from_tasks, train_session_encoder

    set_threads(a.threads)
    passages = {p.doc_id: p for p in read_records(a.corpus, Passage)}
    examples, report = examples_from_tasks(read_records(a.tasks, TurnTask), passages, a.max_turns)
    train_session_encoder(examples, style=a.style, base_model=a.base_model, out_dir=a.out, epochs=a.epochs,
                          batch_size=a.batch_size, lr=a.lr, seed=a.seed, max_steps=a.max_steps,
                          query_prefix=a.query_prefix, temperature=a.temperature,
                          extra={"trained_on": a.trained_on, "max_turns": a.max_turns, "examples": report})


def cmd_session_retrieve(a):
    from convrag.rag.jobs import Job
    from convrag.rag.retrieve import write_run
    from convrag.studies.coral.conversational import session_policy, session_runs

    with Job(threads=a.threads) as job:
        tasks, retriever = _dense_tasks(a)
        policy = session_policy(a.name)
        run, records, counts = session_runs(tasks, retriever, a.encoder, a.recall_k, policy, a.max_turns)
        job.write({a.out_queries: records}, a.accounting,
                  first=[(a.out_run, lambda p: write_run(p, run, tag=policy))], **counts)


def cmd_llm4cs_retrieve(a):
    import yaml

    from convrag.llm.types import Sampling
    from convrag.rag.jobs import Job
    from convrag.rag.retrieve import write_run
    from convrag.studies.coral.conversational import llm4cs_generate, llm4cs_policy, llm4cs_variant_runs

    with Job(a.registry, a.cache, a.threads) as job:
        tasks, retriever = _dense_tasks(a)
        sampling = Sampling.from_config({"stop": ["\n"], **a.sampling})  # one line per rewrite
        engine = job.engine(a.model, role="rewriter")
        with open(a.prompts, encoding="utf-8") as fh:
            prompts = yaml.safe_load(fh)
        variant_prompts = {}
        if a.prompting != "rew":
            from convrag.resources import read_prompt_file
            from convrag.studies.coral.conversational import check_llm4cs_prompts

            variant_prompts = read_prompt_file(a.llm4cs_prompts, check_llm4cs_prompts, "LLM4CS prompts")
        policy = llm4cs_policy(a.prompting, a.aggregation)
        generated, fallbacks = llm4cs_generate(engine, tasks, prompts, variant_prompts, a.prompting, a.aggregation,
                                               a.n, sampling, a.seed)
        run, records, counts = llm4cs_variant_runs(tasks, retriever, generated, a.aggregation, a.recall_k, policy,
                                                   fallbacks)
        job.write({a.out_queries: records}, a.accounting,
                  first=[(a.out_run, lambda p: write_run(p, run, tag=policy))], **counts, n=a.n,
                  prompting=a.prompting, aggregation=a.aggregation)


# help of the options below that convrag.cliargs.COMMON_HELP words too generally ("stage.dest" or "dest")
HELP = {
    "sft.role": "what is fine-tuned: the query rewriter (golden rewrites) or the generator (cited responses)",
    "sft.no_gradient_checkpointing": "keep every activation (faster, more memory) instead of recomputing them",
    "pages.out": "the pages (JSONL, one page a line) to write",
    "flows.long_share": "share of a long-flow sampler's conversations drawn with 11-20 turns instead of 6-10 "
                        "(default 0.2, the paper's 400 of 2,000)",
    "flows.out": "the sampled conversation flows (JSONL) to write",
    "contextualise.flows": "the sampled conversation flows (convrag coral flows)",
    "contextualise.model": "registry model that writes the questions",
    "contextualise.tries": "attempts per LLM step before the item counts as failed (each try a new sample)",
    "contextualise.out": "the conversations as TurnTasks (JSONL) to write",
    "answer.run": "TREC run whose top-k passages are shown",
    "answer.run_queries": "the run's queries JSONL (recorded)",
    "answer.model": "registry model of the generator",
    "answer.out": "the answers (JSONL) to write",
    "compress_prompts": "prompt file of the passage compression (f_p)",
    "compress_max_tokens": "maximum new tokens of a compressed passage",
    "strategy_queries": "retrieval strategy: the queries JSONL of --strategy-run (recorded)",
    "evaluate.model": "the generator whose answers are scored (recorded in every row)",
    "evaluate.nli_model": "registry model of the LLM entailment judge (--nli llm)",
    "nli_max_tokens": "maximum new tokens of an entailment reply",
    "at_most_citations": "citations counted per statement (ALCE's default 3)",
    "compare_max_tokens": "maximum new tokens of a win / draw / lose reply",
    "evaluate.out": "the scores (Parquet) to write",
    "train-session.tasks": "the training turns (TurnTasks JSONL)",
    "train-session.corpus": "the passages (JSONL) of the training turns' gold and negatives",
    "train-session.base_model": "the ad-hoc dense encoder the session encoder starts from",
    "train-session.style": "kd: match the ad-hoc encoder's embedding of the golden rewrite; contrastive: "
                           "Conv-ANCE style, gold passage against in-batch negatives",
    "train-session.out": "folder of the trained encoder",
    "query_prefix": "text put before every encoded query (the encoder's query prefix)",
    "session-retrieve.max_turns": "history entries kept in a session (default: the encoder's training setting)",
    "llm4cs-retrieve.n": "LLM samples (rewrites, and responses for rtr / rar) per turn",
    "llm4cs-retrieve.prompting": "LLM4CS's prompting: rew (rewrite), rtr (rewrite, then a response), rar "
                                 "(rewrite and response together)",
    "llm4cs-retrieve.aggregation": "how the samples become one query vector: maxprob (one greedy sample), sc "
                                   "(self-consistency), mean (of every sample)",
    "llm4cs-retrieve.model": "registry model that writes the rewrites",
}


def add_cli(sub) -> None:
    from convrag.studies.coral.sft import add_sft_cli

    add_sft_cli(sub)
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
    sampling_arg(s, required=True, help="JSON {temperature, top_p, max_tokens} (coral.contextualise's; one line each)")
    s.add_argument("--tries", type=int, default=5)
    s.add_argument("--cleaning", type=json_arg, default=None,
                   help='JSON {"min_words", "max_non_english", "min_recall"}: the §3.1 filters (needs --corpus)')
    s.add_argument("--corpus", default=None, help="with --cleaning: the world's passages JSONL")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("answer", help="answer every turn with cited passages under one history strategy (Table 3)")
    s.set_defaults(fn=cmd_answer)
    for k in ("tasks", "run", "run-queries", "corpus", "prompts", "model", "strategy", "registry", "cache", "out",
              "report", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--top-k", type=int, default=5)
    sampling_arg(s)
    s.add_argument("--max-history-turns", type=int, default=None)
    s.add_argument("--at-turn", type=int, default=None, help="answer only this turn (1-based; Figure 4)")
    s.add_argument("--conversations", type=int, default=50, help="with --at-turn: a seeded random sample of n of the "
                                                                 "conversations that reach the turn")
    s.add_argument("--sample-seed", type=int, default=0, help="with --at-turn: the sample's seed")
    s.add_argument("--retrieval", choices=("strategy", "shared"), default="shared",
                   help="strategy: the strategy's own query retrieves (the paper's P_k = R(f(H_k), q_k)); shared: "
                        "--run's passages for every strategy")
    s.add_argument("--strategy-run", default=None, help="retrieval strategy: the run retrieved with this strategy's "
                                                        "query (the rewrite strategy's rewrite run)")
    s.add_argument("--strategy-queries", default=None)
    s.add_argument("--index-dir", default=None, help="retrieval strategy: the index the strategy's query searches")
    s.add_argument("--retriever", default=None, help="that index's retriever kind")
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--retrieval-label", default=None, help="Table 3's retrieval column")
    s.add_argument("--compress-model", default=None, help="f_p: the registry model that compresses each passage")
    s.add_argument("--compress-prompts", default=None)
    s.add_argument("--compress-max-tokens", type=int, default=None,
                   help="default: convrag.studies.coral.framework.COMPRESS_MAX_TOKENS (128)")
    s.add_argument("--summary-model", default=None, help="llm_summary: the registry model that summarises")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("evaluate", help="BLEU-1, ROUGE-L, ALCE citation recall / precision and win / draw / "
                                                 "lose against the golden response of one answers file")
    s.set_defaults(fn=cmd_evaluate)
    for k in ("tasks", "answers", "model", "strategy", "nli-model", "registry", "cache", "prompts-dir", "out",
              "verdicts", "accounting"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--nli", choices=("llm", "true_t5"), default="llm",
                   help="entailment by the --nli-model LLM prompt, or by TRUE-T5 as ALCE (the paper config)")
    s.add_argument("--nli-max-tokens", type=int, default=None, help="default: the nli_entailment judge's own (8)")
    s.add_argument("--at-most-citations", type=int, default=3)
    s.add_argument("--first-line", action="store_true", help="score only the first line of a response (ALCE)")
    s.add_argument("--compare-model", default=None, help="registry model of the win / draw / lose judge (none: "
                                                          "no comparison)")
    s.add_argument("--compare-max-tokens", type=int, default=None, help="default: the pairwise judge's own (4)")
    s.add_argument("--judges", nargs="*", default=[], help="with --compare-model: other registry models that judge "
                                                          "the same pairs (Figure 5's judge comparison)")
    s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("train-session", help="train a conversational dense (session) encoder, KD or Conv-ANCE "
                                             "style, on top of the ad-hoc dense encoder (Table 2)")
    s.set_defaults(fn=cmd_train_session)
    for k in ("tasks", "corpus", "base-model", "out"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--style", choices=("kd", "contrastive"), required=True)
    s.add_argument("--trained-on", required=True, help="what the training turns are, recorded for Table 2")
    s.add_argument("--query-prefix", default="")
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--lr", type=float, default=2e-5)
    s.add_argument("--max-steps", type=int, default=None)
    s.add_argument("--max-turns", type=int, default=None, help="history entries kept in a session (default: all)")
    s.add_argument("--temperature", type=float, default=0.05, help="contrastive logits' temperature")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)

    def dense_run_args(s):
        for k in ("tasks", "index-dir", "out-run", "out-queries", "accounting"):
            s.add_argument(f"--{k}", required=True)
        s.add_argument("--retriever-params", type=json_arg, default={})
        s.add_argument("--domain", default=None)
        s.add_argument("--recall-k", type=int, default=100)
        s.add_argument("--threads", type=int, default=None)

    s = sub.add_parser("session-retrieve", help="search the dense index with a trained session encoder's "
                                                "embedding of each turn's session (Table 2)")
    s.set_defaults(fn=cmd_session_retrieve)
    dense_run_args(s)
    s.add_argument("--encoder", required=True, help="the trained encoder's folder")
    s.add_argument("--name", required=True, help="the encoder's config name (the run's policy: session_<name>)")
    s.add_argument("--max-turns", type=int, default=None)

    s = sub.add_parser("llm4cs-retrieve", help="LLM4CS: an LLM's rewrites (and responses) per turn, "
                                               "aggregated into one query vector searched in the dense index "
                                               "(Table 2)")
    s.set_defaults(fn=cmd_llm4cs_retrieve)
    dense_run_args(s)
    for k in ("model", "registry", "cache", "prompts"):
        s.add_argument(f"--{k}", required=True)
    s.add_argument("--n", type=int, default=5)
    s.add_argument("--prompting", choices=("rew", "rtr", "rar"), default="rew")
    s.add_argument("--aggregation", choices=("maxprob", "sc", "mean"), default="mean")
    s.add_argument("--llm4cs-prompts", default=None, help="RTR's response and RAR's prompts (rtr, rar)")
    sampling_arg(s, required=True, help="JSON {temperature, top_p, max_tokens} (coral.llm4cs's, per rewrite)")
    s.add_argument("--seed", type=int, default=0)
    fill_help(sub, HELP)
