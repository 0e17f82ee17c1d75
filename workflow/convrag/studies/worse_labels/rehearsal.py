"""worse_labels' rehearsal inputs: every file its targets read, with seeded synthetic values and no
model, at the config's full shape (every slice, every domain of its benchmark, every rung and
context set, reader, content judge, panel member, answer judge, the audit's strata and every
fitted rung's weights), so that every table, figure and reproduction row can be built before a
GPU hour is spent (convrag.report.rehearsal).

The contexts are built by the contexts stage's own code (``contexts.build_contexts``) from
synthetic turns and rankings: per domain ``questions`` dialogues of three turns, each turn one
gold document of its dialogue; a rung further up the ladder puts the gold into its top k more
often, so nDCG and "no gold" move along the ladder as in the paper. The verdict files have the
jobs' record shapes (``worse-labels label / read / correctness / audit``): judges say yes /
partial / no with supporting positions (a context with gold mostly yes, one without a mix),
readers ANSWERABLE / UNANSWERABLE (one in twenty without a status line) with p(answerable) and
an answer, the answer judges 1-5, the auditor's two procedures and final label on
``judges.audit_sample``'s draw. The values are
noise with a direction: their numbers mean nothing, only that every cell has one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convrag.io import write_json, write_jsonl, write_parquet
from convrag.records import TurnTask

TURNS = 3  # turns per synthetic dialogue (other-turn gold and dialogue-tied classes need > 1)
DEPTH = 20  # documents per synthetic ranking
LABELS = ("yes", "partial", "no")


def _tasks(config: dict, slice_: str, questions: int) -> list[TurnTask]:
    from convrag.studies.worse_labels.plan import slice_domains, slices

    b = slices(config)[slice_]["benchmark"]
    out = []
    for d in slice_domains(config, slice_):
        for q in range(questions):
            conv = f"{d}-{q}"
            for t in range(1, TURNS + 1):
                hist = [x for k in range(1, t) for x in ({"role": "user", "text": f"question {k} of {conv}?"},
                                                          {"role": "assistant", "text": f"answer {k}"})]
                out.append(TurnTask(task_id=f"{conv}_turn_{t}", benchmark=b, conversation_id=conv, turn=t,
                                    history=hist, question=f"question {t} of {conv}?",
                                    reference_answers=[f"answer {t}"], gold_docs={f"{conv}_doc_{t}": 1},
                                    rewrite=f"standalone question {t} of {conv}?",
                                    labels={"domain": d, "first_turn": t == 1}))
    return out


def _corpus(tasks: list[TurnTask], rng) -> dict[str, str]:
    """Per dialogue 2 x TURNS documents, per domain 10 others; random words. In every other
    dialogue document TURNS + k is a near-verbatim copy of turn k's gold (one word added), so
    the copy detector, the near-duplicate class and the copy shares have something to count."""
    words = [f"w{i}" for i in range(400)]
    texts = {}
    for t in tasks:
        d = t.labels["domain"]
        for i in range(1, 2 * TURNS + 1):
            texts.setdefault(f"{t.conversation_id}_doc_{i}", " ".join(rng.choice(words, 30)))
        if t.conversation_id.endswith(("0", "2", "4", "6", "8")):
            gold = texts[f"{t.conversation_id}_doc_{t.turn}"]
            texts[f"{t.conversation_id}_doc_{TURNS + t.turn}"] = gold + " w0"
        for i in range(10):
            texts.setdefault(f"{d}-other-{i}", " ".join(rng.choice(words, 30)))
    return texts


def _runs(config: dict, slice_: str, tasks: list[TurnTask], texts: dict, rng) -> dict[str, dict]:
    """rung -> {task id -> {doc: score}}: the turn's domain's documents in a random order, the gold
    moved into the top k with a probability that grows along the ladder."""
    from convrag.studies.worse_labels.plan import slices

    ladder = list(slices(config)[slice_]["ladder"])
    k = config["worse_labels"]["top_k"]
    by_domain: dict[str, list[str]] = {}
    for doc in texts:
        by_domain.setdefault(doc.split("-", 1)[0], []).append(doc)
    runs = {}
    for i, rung in enumerate(ladder):
        p_hit = 0.3 + 0.5 * i / max(1, len(ladder) - 1)  # the top rung still misses a fifth (false misses there)
        run = {}
        for t in tasks:
            docs = [x for x in by_domain[t.labels["domain"]] if x not in t.gold_docs]
            order = list(rng.permutation(docs))[:DEPTH]
            gold = next(iter(t.gold_docs))
            order.insert(int(rng.integers(0, k)) if rng.random() < p_hit else len(order), gold)
            run[t.task_id] = {doc: float(DEPTH + 1 - j + rng.random() * 0.5) for j, doc in enumerate(order)}
        runs[rung] = run
    return runs


def _label(rng, has_gold: bool, n: int) -> dict:
    lab = str(rng.choice(LABELS, p=[0.7, 0.2, 0.1] if has_gold else [0.3, 0.2, 0.5]))
    support = [] if lab == "no" or n == 0 else sorted({int(x) for x in rng.integers(1, n + 1, size=2)})
    return {"label": lab if n else "no", "support": support if n else []}


def _verdict(item_id: str, judge: str, value) -> dict:
    return {"item_id": item_id, "judge": judge, "judge_model": judge, "value": value, "method": "llm",
            "parsed": value is not None}


def _human(config: dict, L, corpus: tuple, rng) -> None:
    """MTRAG's annotator feedback on the replication slice's synthetic dialogues (per turn: its gold
    document accepted, a document of another dialogue rejected, a same-dialogue document shown
    unjudged; the domain's other documents never shown) and the human judge's verdicts on each
    accepted or rejected passage alone (mostly yes on accepted, mostly no on rejected)."""
    import pandas as pd

    from convrag.studies.worse_labels import paths
    from convrag.studies.worse_labels.followups import HUMAN_COLUMNS, HUMAN_SET
    from convrag.studies.worse_labels.plan import human_judge

    tasks, texts = corpus
    rows = []
    for t in tasks:
        d, conv = t.labels["domain"], t.conversation_id
        other = sorted(x for x in texts if x.startswith(f"{d}-") and not x.startswith(f"{conv}_"))
        shown = [(next(iter(t.gold_docs)), "relevant"), (str(rng.choice(other)), "rejected"),
                 (f"{conv}_doc_{TURNS + t.turn}", "unjudged")]
        rows += [dict(conversation_id=conv, turn=t.turn, task_id=t.task_id, doc_id=doc, judgment=j, domain=d)
                 for doc, j in shown]
    fb = pd.DataFrame(rows, columns=HUMAN_COLUMNS)
    write_parquet(fb, paths.human(L))
    judge = human_judge(config)
    verdicts = []
    for r in fb[fb["judgment"] != "unjudged"].drop_duplicates(["task_id", "doc_id"]).itertuples():
        lab = str(rng.choice(LABELS, p=[0.6, 0.2, 0.2] if r.judgment == "relevant" else [0.1, 0.2, 0.7]))
        verdicts.append(_verdict(f"{HUMAN_SET}|{r.task_id}|{r.doc_id}", judge,
                                 {"label": lab, "support": [] if lab == "no" else [1]}))
    write_jsonl(paths.human_labels(L, judge), verdicts)


def rehearsal_inputs(config: dict, folder: Path, questions: int = 4, runs: int = 2, seed: int = 0) -> dict:
    """Write the synthetic inputs under ``folder`` at the paths the study's artifacts name; returns
    the artifacts (input name -> path(s)) the targets read. ``runs`` is unused (one run per cell:
    the study has no repeated runs)."""
    from convrag.layout import Layout
    from convrag.studies.worse_labels import judges, paths, wiring
    from convrag.studies.worse_labels.contexts import build_contexts
    from convrag.studies.worse_labels.plan import content_judges, human_judge, readers, sets, slices

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    L = Layout(str(folder))
    arts = wiring.artifacts(config, L)
    w = config["worse_labels"]
    answer = wiring.answer_models(config)
    contexts, corpora = {}, {}
    for s in slices(config):
        tasks = _tasks(config, s, questions)
        texts = _corpus(tasks, rng)
        df, items = build_contexts(s, tasks, _runs(config, s, tasks, texts, rng), texts, w["top_k"],
                                   slices(config)[s].get("control"))
        write_parquet(df, paths.contexts(L, s))
        write_jsonl(paths.contexts(L, s, "items.jsonl"), items)
        contexts[s] = df
        corpora[s] = (tasks, texts)
        gold_in = dict(zip(df["context_id"], ~df["no_gold"].astype(bool)))
        n_docs = dict(zip(df["context_id"], df["doc_ids"].map(len)))
        labelled = [c for c in df["context_id"] if c.split("|", 1)[0] in set(sets(config, s)) - {"none"}]
        for j in content_judges(config):
            write_jsonl(paths.labels(L, s, j),
                        [_verdict(c, j, _label(rng, gold_in[c], n_docs[c])) for c in labelled])
        read = [c for c in df["context_id"] if c.split("|", 1)[0] in set(sets(config, s)) - {"control"}]
        for m in readers(config):
            recs = []
            for c in read:
                p = float(np.clip(rng.beta(5, 2) if gold_in[c] else rng.beta(2, 3 if n_docs[c] else 20), 1e-4, 1 - 1e-4))
                status = ("ANSWERABLE" if rng.random() < p else "UNANSWERABLE") if rng.random() >= 0.05 else None
                recs.append({"item_id": c, "reader": m, "status": status, "p_answerable": p,
                             "answer": f"answer of {c}" if status == "ANSWERABLE" else "", "parsed": status is not None})
            write_jsonl(paths.reads(L, s, m), recs)
            if answer:
                write_jsonl(paths.correctness(L, s, m),
                            [_verdict(r["item_id"], j, int(rng.integers(3 if gold_in[r["item_id"]] else 1, 6)))
                             for r in recs for j in answer])
    for s in wiring.audited(config):
        a = w["judges"]["audit"]
        sample = judges.audit_sample(contexts[s], a["strata"] or judges.AUDIT_STRATA_PAPER, a["seed"])
        gold_in = dict(zip(contexts[s]["context_id"], ~contexts[s]["no_gold"].astype(bool)))
        recs = []
        for row in sample.itertuples():
            holistic, claims = (_label(rng, gold_in[row.context_id], w["top_k"])["label"] for _ in range(2))
            agree = holistic == claims
            final = holistic if agree else _label(rng, gold_in[row.context_id], w["top_k"])["label"]
            recs.append({"audit_id": row.audit_id, "context_id": row.context_id, "holistic": holistic,
                         "claims": claims, "adjudicated": None if agree else final, "final": final,
                         "agree": agree, "auditor": a["model"]})
        write_jsonl(paths.audit(L, s), recs)
    for j in wiring.fitted_rungs(config):
        names = wiring.component_names(config, j["slice"], j["rung"])
        given = wiring.rung(config, j["slice"], j["rung"]).get("weights")
        write_json(paths.weights(L, j["slice"], j["rung"]),
                   {"weights": list(given or [1.0 / len(names)] * len(names)), "components": names,
                    "source": "given" if given else "rehearsal (equal)"})
    if human_judge(config):
        _human(config, L, corpora[w["replication"] or w["main"]], rng)
    _gold_reports(config, L, corpora)
    return {k: v for k, v in arts.items() if v is not None}


def _gold_reports(config: dict, L, corpora: dict) -> None:
    """Each slice domain's gold-in-corpus report (``convrag.data.gold.check_gold`` on the
    synthetic corpus: every gold id found), at the paths the ``gold`` artifact names: the data
    table reads its corpus sizes, the captions find nothing missing."""
    from convrag.data.benchmarks import corpus_id
    from convrag.data.gold import check_gold
    from convrag.studies.worse_labels.plan import slice_domains, slices

    for s, sp in slices(config).items():
        tasks, texts = corpora[s]
        for d in slice_domains(config, s):
            ids = [x for x in texts if x.startswith(f"{d}-")]
            rep = check_gold(tasks, ids, benchmark=sp["benchmark"], domain=d, allow_missing=False)
            write_json(L.corpus_gold(corpus_id(sp["benchmark"], d)), rep)
