"""mtrag_un's rehearsal inputs: every file its targets read, with seeded synthetic values and
no model, at the config's full shape (every domain of the benchmark, retriever, query policy,
measure, generation model, setting, judge; MTRAG's human-evaluated responses when the config
re-scores them), so every table, figure and reproduction row can be built before a GPU hour is
spent (convrag.report.rehearsal). The columns are those the study's jobs write (``score_runs``,
``evaluate.score_items``, ``human-eval``); ``questions`` tasks per domain x answerability class
(each its own conversation, as in MTRAG-UN; turns cycle 1-4), ``runs`` passages per corpus; the
tasks carry a standalone label (the released files do not) so that Table 3 has both halves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from convrag.io import write_jsonl, write_parquet
from convrag.records import TurnTask, write_records
from convrag.report.rehearsal import half_up, paired, paired_ints
from convrag.studies.mtrag_un.judges import UNDERSPECIFIED_TYPES
from convrag.studies.mtrag_un.plan import (ANSWERABILITY, domains, generation_jobs, mtrag_retrieval_domains,
                                           retrieval_jobs)

MULTI_TURN = ("Follow-up", "Clarification", "N/A")


def _tasks(config: dict, questions: int) -> list[TurnTask]:
    b = config["mtrag_un"]["benchmark"]
    out = []
    for dom in domains(config):
        for a, ans in enumerate(ANSWERABILITY):
            for q in range(questions):
                conv = f"{dom}-{ans.lower()}-{q}"
                turn = 1 + (a + q) % 4
                history = [{"role": "user" if k % 2 == 0 else "assistant", "text": f"utterance {k}"}
                           for k in range(2 * (turn - 1))]
                gold = {f"{dom}-doc{q}": 1} if ans in ("ANSWERABLE", "PARTIAL") else {}
                out.append(TurnTask(task_id=f"{conv}<::>{turn}", benchmark=b, conversation_id=conv, turn=turn,
                                    history=history, question=f"question {q} on {dom}?", reference_answers=["an answer"],
                                    gold_docs=gold, contexts=[{"doc_id": f"{dom}-doc{q}", "text": "a passage"}],
                                    labels={"domain": dom, "answerability": ans,
                                            "multi_turn": MULTI_TURN[(a + q) % 3], "question_type": ["Factoid"],
                                            "standalone": q % 2 == 0, "first_turn": turn == 1}))
    return out


MTRAG_ANSWERABILITY = ("ANSWERABLE", "PARTIAL", "UNANSWERABLE", "CONVERSATIONAL")


def _statistics_tasks(config: dict, folder: Path, questions: int) -> list[str]:
    """The task files of ``statistics_benchmarks`` (MTRAG's conversations: every user turn a task),
    at the paths the study's artifacts name under ``folder``: per domain ``questions``
    conversations of 2-5 turns, turn 1 multi-turn N/A, later turns Follow-up or Clarification, the
    four MTRAG answerability classes in turn, and (as in MTRAG) a standalone label on one turn only."""
    from convrag.data.benchmarks import benchmark_loader
    from convrag.layout import Layout
    from convrag.studies import get_study

    names = config["mtrag_un"]["statistics_benchmarks"]
    out = get_study("mtrag_un").artifacts(config, Layout(str(folder)))["statistics_tasks"]
    for name, path in zip(names, out):
        spec = config["benchmarks"][name]
        tasks, k = [], 0
        for dom in benchmark_loader(spec["kind"]).domains(spec):
            for q in range(questions):
                conv, history = f"{name}-{dom}-{q}", []
                for turn in range(1, 3 + q % 4):
                    ans = MTRAG_ANSWERABILITY[k % 4]
                    tasks.append(TurnTask(
                        task_id=f"{conv}<::>{turn}", benchmark=name, conversation_id=conv, turn=turn,
                        history=list(history), question=f"question {turn} on {dom}?", reference_answers=["an answer"],
                        gold_docs={f"{dom}-doc{q}": 1} if ans in ("ANSWERABLE", "PARTIAL") else {},
                        labels={"domain": dom, "answerability": ans, "question_type": ["Factoid"],
                                "multi_turn": "N/A" if turn == 1 else ("Follow-up", "Clarification")[k % 2],
                                "first_turn": turn == 1, "standalone": False if k == 1 else None}))
                    history += [{"role": "user", "text": f"question {turn}"}, {"role": "assistant", "text": "an answer"}]
                    k += 1
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_records(path, tasks)
    return list(out)


def _retrieval(config: dict, tasks: list[TurnTask], rng) -> pd.DataFrame:
    m = config["mtrag_un"]
    rows = []
    for j in retrieval_jobs(config):
        level = 0.3 + (0.1 if j["policy"] != m["gain_base"] else 0.0)  # the paper's pattern: rewriting helps
        for t in tasks:
            if t.labels["domain"] != j["domain"] or not t.gold_docs:
                continue
            base = {"task_id": t.task_id, "conversation_id": t.conversation_id, "turn": t.turn, "domain": j["domain"],
                    "retriever": j["retriever"], "policy": j["policy"],
                    **{k: t.labels.get(k) for k in ("standalone", "answerability", "multi_turn")}}
            rows += [{**base, "measure": meas, "value": float(np.clip(level + rng.normal(0, 0.2), 0, 1))}
                     for meas in m["measures"]]
    return pd.DataFrame(rows)


def _generation(config: dict, tasks: list[TurnTask], folder: Path, rng, frames: list | None = None) -> list[str]:
    """Write the generation jobs' score files (``frames``: the jobs' frames already drawn)."""
    from convrag.studies.mtrag_un import paths
    from convrag.layout import Layout

    layout = Layout(str(folder))
    out = []
    for j, df in frames if frames is not None else _generation_frames(config, tasks, rng):
        path = paths.evaluation(layout, j["benchmark"], j["model"], j["setting"], j["domain"])
        write_parquet(df, path)
        out.append(path)
    return out


def _generation_frames(config: dict, tasks: list[TurnTask], rng) -> list[tuple[dict, pd.DataFrame]]:
    """Each generation job with its per-task scores (the columns ``evaluate.score_items`` writes)."""
    judges = config["mtrag_un"]["evaluation"]["judges"]
    out = []
    for j in generation_jobs(config):
        rows = []
        for t in (t for t in tasks if t.labels["domain"] == j["domain"]):
            ans = t.labels["answerability"]
            level = 0.6 if j["setting"] == "reference" else 0.5  # the paper: reference above RAG
            raw = {k: float(np.clip(level + rng.normal(0, 0.15), 0, 1)) for k in ("RB_alg", "RB_llm", "RL_F")}
            idk = str(int(rng.uniform() < (0.7 if ans == "UNANSWERABLE" else 0.1)))
            clar = float(rng.choice([1.0, 0.0])) if ans == "UNDERSPECIFIED" else None
            row = {"item_id": f"{t.task_id}#0", "task_id": t.task_id, "conversation_id": t.conversation_id,
                   "turn": t.turn, **{k: t.labels.get(k) for k in ("domain", "answerability", "multi_turn")},
                   "question_type": ", ".join(t.labels["question_type"]), "standalone": t.labels["standalone"],
                   "response": "a reply", "RougeL": raw["RB_alg"], "BertscoreR": raw["RB_alg"],
                   "BertKPrec_max": raw["RB_alg"], "idk": idk, "clarification": clar,
                   "rb_llm_fallback": bool(rng.uniform() < 0.05), "faithfulness_status": "ok",
                   **{f"{k}_raw": v for k, v in raw.items()}, **raw,
                   "model": j["model"], "setting": j["setting"], "judge_model": config["mtrag_un"]["evaluation"]["judge_model"]}
            if "underspecified_type" in judges:  # every type, and now and then an invalid reply
                typ = UNDERSPECIFIED_TYPES[int(rng.integers(0, 3))] if rng.uniform() > 0.1 else None
                row.update(underspecified_type=typ if ans == "UNDERSPECIFIED" else None,
                           underspecified_type_invalid=ans == "UNDERSPECIFIED" and typ is None)
            rows.append(row)
        out.append((j, pd.DataFrame(rows)))
    return out


def _human(questions: int, rng) -> pd.DataFrame:
    """The human-eval scores: MTRAG's two response systems of Figure 5 on answerable and partial
    tasks, 1-4 human ratings (and win rates) loosely tracking the judge scores."""
    from convrag.studies.mtrag_un.human import FIGURE5_HUMAN, FIGURE5_METRICS, PAPER_SYSTEMS

    rows = []
    for k in range(max(8, 4 * questions)):
        ans = ("ANSWERABLE", "PARTIAL")[k % 2]
        for system in PAPER_SYSTEMS:
            q = float(rng.uniform())
            row = {"task_id": f"human-{k}", "conversation_id": f"human-c{k // 2}", "turn": 1 + k % 5, "domain": "govt",
                   "system": system, "answerability": ans, "response": "a reply"}
            for ours, official in FIGURE5_METRICS.items():
                row[ours] = row[official] = float(np.clip(q + rng.normal(0, 0.2), 0, 1))
            for h in FIGURE5_HUMAN:
                name = h.removeprefix("human_")
                value = float(np.clip(1 + 3 * q + rng.normal(0, 0.5), 1, 4)) if name != "win_rate" else float(q > 0.5)
                row.update({h: value, f"n_{name}": int(rng.integers(1, 4))})
            rows.append(row)
    return pd.DataFrame(rows)


def _mtrag_retrieval(config: dict, folder: Path, questions: int, rng, means: dict | None = None) -> dict:
    """MTRAG's retrieval tasks scored per task (``score_runs`` columns) and their TREC runs, at the
    paths the study's artifacts name under ``folder`` (none while that target is off); the last
    task of each run gets an empty ranking (the table counts such tasks). ``means``: (retriever,
    policy, domain, measure) -> the mean its tasks' scores are drawn at, the empty ranking's 0
    among them (the calibrated rehearsal)."""
    from convrag.layout import Layout
    from convrag.studies import get_study

    arts = get_study("mtrag_un").artifacts(config, Layout(str(folder)))
    if not arts.get("mtrag_retrieval") or not arts.get("mtrag_retrieval_runs"):
        return {}
    measures = config["mtrag_un"]["measures"]
    rows = []
    for path in arts["mtrag_retrieval_runs"]:
        retriever, policy, domain = Path(path).parts[-3], Path(path).parts[-2], Path(path).stem
        ids = [f"mtrag-{domain}-{q}<::>{1 + q % 4}" for q in range(questions + 1)]
        lines = [f"{qid} Q0 {domain}-doc{k} {k + 1} {1.0 / (k + 1):.4f} rehearsal"
                 for qid in ids[:-1] for k in range(2)]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
        drawn = {}
        for meas in measures:
            v = (means or {}).get((retriever, policy, domain, meas))
            if v is not None:  # the ranked tasks' mean that puts the mean over all (0 for the empty one) at v
                at = v * len(ids) / (len(ids) - 1)
                drawn[meas] = iter(paired(len(ids) - 1, at, min(SPREAD, at, 1 - at), rng))
        for qid in ids:
            base = {"task_id": qid, "conversation_id": qid.split("<::>")[0], "turn": int(qid.split("<::>")[1]),
                    "domain": domain, "retriever": retriever, "policy": policy}
            rows += [{**base, "measure": meas,
                      "value": 0.0 if qid == ids[-1] else float(next(drawn[meas])) if meas in drawn
                      else float(np.clip(0.3 + rng.normal(0, 0.2), 0, 1))}
                     for meas in measures]
    write_parquet(pd.DataFrame(rows), arts["mtrag_retrieval"])
    return {"mtrag_retrieval": arts["mtrag_retrieval"], "mtrag_retrieval_runs": list(arts["mtrag_retrieval_runs"]),
            "mtrag_retrieval_gold": []}


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    from convrag.data.benchmarks import corpus_id

    m = config["mtrag_un"]
    rng = np.random.default_rng(seed)
    tasks = _tasks(config, questions)
    paths = {"tasks": str(folder / "tasks.jsonl"), "gold": [],
             "statistics_tasks": _statistics_tasks(config, folder, questions)}  # MTRAG's, when named
    write_records(paths["tasks"], tasks)
    paths["corpora"] = []
    for dom in domains(config):
        p = folder / "corpora" / f"{corpus_id(m['benchmark'], dom)}.jsonl"
        write_jsonl(p, [{"doc_id": f"{dom}-doc{i}", "title": "", "text": " ".join(["word"] * (20 + 5 * i))}
                        for i in range(max(runs, questions))])
        paths["corpora"].append(str(p))
    if m["retrievers"]:
        paths["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(_retrieval(config, tasks, rng), paths["retrieval"])
    if m["generation"]["models"]:
        paths["generation"] = _generation(config, tasks, folder, rng)
    paths.update(_mtrag_retrieval(config, folder, questions, rng))  # MTRAG's own retrieval tasks, when on
    if m["evaluation"]["human_evaluations"]:
        paths["human"] = str(folder / "human.parquet")
        write_parquet(_human(questions, rng), paths["human"])
    return paths


# ---- the calibrated rehearsal (convrag.report.rehearsal.rehearse_calibrated) ------------------------
#
# Why: the verdict rules are proven without a GPU by a rehearsal whose per-unit values are drawn so
# that each published number lands on a chosen value (its published value: "reproduced"; moved by
# three interval widths or tolerances: "not reproduced"). Each entry of
# resources/published/mtrag_un.yaml is routed to the cell of its table that computes it. What each
# target table computes from the per-unit inputs:
#
# - mtrag_retrieval (analyses.official_retrieval_table, MTRAG's retrieval tasks): per (retriever,
#   policy, domain) the mean of a measure over the domain's tasks (an empty ranking's 0 among them),
#   rounded to 5 decimals; "all (weighted)" weights those by the domains' tasks, "macro" averages
#   them: every domain's mean drawn at the target puts all three there;
# - table2_retrieval (analyses.retrieval_table, MTRAG-UN's retrieval tasks): the same per domain
#   without the rounding; "macro" and "all (weighted)" likewise;
# - benchmark_statistics (analyses.benchmark_statistics): per benchmark the tasks, the turns (each
#   conversation's latest task's turn), the mean utterances (history + 1: 2 x turn - 1, the history
#   being the earlier turns' question and answer), the retrieval tasks (with gold passages), and the
#   shares of unanswerable-or-partial, Clarification and first-turn tasks. MTRAG-UN's tasks are one
#   per conversation, so its counts are drawn as a task list (666 tasks, their answerability, turn
#   and multi-turn type); MTRAG's (the compared benchmark) as conversations of user turns;
# - table4_generation (analyses.generation_table): per (model, setting) the mean of RB_alg, RB_llm
#   and RL_F over the tasks of every domain (no interval).
#
# Overlapping entries are drawn through shared cells: the turns and the mean utterances of
# MTRAG-UN are one list of task turns, chosen within both entries' tolerances where they meet.

SPREAD = 0.05  # half-range of the paired deviations of a 0-1 score around its cell's mean
STUDIED = ("tasks", "turns", "mean_utterances_per_conversation", "retrieval_tasks", "unanswerable_or_partial",
           "clarification", "first_turn")
COMPARED = ("tasks", "unanswerable_or_partial")
MTRAG_TURNS = 8  # turns of a drawn MTRAG conversation (its 842 turns over 110 conversations: about 7.7)


def _route(e, value: float, config: dict) -> tuple[tuple | None, float | str]:
    """Where entry ``e``'s number is drawn: ``(cell, value in our table's units)`` or None and why not."""
    from convrag.studies.mtrag_un.analyses import GEN_METRICS

    m = config["mtrag_un"]
    o, v = e.ours, value / e.ours.scale
    w = o.where
    if o.agg is not None:
        return None, f"an aggregate ({o.agg}) over rows of {o.target}"
    if o.target == "benchmark_statistics" and set(w) == {"role", "statistic"} and o.value == "value":
        if w["role"] == "studied" and w["statistic"] in STUDIED:
            return ("studied", w["statistic"]), v
        if w["role"] == "compared" and w["statistic"] in COMPARED and m["statistics_benchmarks"]:
            return ("compared", w["statistic"]), v
    if o.target in ("table2_retrieval", "mtrag_retrieval") and set(w) == {"retriever", "policy", "domain"}:
        measures = m["measures"]
        doms = domains(config) if o.target == "table2_retrieval" else mtrag_retrieval_domains(config)
        if o.value in measures and (w["domain"] in ("macro", "all (weighted)") or w["domain"] in doms):
            if not 0 <= v <= 1:
                return None, f"a mean of per-task scores in [0, 1] cannot be {v}"
            return (o.target, w["retriever"], w["policy"], w["domain"], o.value), v
    if o.target == "table4_generation" and set(w) == {"model", "setting"} and o.value in GEN_METRICS:
        if not 0 <= v <= 1:
            return None, f"a mean of per-task scores in [0, 1] cannot be {v}"
        return ("table4", w["model"], w["setting"], o.value), v
    return None, f"{o.target}'s {o.value} at {w} is not a mean or share of per-unit values this rehearsal draws"


def _studied_design(cells: dict, entries: dict, n_default: int) -> tuple[dict, dict[str, str]]:
    """MTRAG-UN's task list as counts: tasks, per answerability, first-turn and Clarification
    tasks, and the total of the task turns; and the entries the counts cannot meet, with why.

    The tasks' answerability: ANSWERABLE and PARTIAL tasks have gold passages (the retrieval
    tasks), UNANSWERABLE and PARTIAL make the unanswerable-or-partial share, so PARTIAL is a free
    third of that share within what both allow. The turns: 1 for the first-turn tasks, at least
    2 for the others (a Clarification follows a turn); the total the turns' target, or, where it lies outside the utterances'
    tolerance (utterances = 2 x turns / tasks - 1), the middle of where both tolerances meet (else the
    turns' target, and the utterances are listed)."""
    def target(stat):
        return cells[("studied", stat)][1] if ("studied", stat) in cells else None

    def eid(stat):
        return cells[("studied", stat)][0]

    bad = {}
    n = half_up(target("tasks")) if target("tasks") is not None else n_default
    up = half_up(target("unanswerable_or_partial") * n) if target("unanswerable_or_partial") is not None else n // 2
    r = half_up(target("retrieval_tasks")) if target("retrieval_tasks") is not None else n // 2
    lo, hi = max(0, r + up - n), min(up, r)
    if lo > hi:
        bad[eid("retrieval_tasks") if target("retrieval_tasks") is not None else eid("unanswerable_or_partial")] = (
            f"{r} retrieval tasks and {up} unanswerable or partial ones do not fit in {n} tasks")
        lo, hi = 0, min(up, r)
    partial = min(max(up // 3, lo), hi)
    counts = {"ANSWERABLE": r - partial, "PARTIAL": partial, "UNANSWERABLE": up - partial,
              "UNDERSPECIFIED": max(0, n - r - up + partial)}
    first = half_up(target("first_turn") * n) if target("first_turn") is not None else n // 4
    clar = half_up(target("clarification") * n) if target("clarification") is not None else (n - first) // 3
    if clar > n - first:
        bad[eid("clarification")] = f"{clar} Clarification tasks cannot all follow a turn with {first} first turns"
        clar = n - first
    # the turns: their target's interval, met with the utterances' where the two meet
    floor = first + 2 * (n - first)
    want = target("turns")
    span = (want - entries[eid("turns")].tolerance, want + entries[eid("turns")].tolerance) if want is not None else None
    if target("mean_utterances_per_conversation") is not None:
        u, tol = target("mean_utterances_per_conversation"), entries[eid("mean_utterances_per_conversation")].tolerance
        by_u = ((u - tol + 1) * n / 2, (u + tol + 1) * n / 2)
        if span is None:
            span, want = by_u, (u + 1) * n / 2
        elif max(span[0], by_u[0]) <= min(span[1], by_u[1]):
            span = (max(span[0], by_u[0]), min(span[1], by_u[1]))
        else:
            bad[eid("mean_utterances_per_conversation")] = (
                f"the mean utterances are 2 x turns / tasks - 1 (every task's history its earlier turns): with the "
                f"turns within {entries[eid('turns')].tolerance:g} of {want:g} they cannot be within {tol:g} of {u:g}")
    if want is None:
        turns = floor + (n - first) // 2
    else:  # the target itself, or the middle of where both tolerances meet (clear of either edge)
        turns = half_up(want) if span[0] <= want <= span[1] else half_up((span[0] + span[1]) / 2)
    if turns < floor:
        for stat in ("turns", "mean_utterances_per_conversation"):
            if target(stat) is not None:
                bad[eid(stat)] = f"{n} tasks with {first} first turns take at least {floor} turns"
        turns = floor
    return {"tasks": n, "answerability": counts, "first": first, "clarification": clar, "turns": turns}, bad


def _studied_tasks(config: dict, design: dict, docs: int, rng) -> list[TurnTask]:
    """MTRAG-UN tasks (each its own conversation, as ``_tasks``) with ``design``'s counts, spread
    over the domains in turn."""
    b = config["mtrag_un"]["benchmark"]
    doms = domains(config)
    n, first = design["tasks"], design["first"]
    turns = np.concatenate([np.ones(first, dtype=int),
                            paired_ints(n - first, (design["turns"] - first) / max(1, n - first), 1, rng, low=2)
                            if n > first else np.zeros(0, dtype=int)])
    multi = ["N/A"] * first + ["Clarification"] * design["clarification"] + \
        ["Follow-up"] * (n - first - design["clarification"])
    ans = rng.permutation([a for a, k in design["answerability"].items() for _ in range(k)])
    out = []
    for i in range(n):
        dom, a, turn = doms[i % len(doms)], str(ans[i]), int(turns[i])
        conv = f"{dom}-{a.lower()}-{i}"
        doc = f"{dom}-doc{i % docs}"
        out.append(TurnTask(task_id=f"{conv}<::>{turn}", benchmark=b, conversation_id=conv, turn=turn,
                            history=[{"role": "user" if k % 2 == 0 else "assistant", "text": f"utterance {k}"}
                                     for k in range(2 * (turn - 1))],
                            question=f"question {i} on {dom}?", reference_answers=["an answer"],
                            gold_docs={doc: 1} if a in ("ANSWERABLE", "PARTIAL") else {},
                            contexts=[{"doc_id": doc, "text": "a passage"}],
                            labels={"domain": dom, "answerability": a, "multi_turn": multi[i],
                                    "question_type": ["Factoid"], "standalone": i % 2 == 0, "first_turn": turn == 1}))
    return out


def _compared_tasks(config: dict, folder: Path, n: int, up: int, rng) -> list[str]:
    """The first statistics benchmark's tasks (MTRAG's: every user turn a task) as ``n`` turns in
    conversations of MTRAG_TURNS turns over its domains, ``up`` of them unanswerable or partial,
    at the path the study's artifacts name (the others as ``_statistics_tasks`` draws them)."""
    from convrag.data.benchmarks import benchmark_loader

    names = config["mtrag_un"]["statistics_benchmarks"]
    out = _statistics_tasks(config, folder, 1)  # every file at its path; the first is drawn again below
    name, spec = names[0], config["benchmarks"][names[0]]
    doms = benchmark_loader(spec["kind"]).domains(spec)
    kinds = rng.permutation(["UNANSWERABLE", "PARTIAL"] * (up // 2) + ["PARTIAL"] * (up % 2)
                            + ["ANSWERABLE", "CONVERSATIONAL"] * ((n - up) // 2) + ["ANSWERABLE"] * ((n - up) % 2))
    tasks, history = [], []
    for k in range(n):
        c, turn = divmod(k, MTRAG_TURNS)
        turn += 1
        dom = doms[c % len(doms)]
        conv = f"{name}-{dom}-{c}"
        history = [] if turn == 1 else history
        ans = str(kinds[k])
        tasks.append({"task_id": f"{conv}<::>{turn}", "benchmark": name, "conversation_id": conv, "turn": turn,
                      "history": list(history), "question": f"question {turn} on {dom}?",
                      "reference_answers": ["an answer"],
                      "gold_docs": {f"{dom}-doc{c}": 1} if ans in ("ANSWERABLE", "PARTIAL") else {},
                      "labels": {"domain": dom, "answerability": ans, "question_type": ["Factoid"],
                                 "multi_turn": "N/A" if turn == 1 else ("Follow-up", "Clarification")[k % 2],
                                 "first_turn": turn == 1, "standalone": False if k == 1 else None}})
        history += [{"role": "user", "text": f"question {turn}"}, {"role": "assistant", "text": "an answer"}]
    Path(out[0]).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(out[0], tasks)
    return list(out)


def calibrated_rehearsal_inputs(config: dict, folder: Path, targets: dict[str, float], questions: int = 4,
                                runs: int = 2, seed: int = 0) -> tuple[dict, dict[str, str]]:
    """``rehearsal_inputs``'s files (the same columns, the grid's shape), with each entry of
    ``targets`` (published id -> value on the published scale) drawn into its cell (the comment
    above says what each table computes); returns (inputs, undriven: id -> why it cannot be made
    to come out, and so be "reproduced", at its value).

    An estimate whose table gives no 95% interval (Table 2's rewrite rows, Table 4) is drawn at
    its value all the same, and listed: the verdict rules make it inconclusive whatever its value."""
    from convrag.data.benchmarks import corpus_id
    from convrag.report.reproduction import load_published, published_path

    m = config["mtrag_un"]
    rng = np.random.default_rng(seed)
    entries = {e.id: e for e in load_published(published_path("mtrag_un"), "mtrag_un").entries}
    undriven: dict[str, str] = {}
    cells: dict[tuple, tuple[str, float]] = {}
    for eid, value in targets.items():
        e = entries.get(eid)
        if e is None or e.ours is None or e.kind == "statement":
            undriven[eid] = "not a number of mtrag_un's published file with a place in our tables"
            continue
        cell, v = _route(e, value, config)
        if cell is None:
            undriven[eid] = v
            continue
        cells[cell] = (eid, v)
        if e.kind == "estimate" and e.ours.low is None:
            undriven[eid] = (f"{e.ours.target} gives no 95% interval for it, and an estimate without one is "
                             "inconclusive by the verdict rules whatever its value (its mean is drawn at the target)")

    docs = max(runs, questions)
    if any(k[0] == "studied" for k in cells):
        design, bad = _studied_design(cells, entries, len(domains(config)) * len(ANSWERABILITY) * questions)
        undriven.update(bad)
        tasks = _studied_tasks(config, design, docs, rng)
    else:
        tasks = _tasks(config, questions)
    paths = {"tasks": str(folder / "tasks.jsonl"), "gold": []}
    if any(k[0] == "compared" for k in cells):
        n = half_up(cells[("compared", "tasks")][1]) if ("compared", "tasks") in cells else 4 * MTRAG_TURNS * questions
        share = cells.get(("compared", "unanswerable_or_partial"))
        paths["statistics_tasks"] = _compared_tasks(config, folder, n, half_up(share[1] * n) if share else n // 2, rng)
    else:
        paths["statistics_tasks"] = _statistics_tasks(config, folder, questions)
    write_records(paths["tasks"], tasks)
    paths["corpora"] = []
    for dom in domains(config):
        p = folder / "corpora" / f"{corpus_id(m['benchmark'], dom)}.jsonl"
        write_jsonl(p, [{"doc_id": f"{dom}-doc{i}", "title": "", "text": " ".join(["word"] * (20 + 5 * i))}
                        for i in range(docs)])
        paths["corpora"].append(str(p))

    def spread(v):
        return min(SPREAD, v, 1 - v)

    def per_domain(target: str, doms: list[str]) -> dict:
        """(retriever, policy, domain, measure) -> mean: a domain's own target, else its
        aggregate's (macro or all (weighted): every domain at the target puts both there)."""
        means, own = {}, {}
        for (kind, *rest), (eid, v) in cells.items():
            if kind == target and rest[2] in doms:
                own[(rest[0], rest[1], rest[2], rest[3])] = v
        for (kind, *rest), (eid, v) in cells.items():
            if kind == target and rest[2] not in doms:
                keys = [(rest[0], rest[1], d, rest[3]) for d in doms]
                if any(k in own for k in keys):
                    undriven[eid] = f"{rest[2]} follows its domains' own targets ({target})"
                means.update({k: v for k in keys if k not in own})
        return {**means, **own}

    if m["retrievers"]:
        df = _retrieval(config, tasks, rng)
        for (r, p, d, meas), v in per_domain("table2_retrieval", domains(config)).items():
            at = ((df.retriever == r) & (df.policy == p) & (df.domain == d) & (df.measure == meas)).to_numpy()
            if at.any():
                df.loc[at, "value"] = paired(int(at.sum()), v, spread(v), rng)
            else:
                for (kind, *rest), (eid, _) in cells.items():
                    if kind == "table2_retrieval" and rest[:2] == [r, p] and rest[3] == meas:
                        undriven[eid] = f"the grid has no {r}/{p} run scored with {meas} in {d}"
        paths["retrieval"] = str(folder / "retrieval.parquet")
        write_parquet(df, paths["retrieval"])
    if m["generation"]["models"]:
        frames = _generation_frames(config, tasks, rng)
        for (kind, *rest), (eid, v) in cells.items():
            if kind != "table4":
                continue
            model, setting, metric = rest
            cell = [df for j, df in frames if j["model"] == model and j["setting"] == setting]
            if not cell:
                undriven[eid] = f"the grid has no {model} answering in the {setting} setting"
                continue
            vals = iter(paired(sum(len(df) for df in cell), v, spread(v), rng))
            for df in cell:
                df[metric] = [next(vals) for _ in range(len(df))]
                df[f"{metric}_raw"] = df[metric]
        paths["generation"] = _generation(config, tasks, folder, rng, frames)
    mr_means = per_domain("mtrag_retrieval", mtrag_retrieval_domains(config))
    ranked = (questions + 1) / questions  # the ranked tasks' mean over the mean with the empty ranking's 0
    for (kind, *rest), (eid, v) in cells.items():
        if kind == "mtrag_retrieval" and v * ranked > 1:
            undriven[eid] = f"with one empty ranking in {questions + 1} tasks a domain's mean stays below {1 / ranked:.3g}"
    paths.update(_mtrag_retrieval(config, folder, questions, rng, mr_means))
    for (kind, *rest), (eid, _) in cells.items():
        if kind == "mtrag_retrieval" and "mtrag_retrieval" not in paths:
            undriven[eid] = "the config builds no mtrag_retrieval table"
    if m["evaluation"]["human_evaluations"]:
        paths["human"] = str(folder / "human.parquet")
        write_parquet(_human(questions, rng), paths["human"])
    return paths, undriven
