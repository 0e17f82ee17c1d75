"""``convrag mtrag-un <stage>``: the study's own stages."""

from __future__ import annotations

from convrag.cliargs import fill_help, json_arg, set_threads


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
                                           bertscore_config(a.bertscore), a.prompt_files)
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
    s.add_argument("--prompt-files", type=json_arg, default={},
                   help="JSON judge -> prompt file replacing the project's (the user's, or an adapted official one)")
    s.add_argument("--bertscore", type=json_arg, default="offline", help='JSON: "paper", "offline" or a dict')
    s.add_argument("--threads", type=int, default=None)


def cmd_official_prompt(a):
    """Download one of IBM's judge prompt files at the pinned commit and adapt it (all or nothing)."""
    import tempfile

    import yaml

    from convrag.data.download import download_url
    from convrag.io import atomic_open
    from convrag.judges.official import adapt
    from convrag.sources import github_file
    from convrag.studies.mtrag_un.judges import OFFICIAL, OFFICIAL_REPO

    spec = OFFICIAL[a.judge]
    src = github_file(OFFICIAL_REPO, a.revision, spec.file)
    with tempfile.TemporaryDirectory() as tmp:
        local = a.source
        if not local:  # checked against the blob id and sha256 of resources/sources.yaml, or --sha256
            local = f"{tmp}/{spec.file.rsplit('/', 1)[-1]}"
            download_url(src["url"], local, sha256=a.sha256 or src["sha256"],
                         git_blob=None if a.sha256 else src["git_blob"])
        prompts = adapt(local, spec, source=src["url"])
    with atomic_open(a.out) as fh:
        if a.sha256:  # not the pinned file: a stand-in served at its URL (a miniature's)
            prompts["official"]["stand_in_sha256"] = a.sha256
            fh.write(f"# {a.judge} judge: adapted from a STAND-IN for {src['url']} (sha256 {a.sha256}, not the pinned "
                     "official file: not IBM's prompt)\n")
        else:
            fh.write(f"# {a.judge} judge: IBM's official prompt, adapted from {src['url']} (not part of this repository)\n")
        yaml.safe_dump(prompts, fh, sort_keys=False, allow_unicode=True, width=1000)


# help of the options below that convrag.cliargs.COMMON_HELP words too generally ("stage.dest" or "dest")
HELP = {
    "official-prompt.judge": "which official judge prompt",
    "official-prompt.out": "the adapted prompt file (YAML) to write",
    "evaluate.model": "the model whose answers are scored (recorded in every row)",
    "evaluate.setting": "the generation setting of the answers (reference or rag; recorded, and conditions the "
                        "official metrics)",
    "out": "the scores (Parquet) to write",
}


def add_cli(sub) -> None:
    s = sub.add_parser("official-prompt", help="fetch one of IBM's official judge prompts at a pinned commit and "
                                               "adapt it into the project's prompt format")
    s.set_defaults(fn=cmd_official_prompt)
    s.add_argument("--judge", required=True, choices=["idk", "rb_llm", "clarification"])
    s.add_argument("--revision", required=True, help="IBM/mt-rag-benchmark commit (the benchmark's pinned revision)")
    s.add_argument("--source", default=None, help="a local copy of the official file (default: download it)")
    s.add_argument("--sha256", default=None,
                   help="the sha256 the downloaded file must have instead of the resources/sources.yaml pin (a stand-in "
                        "served at the official file's URL: config mtrag_un.evaluation.official_sha256)")
    s.add_argument("--out", required=True)

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
    fill_help(sub, HELP)
