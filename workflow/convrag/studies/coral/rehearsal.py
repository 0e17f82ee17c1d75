"""coral's rehearsal inputs: every file its targets read, with seeded synthetic values and no
model, at the config's full shape (every retrieval run of Table 2: retriever x query policy,
session encoder and LLM4CS variant, each measure; every answering model, the fine-tuned ones
too, x history strategy of Table 3; Figure 4's models x history lengths; every pairwise judge),
so every table, figure and reproduction row can be built before a GPU hour is spent
(convrag.report.rehearsal). The columns are those the study's jobs write (``score_retrieval``,
``coral evaluate``); ``questions`` conversations per flow sampler (3 turns each, every turn with
golden passages), as many again for each ``coral.statistics_benchmarks`` entry (Tables 1 and 4
count them too), a corpus of ``max(runs, questions) * 4`` passages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import write_jsonl, write_parquet
from convrag.records import TurnTask, write_records
from convrag.report.rehearsal import half_up, paired, paired_ints
from convrag.studies.coral.plan import FLOWS, generation_jobs, run_jobs, sft_generators, sweep_jobs, source

TURNS = 3
# the paper's pattern, so that every comparison has two sides: rewriting above the last question,
# a fine-tuned generator above its base, the summary's prompt far shorter than the raw context
TOKENS = {"raw_context": 2200, "last_response": 900, "rewrite": 800, "llm_summary": 480}


def _tasks(config: dict, questions: int, benchmark: str | None = None) -> list[TurnTask]:
    """``questions`` conversations per flow of the evaluated benchmark, or (``benchmark``) of a
    ``coral.statistics_benchmarks`` entry (its conversation ids prefixed with its name)."""
    b = benchmark or source(config)
    out = []
    for f in FLOWS:
        for q in range(questions):
            conv = f"{benchmark}-{f.lower()}-{q}" if benchmark else f"{f.lower()}-{q}"
            for turn in range(1, TURNS + 1):
                history = [{"role": "user" if k % 2 == 0 else "assistant", "text": f"utterance {k}"}
                           for k in range(2 * (turn - 1))]
                gold = {f"{conv}-p{turn}-{k}": 1 for k in range(1 + (q + turn) % 3)}
                out.append(TurnTask(task_id=f"{conv}_{turn}", benchmark=b, conversation_id=conv, turn=turn,
                                    history=history, question=f"question {turn} of {conv}?", rewrite=f"rewrite {turn}",
                                    reference_answers=["a golden response of several words [1]."], gold_docs=gold,
                                    labels={"flow": f, "domain": "wikipedia", "turn": turn}))
    return out


def _retrieval(config: dict, tasks: list[TurnTask], rng) -> pd.DataFrame:
    c = config["coral"]
    rows = []
    for j in run_jobs(config):
        level = 0.2 if j["policy"] == "current" else 0.3
        for t in tasks:
            base = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn,
                    "retriever": j["retriever"], "policy": j["policy"], "flow": t.labels["flow"]}
            rows += [{**base, "measure": m, "value": float(np.clip(level + rng.normal(0, 0.2), 0, 1))}
                     for m in c["measures"]]
    return pd.DataFrame(rows)


def _labels(config: dict, model: str, strategy: str) -> dict:
    """Table 3's ``retrieval`` and ``compression`` columns as the answer job records them
    (convrag.studies.coral.framework; wiring.framework_args adds the retriever)."""
    from convrag.studies.coral.framework import compression_label, retrieval_label
    from convrag.studies.coral.plan import generation_run

    c, g = config["coral"], config["coral"]["generation"]
    retriever, policy = generation_run(config)
    label = retrieval_label(strategy, g["retrieval"], rewrite_source=g["rewrite"], rewrite_model=c["rewrite"]["model"],
                            summary_model=g["summary_model"] or model, shared_run=f"{retriever}/{policy}")
    return {"retrieval": f"{label} ({retriever})" if g["retrieval"] == "strategy" else label,
            "compression": compression_label((c.get("compression") or {}).get("model"))}


def _scores(config: dict, job: dict, tasks: list[TurnTask], strategy: str, m: int | None, rng) -> pd.DataFrame:
    e = config["coral"]["evaluation"]
    labels = _labels(config, job["model"], strategy)
    tuned = job["model"] in sft_generators(config)
    level = 0.3 + (0.15 if tuned else 0.0)
    rows = []
    for t in tasks:
        rouge = float(np.clip(level + rng.normal(0, 0.05), 0, 1))
        row = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn, "model": job["model"],
               "strategy": job["strategy"], "max_history_turns": m,
               "bleu1": float(np.clip(rouge + rng.normal(0, 0.05), 0, 1)), "rougeL": rouge,
               "citation_recall": float(rng.uniform(0.2, 0.8)), "citation_precision": float(rng.uniform(0.2, 0.8)),
               "citation_skipped": False, "n_statements": 2, "n_entailed": 1, "n_citations": 2, "n_precise": 1,
               "n_overcite": 0, "prompt_tokens": int(TOKENS.get(strategy, 1000) + rng.integers(-50, 50)),
               "completion_tokens": int(rng.integers(50, 300)), "finish_reason": "stop",
               "used_rewrite_fallback": False, "has_reference": True, "nli_model": e["nli"], **labels}
        if e["compare"]:
            outcomes = ["win", "draw", "lose"]
            row.update(comparison=outcomes[int(rng.integers(0, 3))],
                       compare_model=e["compare_model"] or e["nli_model"])
            for judge in e["judges"]:
                row[f"comparison:{judge}"] = outcomes[int(rng.integers(0, 3))]
        rows.append(row)
    return pd.DataFrame(rows)


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    from convrag.layout import Layout
    from convrag.studies.coral import paths as P
    from convrag.studies.coral.wiring import history_strategy

    c = config["coral"]
    rng = np.random.default_rng(seed)
    tasks = _tasks(config, questions)
    out = {"tasks": str(folder / "tasks.jsonl"), "corpus": str(folder / "corpus.jsonl"), "gold": []}
    folder.mkdir(parents=True, exist_ok=True)
    write_records(out["tasks"], tasks)
    out["statistics_tasks"] = []
    for b in c["statistics_benchmarks"]:  # Table 1 / 4 count them with the evaluated conversations
        path = str(folder / f"statistics_{b}.jsonl")
        write_records(path, _tasks(config, questions, benchmark=b))
        out["statistics_tasks"].append(path)
    write_jsonl(out["corpus"], [{"doc_id": f"p{i}", "title": "", "text": "a passage of the corpus"}
                                for i in range(4 * max(runs, questions))])
    if c["retrievers"]:
        out["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(_retrieval(config, tasks, rng), out["retrieval"])
    layout = Layout(str(folder))
    out["generation"], out["history_sweep"] = [], []
    for j in generation_jobs(config):
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(_scores(config, j, tasks, j["strategy"], None, rng), path)
        out["generation"].append(path)
    sweep_turn = [t for t in tasks if t.turn == TURNS]
    for j in sweep_jobs(config):
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(_scores(config, j, sweep_turn, history_strategy(config, j["strategy"]), j["m"], rng), path)
        out["history_sweep"].append(path)
    return out


# ---- the calibrated rehearsal (convrag.report.rehearsal.rehearse_calibrated) ------------------------
#
# Why: the verdict rules are proven without a GPU by a rehearsal whose per-unit scores are drawn so
# that each published number lands on a chosen value (its published value: "reproduced"; moved by
# three interval widths: "not reproduced"). Each entry of resources/published/coral.yaml is routed
# to the cell of its table that computes it, and that cell's per-unit values are drawn with an
# exact mean (paired deviations around the target, so the mean is the target to rounding and the
# spread keeps a 95% interval around it). What each target table computes from the per-unit inputs:
#
# - table1_statistics (cleaning.dataset_statistics, over the evaluated and the
#   statistics_benchmarks conversations): conversations (the number of conversation ids),
#   passages_per_turn and response_tokens (means over turns of a turn's golden passages and of
#   the golden response's tokens, with conversations resampled for the interval), corpus_passages
#   (the corpus file's lines);
# - table4_structure (analyses.structure_table): per flow, the conversations and those of each of
#   §3.3's turn bands (3-6, 6-10, 11-20; 6 is in the first two);
# - table2_retrieval (analyses.retrieval_table): 100 x the mean of a measure's per-turn values per
#   (retriever, policy), rounded to 0.1; no interval;
# - table3_generation (evaluate.table3): per (model, strategy) the mean prompt tokens, 100 x the
#   mean BLEU-1 / ROUGE-L / citation recall and precision; an entry's ``agg: mean`` over models is
#   met by giving each listed model that mean;
# - figure4_history_length (analyses.history_sweep_table): per (model, m) 100 x the mean ROUGE-L,
#   and a fine-tuned generator's rougeL_gain = its ROUGE-L over its base model's at the same m,
#   minus 1 (drawn by giving the base its rehearsal level and the tuned model that level x (1 + g)).
#
# Counts are drawn as counts: §3.3's 8,000 conversations are 8,000 conversations (the evaluated
# split keeps ``questions`` per flow, the first statistics benchmark takes the rest), so a count
# the published file fixes is met by the shape rather than left to it. Overlapping entries are
# drawn through their cells: a flow's band counts are its cells and its conversations are the
# bands' sum plus conversations outside every targeted band (a target below that sum cannot be
# met); the total is the flows' sum (targets for every flow fix it).

SPREAD = 0.05  # half-range of the paired deviations of a 0-1 score around its cell's mean
BAND_LENGTHS = (3, 7, 11, 2, 21)  # turn counts tried, in order, for conversations outside a flow's targeted bands
TABLE2_MEASURES_X100 = 100.0  # table2_retrieval and Table 3's scores print 100 x the mean


def _pure_length(lo: int, hi: int, bands) -> int:
    """The shortest turn count in the band [lo, hi] and in no other of ``bands`` (a flow's
    targeted bands: 6 turns count in both 3-6 and 6-10)."""
    return next(k for k in range(lo, hi + 1) if not any(a <= k <= b for a, b in bands if (a, b) != (lo, hi)))


def _flow_lengths(cells: dict, default: int) -> tuple[list[int], int | None]:
    """A flow's conversations as turn counts: each targeted band's count of conversations of a
    length in that band only, then (up to the targeted conversations) conversations outside every
    targeted band; ``default`` conversations of TURNS turns where nothing is targeted. Returns the
    lengths and the conversations the flow gives (None when it meets its target)."""
    from convrag.studies.coral.analyses import TURN_BANDS

    bands = {(lo, hi): cells[f"turns_{lo}_{hi}"] for lo, hi in TURN_BANDS if f"turns_{lo}_{hi}" in cells}
    lengths = [_pure_length(lo, hi, bands) for (lo, hi), k in bands.items() for _ in range(max(0, half_up(k)))]
    want = cells.get("conversations")
    if want is None and not bands:
        return [TURNS] * default, None
    want = len(lengths) if want is None else half_up(want)
    outside = next(k for k in BAND_LENGTHS if not any(lo <= k <= hi for lo, hi in bands))
    lengths += [outside] * max(0, want - len(lengths))
    return lengths, (None if len(lengths) == want else len(lengths))


def _response(tokens: int) -> str:
    """A golden response of ``tokens`` word and punctuation tokens (cleaning.tokens), short on
    disk: "w." is two."""
    return "w. " * (tokens // 2) + "w" * (tokens % 2)


def _calibrated_tasks(config: dict, flows: dict[str, list[int]], questions: int, per_turn: dict):
    """(evaluated tasks, {statistics benchmark: task records}): per flow, its first ``questions``
    conversations evaluated (TurnTasks with their history, as the plain rehearsal's), the rest
    counted by the first of ``coral.statistics_benchmarks`` (plain records with no history: Tables
    1 and 4 read none, and tens of thousands of turns are written and read back by each
    rehearsal). ``per_turn``: the golden passages (``gold``) and golden-response tokens
    (``tokens``) of every counted turn, in order, or absent for the plain rehearsal's."""
    b = source(config)
    stats = list(config["coral"]["statistics_benchmarks"])
    evaluated, counted = [], {s: [] for s in stats}
    k = 0
    for f in FLOWS:
        for q, n_turns in enumerate(flows[f]):
            ours = q < questions or not stats
            conv = f"{f.lower()}-{q}" if ours else f"{stats[0]}-{f.lower()}-{q}"
            for turn in range(1, n_turns + 1):
                n_gold = int(per_turn["gold"][k]) if "gold" in per_turn else 1 + (q + turn) % 3
                answer = _response(int(per_turn["tokens"][k])) if "tokens" in per_turn else \
                    "a golden response of several words [1]."
                gold = {f"{conv}-p{turn}-{j}": 1 for j in range(n_gold)}
                k += 1
                if not ours:
                    counted[stats[0]].append({"task_id": f"{conv}_{turn}", "benchmark": stats[0], "conversation_id": conv,
                                              "turn": turn, "history": [], "question": f"question {turn}?",
                                              "reference_answers": [answer], "gold_docs": gold,
                                              "labels": {"flow": f, "domain": "wikipedia", "turn": turn}})
                    continue
                history = [{"role": "user" if j % 2 == 0 else "assistant", "text": f"utterance {j}"}
                           for j in range(2 * (turn - 1))]
                evaluated.append(TurnTask(task_id=f"{conv}_{turn}", benchmark=b, conversation_id=conv, turn=turn,
                                          history=history, question=f"question {turn} of {conv}?",
                                          rewrite=f"rewrite {turn}", reference_answers=[answer], gold_docs=gold,
                                          labels={"flow": f, "domain": "wikipedia", "turn": turn}))
    return evaluated, counted


def _route(e, value: float, cfg_measures) -> tuple[tuple | None, str | None]:
    """Where entry ``e``'s number is drawn: ``(cell, value in the cell's units)`` or why not."""
    o = e.ours
    v = value / o.scale  # our table's number
    w = o.where
    if o.target in ("table1_statistics",) and not w and o.value in (
            "conversations", "passages_per_turn", "response_tokens", "corpus_passages"):
        return ("table1", o.value), v
    if o.target == "table4_structure" and set(w) == {"flow"} and w["flow"] in FLOWS and o.value in (
            "conversations", "turns_3_6", "turns_6_10", "turns_11_20"):
        return ("table4", w["flow"], o.value), v
    if o.target == "table2_retrieval" and set(w) == {"retriever", "policy"} and o.value in cfg_measures and o.agg is None:
        if not 0 <= v / TABLE2_MEASURES_X100 <= 1:
            return None, f"a mean of per-turn scores in [0, 1] cannot print {v} (x100)"
        return ("table2", w["retriever"], w["policy"], o.value), v / TABLE2_MEASURES_X100
    if o.target == "table3_generation" and set(w) == {"model", "strategy"} and o.agg in (None, "mean") and o.value in (
            "input_tokens", "bleu1", "rougeL", "citation_recall", "citation_precision"):
        models = w["model"] if isinstance(w["model"], list) else [w["model"]]
        column = "prompt_tokens" if o.value == "input_tokens" else o.value
        unit = v if o.value == "input_tokens" else v / TABLE2_MEASURES_X100
        return ("table3", tuple(models), w["strategy"], column), unit
    if o.target == "figure4_history_length" and set(w) == {"model", "m"} and o.value in ("rougeL", "rougeL_gain"):
        return ("figure4", w["model"], int(w["m"]), o.value), (v / TABLE2_MEASURES_X100 if o.value == "rougeL" else v)
    return None, (f"{o.target}'s {o.value} at {w} is not a mean or share of per-unit scores this rehearsal draws")


def calibrated_rehearsal_inputs(config: dict, folder: Path, targets: dict[str, float], questions: int = 4,
                                runs: int = 2, seed: int = 0) -> tuple[dict, dict[str, str]]:
    """``rehearsal_inputs``'s files (the same columns, the grid's shape), with each entry of
    ``targets`` (published id -> value on the published scale) drawn into its cell (the comment
    above says what each table computes); returns (inputs, undriven: id -> why it cannot be made
    to come out, and so be "reproduced", at its value).

    An estimate whose table gives no 95% interval (Table 2's rows, Figure 4's gain) is drawn at
    its value all the same, and listed: the verdict rules make it inconclusive whatever its value."""
    from convrag.layout import Layout
    from convrag.report.reproduction import load_published, published_path
    from convrag.studies.coral import paths as P
    from convrag.studies.coral.plan import sft_generators
    from convrag.studies.coral.wiring import history_strategy

    c = config["coral"]
    rng = np.random.default_rng(seed)
    entries = {e.id: e for e in load_published(published_path("coral"), "coral").entries}
    undriven: dict[str, str] = {}
    cells: dict[tuple, tuple[str, float]] = {}  # cell -> (entry id, value in the cell's units)
    for eid, value in targets.items():
        e = entries.get(eid)
        if e is None or e.ours is None or e.kind == "statement":
            undriven[eid] = "not a number of coral's published file with a place in our tables"
            continue
        cell, v = _route(e, value, c["measures"])
        if cell is None:
            undriven[eid] = v
            continue
        cells[cell] = (eid, v)
        if e.kind == "estimate" and e.ours.low is None:
            undriven[eid] = (f"{e.ours.target} gives no 95% interval for it, and an estimate without one is "
                             "inconclusive by the verdict rules whatever its value (its mean is drawn at the target)")

    # the conversations: per flow its band and conversation counts, the total split over flows when
    # no flow is targeted; then every counted turn's golden passages and response tokens
    per_flow: dict[str, dict[str, float]] = {f: {} for f in FLOWS}
    for (kind, *rest), (_, v) in cells.items():
        if kind == "table4":
            per_flow[rest[0]][rest[1]] = v
    total = cells.get(("table1", "conversations"))
    if total is not None and not any(per_flow.values()):
        n = half_up(total[1])
        for i, f in enumerate(FLOWS):
            per_flow[f]["conversations"] = n // len(FLOWS) + (i < n % len(FLOWS))
    default = questions * (1 + len(c["statistics_benchmarks"]))
    flows, given = {}, {}
    for f in FLOWS:
        flows[f], given[f] = _flow_lengths(per_flow[f], default)
    for (kind, *rest), (eid, v) in cells.items():
        if kind == "table4" and rest[1] == "conversations" and given[rest[0]] is not None:
            undriven[eid] = (f"{rest[0]}'s conversations are its targeted turn bands' sum ({given[rest[0]]}), "
                             f"which is above {half_up(v)}")
    if total is not None and sum(map(len, flows.values())) != half_up(total[1]):
        undriven[total[0]] = (f"the conversations are the flows' sum ({sum(map(len, flows.values()))}), which the "
                              f"per-flow targets fix, not {half_up(total[1])}")
    n_turns = sum(sum(v) for v in flows.values())
    per_turn = {}
    if ("table1", "passages_per_turn") in cells:
        per_turn["gold"] = paired_ints(n_turns, cells[("table1", "passages_per_turn")][1], 1, rng)
    if ("table1", "response_tokens") in cells:
        per_turn["tokens"] = paired_ints(n_turns, cells[("table1", "response_tokens")][1], 3, rng, low=1)
    tasks, counted = _calibrated_tasks(config, flows, questions, per_turn)

    folder.mkdir(parents=True, exist_ok=True)
    out = {"tasks": str(folder / "tasks.jsonl"), "corpus": str(folder / "corpus.jsonl"), "gold": []}
    write_records(out["tasks"], tasks)
    out["statistics_tasks"] = []
    for b in c["statistics_benchmarks"]:
        path = str(folder / f"statistics_{b}.jsonl")
        write_jsonl(path, counted[b])
        out["statistics_tasks"].append(path)
    corpus = cells.get(("table1", "corpus_passages"))
    n_passages = half_up(corpus[1]) if corpus else 4 * max(runs, questions)
    with open(out["corpus"], "w", encoding="utf-8") as fh:  # a 200K-passage corpus: written as lines
        fh.writelines(f'{{"doc_id": "p{i}", "title": "", "text": "a passage of the corpus"}}\n'
                      for i in range(n_passages))

    if c["retrievers"]:
        df = _retrieval(config, tasks, rng)
        for (kind, *rest), (_, v) in cells.items():
            if kind == "table2":
                r, p, m = rest
                at = ((df.retriever == r) & (df.policy == p) & (df.measure == m)).to_numpy()
                if at.any():
                    df.loc[at, "value"] = paired(int(at.sum()), v, min(SPREAD, v, 1 - v), rng)
                else:
                    undriven[cells[(kind, *rest)][0]] = f"the grid has no run {r}/{p} scored with {m}"
        out["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(df, out["retrieval"])

    def draw(df: pd.DataFrame, col: str, v: float) -> None:
        if col == "prompt_tokens":
            df[col] = paired_ints(len(df), v, 40, rng, low=1)
        else:
            df[col] = paired(len(df), v, min(SPREAD, v, 1 - v), rng)

    layout = Layout(str(folder))
    out["generation"], out["history_sweep"] = [], []
    drawn = set()
    for j in generation_jobs(config):
        df = _scores(config, j, tasks, j["strategy"], None, rng)
        for (kind, *rest), (_, v) in cells.items():
            if kind == "table3" and j["model"] in rest[0] and j["strategy"] == rest[1]:
                draw(df, rest[2], v)
                drawn.add((j["model"], j["strategy"], rest[2]))
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(df, path)
        out["generation"].append(path)
    for (kind, *rest), (eid, _) in cells.items():
        if kind == "table3" and any((m, rest[1], rest[2]) not in drawn for m in rest[0]):
            undriven[eid] = f"the grid answers {rest[1]} with not every one of {', '.join(rest[0])}"

    # Figure 4: per (model, m) a ROUGE-L mean; a gain sets its base at the rehearsal's level (or the
    # base's own target) and the tuned model at that level x (1 + gain)
    sweep_means = {(rest[0], rest[1]): v for (kind, *rest), (_, v) in cells.items()
                   if kind == "figure4" and rest[2] == "rougeL"}
    bases = sft_generators(config)
    for (kind, *rest), (eid, g) in cells.items():
        if kind == "figure4" and rest[2] == "rougeL_gain":
            model, m = rest[0], rest[1]
            if model not in bases:
                undriven[eid] = f"{model} is not a fine-tuned generator of this config (no base to gain over)"
                continue
            base = sweep_means.setdefault((bases[model], m), 0.3)
            if not 0 < base * (1 + g) <= 1:
                undriven[eid] = f"a gain of {g} over a ROUGE-L of {base} leaves the 0-1 scale"
                continue
            sweep_means[(model, m)] = base * (1 + g)
    swept = {(j["model"], j["m"]) for j in sweep_jobs(config)}
    for (kind, *rest), (eid, _) in cells.items():
        if kind == "figure4" and (rest[0], rest[1]) not in swept:
            undriven[eid] = f"the grid's history sweep has no {rest[0]} at m = {rest[1]}"
    sweep_turn = [t for t in tasks if t.turn == TURNS]
    for j in sweep_jobs(config):
        df = _scores(config, j, sweep_turn, history_strategy(config, j["strategy"]), j["m"], rng)
        if (j["model"], j["m"]) in sweep_means:
            draw(df, "rougeL", sweep_means[(j["model"], j["m"])])
        path = P.evaluation(layout, j["source"], j["model"], j["strategy"], "parquet")
        write_parquet(df, path)
        out["history_sweep"].append(path)
    return out, undriven
