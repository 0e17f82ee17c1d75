"""Argument types every stage's command line shares (``convrag <stage>`` and each study's
``convrag <study> <stage>``): a study's CLI imports these, never ``convrag.cli``, which imports
every shared stage."""

from __future__ import annotations

import argparse
import json
import os
import shlex


def json_arg(s: str):
    """A JSON command-line value (the rules pass config blocks as one JSON argument)."""
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e


class _Retired(argparse.Action):
    """A decoding flag that ``--sampling`` carries now: an error that says what to write instead."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is gone: decoding settings travel in one JSON argument, "
                     f"--sampling '{{\"temperature\": 0.7, \"top_p\": 1.0, \"max_tokens\": 64}}' "
                     "(convrag.llm.types.Sampling.from_config; the rules pass the config block's values)")


def sampling_arg(parser, required: bool = False, help: str | None = None) -> None:
    """``--sampling`` (JSON ``{temperature, top_p, max_tokens, stop}``: the one carrier of a
    stage's decoding settings, read by ``Sampling.from_config``), and the separate flags it
    replaced (``--temperature``, ``--top-p``, ``--max-tokens``) as errors naming it."""
    parser.add_argument("--sampling", type=json_arg, required=required, default=None if required else {},
                        help=help or "JSON {temperature, top_p, max_tokens, stop} (keys left out: "
                                     "convrag.llm.types.Sampling's defaults)")
    for flag in ("--temperature", "--top-p", "--max-tokens"):
        parser.add_argument(flag, action=_Retired, nargs="?",
                            help="retired: an error that says how to write it in --sampling")


def sampling_flag(block) -> str:
    """A config block's decoding settings as a rule's ``--sampling '<JSON>'`` (shell-quoted; only
    its decoding keys, ``Sampling.settings``): the rule side of the one carrier, whose defaults are
    the schema's."""
    from convrag.llm.types import Sampling

    return "--sampling " + shlex.quote(json.dumps(Sampling.settings(block), sort_keys=True))


def set_threads(n: int | None) -> None:
    """A job's thread budget for the libraries it loads (read by convrag.llm and the retrievers)."""
    if n:
        os.environ["CONVRAG_THREADS"] = str(n)


# Options many stages share, with one meaning everywhere; a stage's own wording (its
# add_argument help, or a study's HELP given to fill_help) comes first.
COMMON_HELP = {
    "out": "the output file this stage writes (the rule's output)",
    "out_dir": "the output folder this stage writes",
    "out_run": "the TREC run file to write",
    "out_queries": "the queries JSONL to write (each turn's query as searched, with any LLM rewrite)",
    "report": "a JSON or Markdown report of the step (counts, skipped items) to write",
    "accounting": "JSON file of this job's LLM calls, tokens and time (the study's accounting table)",
    "threads": "CPU threads for the libraries this job loads (default: the library's own choice)",
    "registry": "the model registry YAML (config/models.yaml or a config's models_registry)",
    "cache": "the LLM cache (SQLite) shared by the workflow's jobs, e.g. results/cache/llm.sqlite",
    "model": "a model name from the registry",
    "judge_model": "registry model of the judge",
    "rewrite_model": "registry model that rewrites each turn's query (policies that rewrite)",
    "rewrite_prompts": "prompt file of the query rewrite",
    "rewrite_max_tokens": "maximum new tokens of a query rewrite (default: the llm_rewrite policy's, "
                          "convrag.rag.policies.REWRITE_MAX_TOKENS; the rules pass the config's rewrite.max_tokens)",
    "retriever_llm": "registry model of an LLM-using retriever (graph retrievers, RAPTOR)",
    "prompts": "the prompt file (YAML, resources/prompts/...)",
    "prompts_dir": "the folder of the judges' prompt files (resources/prompts/<study>)",
    "tasks": "the benchmark's TurnTask records (JSONL)",
    "questions": "the questions file (JSONL Question records)",
    "corpus": "the passage corpus (JSONL)",
    "corpora": "passage corpora (JSONL), one per domain",
    "index_dir": "the retrieval index folder (convrag build-index)",
    "retriever": "a retriever kind (convrag.retrieval.KINDS)",
    "retriever_name": "the retriever's config name (recorded in every row)",
    "retriever_params": "the retriever's params as JSON (config retrievers.<name>.params)",
    "policy": "the query policy (convrag.rag.policies: current, history, rewrite, ...)",
    "domain": "only the tasks of this domain (labels.domain)",
    "top_k": "passages shown to the model per turn",
    "recall_k": "hits kept per query (the run's depth, and the recall cut-off)",
    "seed": "random seed (sampling and any draw)",
    "max_tokens": "maximum new tokens per model call",
    "temperature": "sampling temperature",
    "top_p": "nucleus sampling top_p",
    "sampling": "JSON {temperature, top_p, max_tokens, stop} of the model calls",
    "spec": "the config entry of this input as JSON",
    "files": "JSON raw file name -> local path",
    "name": "the config name of this item",
    "params": "the retriever's or builder's params as JSON",
    "chunk": "which chunk of the items this job runs (0-based)",
    "chunk_size": "items per chunk",
    "runs": "independent runs (repeats) per item",
    "answers": "the answers file (JSONL) to score",
    "verdicts": "JSONL of every judge verdict, written next to the scores",
    "contexts": "the contexts table (Parquet: one row per context with its labels)",
    "items": "the items file (JSONL): one context or response to judge per line",
    "measures": "ir_measures names, e.g. R@5 nDCG@10",
    "epochs": "training epochs",
    "lr": "learning rate",
    "batch_size": "training batch size",
    "max_steps": "stop after this many optimizer steps (default: the epochs decide)",
    "max_history_turns": "earlier turns kept in the prompt (default: all)",
    "strategy": "the history strategy (raw_context, rewrite, llm_summary, rag_summary, ...)",
    "dataset": "the dataset's config name",
    "shards": "the shard sets file (convrag shard)",
    "rung": "the ladder rung's name (worse_labels.slices.<s>.ladder)",
    "answerability": "JSON list of the answerability labels kept (default: all)",
    "sets": "the context sets (rung names, gold, none, control) this job covers",
    "pages": "the generated pages (JSONL, convrag coral pages)",
}


def fill_help(parser, helps: dict | None = None) -> None:
    """Give every option of ``parser`` and its subcommands that has no help text one:
    ``helps["<stage>.<dest>"]``, then ``helps[dest]``, then ``COMMON_HELP[dest]``."""
    helps = helps or {}
    actions = parser._actions if isinstance(parser, argparse.ArgumentParser) else [parser]
    for action in actions:
        if isinstance(action, argparse._SubParsersAction):
            for stage, sub in action.choices.items():
                for a in sub._actions:
                    if isinstance(a, argparse._SubParsersAction):
                        fill_help(a, helps)
                    elif a.help is None:
                        a.help = helps.get(f"{stage}.{a.dest}") or helps.get(a.dest) or COMMON_HELP.get(a.dest)
