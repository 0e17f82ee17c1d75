"""``convrag lic-rag <stage>``: the study's own stages (shard-review, simulate, score); sharding is the
shared ``convrag shard`` (convrag.sharding)."""

from __future__ import annotations

import argparse

from convrag.cliargs import fill_help, json_arg
from convrag.errors import ConfigError


def cmd_shard_review(a):
    from convrag.io import atomic_open
    from convrag.records import Question, ShardSet, read_records, write_records
    from convrag.studies.lic_rag.review import apply_review, export_review, keep_first

    sets, qs = read_records(a.shards, ShardSet), [q for f in a.questions for q in read_records(f, Question)]
    if a.action == "export":
        with atomic_open(a.out) as fh:
            fh.write(export_review(sets, qs))
    else:
        final = apply_review(sets, qs, a.review) if a.review else sets
        write_records(a.out, keep_first(final, a.n_questions) if a.n_questions else final)


def parse_cells(text: str) -> list[tuple[str, str]]:
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

    from convrag.rag.jobs import Job
    from convrag.records import Passage, Question, ShardSet, read_records
    from convrag.retrieval import capabilities, load_retriever
    from convrag.studies.lic_rag import STUDY
    from convrag.studies.lic_rag.labels import Labels
    from convrag.studies.lic_rag.plan import Settings, job_block
    from convrag.resources import read_prompt_file
    from convrag.studies.lic_rag.simulate import ConversationRunner, check_prompts

    block = job_block(a.settings)
    settings = Settings.from_block(block)
    size = block["chunk_size"]
    caps = capabilities(a.retriever)
    labelling = [a.classifier_model, a.classifier_prompts, a.judge_model, a.judge_prompts]
    if any(labelling) and not all(labelling):
        raise ConfigError("simulate: give --classifier-model/--classifier-prompts and --judge-model/--judge-prompts "
                          "together (or none of them: the conversations are then not labelled)")
    with Job(a.registry, a.cache, a.threads) as job:
        shardsets = {s.qid: s for s in read_records(a.shards, ShardSet)}
        # the dataset's questions, then its reserve (sharding.replace_failed): replacements that passed are simulated
        questions = [q for f in a.questions for q in read_records(f, Question)
                     if shardsets.get(q.qid) and shardsets[q.qid].passed]
        chunk = questions[a.chunk * size:(a.chunk + 1) * size]
        shards = {q.qid: [s["text"] for s in shardsets[q.qid].shards] for q in chunk}
        passages = {} if caps.closed_book else {p.doc_id: p for p in read_records(a.corpus, Passage)}
        # the grid's thinking switch for this model (Qwen3's enable_thinking), its retriever role too
        think = None if a.reasoning is None else {"enable_thinking": a.reasoning == "on"}
        assistant = job.engine(a.model, role="assistant", template_kwargs=think)
        user = job.engine(a.user_model, role="user_simulator")
        if all(labelling):
            classifier = job.engine(a.classifier_model, role="classifier")
            judge = job.engine(a.judge_model, role="judge")
        r_llm = a.retriever_llm or a.model
        llm = job.engine(r_llm, role="retriever", template_kwargs=think if r_llm == a.model else None) \
            if caps.uses_llm else None
        retriever = load_retriever(a.retriever, a.index_dir, a.retriever_params, llm=llm)
        runner = ConversationRunner(
            cells=a.cells, retriever=retriever, retriever_name=a.retriever_name, capabilities=caps,
            model_name=a.model, user_model_name=a.user_model, dataset=a.dataset, passages=passages,
            assistant_engine=assistant, user_engine=user, settings=settings,
            prompts=read_prompt_file(a.prompts, check_prompts, "assistant prompts"), retriever_engine=llm,
        )
        labels = Labels({(q.dataset, q.qid): q for q in chunk}, classifier, yaml.safe_load(open(a.classifier_prompts)),
                        judge, yaml.safe_load(open(a.judge_prompts)), block["classifier"]["max_tokens"],
                        block["judge"]["max_tokens"]) if all(labelling) else None
        # API roles overlap the GPU's work where they can (ConversationRunner.run)
        by_cell = runner.run(chunk, shards, labels=labels, overlap=None if a.overlap == "auto" else False)
        cells = {f"{c}_{p}": {"conversations": len(v), "unanswered_turns": sum(x.n_unanswered_turns for x in v),
                              **runner.usage.get(f"{c}_{p}", {})}
                 for (c, p), v in by_cell.items()}
        job.write({f"{a.out_dir}/{cond}_{pol}/chunk{a.chunk}.jsonl": convs for (cond, pol), convs in by_cell.items()},
                  a.accounting, extra={"cells": cells}, conversations=sum(len(v) for v in by_cell.values()),
                  questions=len(chunk), cells=len(by_cell), study_version=STUDY.version,
                  unanswered_turns=sum(c.n_unanswered_turns for v in by_cell.values() for c in v))


def cmd_score(a):
    from convrag.io import write_parquet
    from convrag.studies.lic_rag.score import score_conversations

    convs, turns = score_conversations(a.conversations, a.questions, a.recall_k)
    write_parquet(convs, a.out)
    write_parquet(turns, a.out_turns)


# help of the options below that convrag.cliargs.COMMON_HELP words too generally ("stage.dest" or "dest")
HELP = {
    "shard-review.action": "export: write the review file; apply: read an edited one back",
    "shard-review.shards": "the shard sets (convrag shard)",
    "shard-review.out": "export: the review file to write; apply: the reviewed shard sets to write",
    "simulate.model": "registry model of the assistant",
    "simulate.user_model": "registry model of the simulated user",
    "simulate.prompts": "the assistant's prompt file",
    "simulate.out_dir": "folder of the conversations (one JSONL per cell)",
    "simulate.chunk": "which chunk of the dataset's questions this job simulates (0-based)",
    "score.conversations": "the simulated conversations (JSONL), every cell",
    "score.questions": "the questions files the conversations came from",
    "score.out": "the per-conversation scores (Parquet) to write",
    "score.out_turns": "the per-turn scores (Parquet) to write",
}


def add_cli(sub) -> None:
    def add(name, fn, help):
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(fn=fn)
        return sp

    s = add("shard-review", cmd_shard_review, "export shard sets to an editable review file, or apply an edited one")
    s.add_argument("action", choices=["export", "apply"])
    s.add_argument("--shards", required=True)
    s.add_argument("--questions", nargs="+", required=True, help="questions files (with the reserve, when on)")
    s.add_argument("--review", default=None, help="apply: the edited review file (none: copy the shards as they are)")
    s.add_argument("--n-questions", type=int, default=None,
                   help="apply: keep at most this many passed sets, the first in file order (the dataset's n_questions)")
    s.add_argument("--out", required=True)

    s = add("simulate", cmd_simulate, "simulate one chunk of conversations for every cell of one retriever (batched "
            "per turn; API roles overlap a local assistant's batches), label every assistant turn and judge every "
            "final answer")
    s.add_argument("--questions", nargs="+", required=True, help="questions files: the dataset's, then its reserve "
                   "(sharding.replace_failed)")
    for k in ("shards", "corpus", "index-dir", "retriever", "retriever-name", "prompts", "dataset",
              "model", "user-model", "registry", "cache", "out-dir", "accounting"):
        s.add_argument(f"--{k}", required=True)
    for k in ("classifier-model", "classifier-prompts", "judge-model", "judge-prompts"):
        s.add_argument(f"--{k}", default=None, help="label turns and judge answers after the simulation (all four)")
    s.add_argument("--cells", type=parse_cells, required=True, help="CONDITION:POLICY,... e.g. FULL:none,SHARDED:history")
    s.add_argument("--retriever-llm", default=None, help="registry model of an LLM-using retriever (default: --model)")
    s.add_argument("--retriever-params", type=json_arg, default={})
    s.add_argument("--settings", type=json_arg, required=True, help="the job's part of the lic_rag block as JSON")
    s.add_argument("--chunk", type=int, default=0)
    s.add_argument("--reasoning", choices=["on", "off"], default=None,
                   help="the assistant model's thinking switch (chat template enable_thinking; default: its registry entry)")
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--overlap", choices=["auto", "off"], default="auto",
                   help="auto: an API user simulator's calls (and API retrieval and labels) overlap a local "
                        "assistant's batches, in two cohorts of conversations; off: every turn in lockstep "
                        "(the same conversations)")

    s = add("score", cmd_score, "score conversations (EM/F1 per turn, BEST, recall, categories, judge, dependency "
            "order) into Parquet")
    s.add_argument("--conversations", nargs="+", required=True)
    s.add_argument("--questions", nargs="+", required=True)
    s.add_argument("--recall-k", type=int, required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--out-turns", required=True)
    fill_help(sub, HELP)

