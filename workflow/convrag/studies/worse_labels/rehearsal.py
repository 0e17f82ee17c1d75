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
from convrag.report.rehearsal import half_up

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
    from convrag.studies.worse_labels import paths, wiring
    from convrag.studies.worse_labels.contexts import build_contexts
    from convrag.studies.worse_labels.plan import content_judges, human_judge, sets, slices

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    L = Layout(str(folder))
    arts = wiring.artifacts(config, L)
    w = config["worse_labels"]
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
        _reads(config, L, s, df, rng)
    _audit(config, L, contexts, rng)
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


def _gold_reports(config: dict, L, corpora: dict, sizes: dict | None = None) -> None:
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
            if sizes and d in sizes.get(s, {}):  # the calibrated rehearsal: the corpus size an entry names
                rep["passages"] = sizes[s][d]
            write_json(L.corpus_gold(corpus_id(sp["benchmark"], d)), rep)


# ---- the calibrated rehearsal (convrag.report.rehearsal.rehearse_calibrated) ------------------------
#
# Why: the verdict rules are proven without a GPU by a rehearsal whose per-unit values are drawn so
# that each published number lands on a chosen value (its published value: "reproduced"; moved by
# three interval widths or tolerances: "not reproduced"). The files are the ones ``rehearsal_inputs``
# writes, at the paper's size where an entry names it (RECOR dev's 858 turns in 211 dialogues of 3-5
# turns, MTRAG's 777), so that a share's interval is as narrow as the paper's. What is drawn as
# exact counts, per slice:
#
# - the rankings: per rung and turn the rank of the turn's gold (1-10, or below the depth: nDCG@10
#   0), chosen per domain so that the rung's macro nDCG@10 and its share of turns with gold in the
#   top k (``ladder_retrieval``, Table 3's nDCG and no-gold share) land on their targets; a
#   near-verbatim copy of the gold put into the top k of as many no-gold contexts as the copy share
#   asks (``copies``);
# - the content labels: per (rung, labeller) the yes / partial / no counts among the no-gold
#   contexts (false-miss share, its partial-including form, the precision of "no gold" with
#   partial dropped, its partial-insufficient form) and among the gold ones (Youden's J); the
#   control contexts' "yes" count; the human-judged MTRAG passages' "yes" counts.
#
# Everything else (readers, the audit, the answer judges) is drawn as ``rehearsal_inputs`` draws it.

DEFAULT_NG = (0.3, 0.2)  # yes, partial shares of a no-gold group without targets
DEFAULT_G = (0.7, 0.2)  # yes, partial shares of a gold group without targets
RANK_VALUES = {r: 1.0 / np.log2(r + 1) for r in range(1, 11)}  # nDCG@10 of one gold document at rank r
HIT_RANGE = (0.05, 0.9)  # the share of turns with gold in the top k a drawn rung keeps within
CORPUS_PAD = 25  # filler documents per domain (more than a ranking's DEPTH)
LABEL_METRICS = {"false_miss_share": "fm", "false_miss_share_with_partial": "fmp", "precision": "prec",
                 "precision_partial_insufficient": "ppi", "youden_j": "J"}
DATA_STATS = ("turns", "dialogues", "turns_per_dialogue_min", "turns_per_dialogue_max", "corpus_documents_min",
              "corpus_documents_max", "contexts_judged")


def _digits(v: float) -> int:
    s = f"{v:.6f}".rstrip("0")
    return len(s.split(".")[1]) if "." in s else 0


def _route(e, v: float, config: dict) -> tuple[tuple | None, str | None]:
    """Where entry ``e``'s number is drawn (a cell of the design) or why it cannot be."""
    from convrag.studies.worse_labels.plan import slices

    o, w = e.ours, e.ours.where
    if o.agg is not None:
        return None, (f"an aggregate ({o.agg}) over rows of {o.target}: our table gives no 95% interval for it, so it "
                      "is inconclusive whatever its value")
    s, rung, lab = w.get("slice"), w.get("rung"), w.get("labeller")
    if o.target == "data" and w.get("domain") == "all" and o.value in DATA_STATS and s in slices(config):
        return ("data", s, o.value), None
    if o.target in ("ladder_retrieval", "table3_mtrag") and o.value in ("ndcg10_macro", "ndcg10") and rung:
        return ("ndcg", s, rung), None
    if o.target == "ladder_retrieval" and o.value == "gold_in_topk" and rung:
        return ("hit", s, rung), None
    if o.target == "table3_mtrag" and o.value == "share_no_gold":
        return ("miss", s, rung), None
    if o.target == "copies" and o.value == "share_copy":
        return ("copy", s, rung), None
    if o.target in ("figure2b_precision", "table3_mtrag") and o.value in LABEL_METRICS and rung:
        lab = lab or config["worse_labels"]["judges"]["primary"]
        if lab == "audit":
            return None, ("the audit labels a fixed sample (judges.audit_sample: 50 no-gold contexts of a rung, 100 on "
                          "Fusion) whose 95% interval is wider than four margins at any value: inconclusive")
        return ("lab", s, rung, lab, LABEL_METRICS[o.value]), None
    if o.target == "table1_labellers" and o.value == "control_yes_share" and isinstance(lab, str):
        return ("ctl", s, lab), None
    if o.target == "mtrag_human" and o.value == "yes_share":
        return ("human", w["judgment"]), None
    if o.target == "table1_labellers" and o.value == "n_control_yes":
        return None, (f"a count with an interval of about +-2 sqrt({v:g}) around it, wider than four margins (a tenth "
                      "of it) at any number of control contexts: inconclusive")
    if o.target in ("ladder_steps", "table1_labellers") and o.value in ("diff", "youden_change"):
        return None, ("a paired change between two rungs: the difference of two drawn numbers (each driven), so it "
                      "lands on its value with theirs and cannot be moved by itself")
    if o.target == "copies" and o.value == "ratio_to_first":
        return None, ("a ratio of two drawn copy shares (each driven): lands with them, cannot be moved by itself, "
                      "and its interval over a handful of BM25-turn copies is wider than four margins")
    if o.low is None:
        return None, f"{o.target}'s {o.value}: our table gives no 95% interval for it, so it is inconclusive whatever its value"
    if o.target == "agreement":
        return None, ("an agreement measure (kappa, raw agreement) of two labellers over the same contexts: a function of "
                      "their joint label table, whose margins the precision entries fix; not constructed")
    if o.target in ("figure3_auroc", "score_detectors"):
        return None, ("a difference of two AUROCs (a reader's p(answerable) or a retrieval score ranked against two "
                      "labels at once): a rank statistic this rehearsal does not construct")
    if o.target == "contrast_2b_2c":
        return None, ("a difference of the reader's refusal shares between insufficient and gold contexts of the same "
                      "turns: the readers' statuses are drawn as rehearsal_inputs draws them, not constructed")
    if o.target == "dialogue_tied":
        return None, ("the precision discounting dialogue-tied evidence: it rests on the classes of the documents the "
                      "judge names as support, which this rehearsal does not construct")
    return None, f"{o.target}'s {o.value} is not a share or count of per-unit values this rehearsal draws"


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def _allot(total: int, sizes: list[int]) -> list[int]:
    """``total`` split over groups in proportion to ``sizes`` (largest remainder)."""
    n = sum(sizes)
    raw = [total * s / n for s in sizes]
    out = [int(np.floor(x)) for x in raw]
    for i in sorted(range(len(sizes)), key=lambda i: out[i] - raw[i])[: total - sum(out)]:
        out[i] += 1
    return out


def _dialogue_lengths(turns: int, dialogues: int, lo: int, hi: int) -> list[int]:
    """``dialogues`` lengths summing to ``turns``, as even as they go, then spread so that one is
    ``lo`` and one ``hi`` where the total allows (RECOR's 3-5 turns)."""
    base = [turns // dialogues + (i < turns % dialogues) for i in range(dialogues)]
    if dialogues < 2 or lo >= hi:
        return base
    for _ in range(turns):  # raise the longest to hi, a turn at a time from the longest other above lo
        j = int(np.argmax(base))
        donors = [a for a in range(dialogues) if a != j and base[a] > lo]
        if base[j] >= hi or not donors:
            break
        a = max(donors, key=lambda x: base[x])
        base[a] -= 1
        base[j] += 1
    for _ in range(turns):  # lower the shortest to lo, a turn at a time to the shortest other below hi
        i = int(np.argmin(base))
        takers = [k for k in range(dialogues) if k != i and base[k] < hi and base[k] >= lo]
        if base[i] <= lo or not takers:
            break
        k = min(takers, key=lambda x: base[x])
        base[i] -= 1
        base[k] += 1
    return base


def _ranks(n: int, k: int, mean: float | None, rng) -> tuple[np.ndarray, float]:
    """Gold ranks for ``n`` turns, ``k`` of them in the top 5 (1-5) and the rest at 6-10 or below
    the depth (0), with the mean nDCG@10 as near ``mean`` as single-turn moves get; returns the
    ranks and the sum of their nDCG values."""
    if mean is None:  # no target: top-k turns at a random rank, the rest below the depth
        ranks = np.r_[rng.integers(1, 6, size=k), np.zeros(n - k, dtype=int)]
        return rng.permutation(ranks), float(sum(RANK_VALUES.get(int(r), 0.0) for r in ranks))
    top_opts, rest_opts = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 0]
    val = lambda r: RANK_VALUES.get(r, 0.0)  # noqa: E731
    ranks = np.r_[np.full(k, 3), np.zeros(n - k, dtype=int)]
    goal = mean * n
    total = float(sum(val(int(r)) for r in ranks))
    for _ in range(4 * n + 50):
        resid = goal - total
        best = (abs(resid), None, None)
        for grp, opts in ((slice(0, k), top_opts), (slice(k, n), rest_opts)):
            for cur in set(int(r) for r in ranks[grp]):
                for new in opts:
                    d = val(new) - val(cur)
                    if abs(resid - d) < best[0] - 1e-12:
                        best = (abs(resid - d), (grp, cur), new)
        if best[1] is None:
            break
        (grp, cur), new = best[1], best[2]
        idx = np.flatnonzero(ranks[grp] == cur)[0] + (grp.start or 0)
        total += val(new) - val(cur)
        ranks[idx] = new
    return rng.permutation(ranks), total


def _label_counts(g0: int, g1: int, t: dict) -> tuple[dict, dict, dict]:
    """(no-gold counts, gold counts, achieved values) of one (rung, labeller) group with ``g0``
    no-gold and ``g1`` gold contexts, for its targets ``t`` (fm: yes / no-gold; fmp: (yes +
    partial) / no-gold; prec: no / (yes + no) over no-gold; ppi: (no + partial) / no-gold; J:
    Youden's J, partial dropped). The shares come first, the precision from them, J from the
    gold contexts' counts."""
    fm = t.get("fm", 1 - t["ppi"] if "ppi" in t else None)
    y = half_up(fm * g0) if fm is not None else half_up(DEFAULT_NG[0] * g0)
    y = min(max(y, 0), g0)
    if "fmp" in t:
        p = min(max(half_up(t["fmp"] * g0) - y, 0), g0 - y)
    elif "prec" in t and t["prec"] < 1:
        n = half_up(t["prec"] * y / (1 - t["prec"]))
        if n > g0 - y:  # no room for the "no" the precision asks: fewer "yes"
            y = half_up(g0 * (1 - t["prec"]))
            n = g0 - y
        p = g0 - y - n
    else:
        p = min(half_up(DEFAULT_NG[1] * g0), g0 - y)
    n = g0 - y - p
    if "J" in t and g1:
        ng, pg = np.meshgrid(np.arange(g1 + 1), np.arange(g1 + 1), indexing="ij")
        yg = g1 - ng - pg
        ok = yg >= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            j = n / (n + ng) + yg / (yg + y) - 1
        for goal in (t["J"], t.get("J_alt")):  # the target, else (out of reach) as far the other way
            if goal is None:
                continue
            err = np.where(ok & np.isfinite(j), np.abs(j - goal), np.inf) + 1e-9 * pg
            i = np.unravel_index(np.argmin(err), err.shape)
            if err[i] <= 0.01:
                break
        ngold, pgold = int(ng[i]), int(pg[i])
    else:
        ngold = g1 - half_up(DEFAULT_G[0] * g1) - half_up(DEFAULT_G[1] * g1)
        pgold = half_up(DEFAULT_G[1] * g1)
    ygold = g1 - ngold - pgold
    nan = float("nan")
    got = {"fm": y / g0 if g0 else nan, "fmp": (y + p) / g0 if g0 else nan, "ppi": (n + p) / g0 if g0 else nan,
           "prec": n / (y + n) if y + n else nan,
           "J": (n / (n + ngold) + ygold / (ygold + y) - 1) if (n + ngold) and (ygold + y) else nan}
    return {"yes": y, "partial": p, "no": n}, {"yes": ygold, "partial": pgold, "no": ngold}, got


def calibrated_rehearsal_inputs(config: dict, folder: Path, targets: dict[str, float], questions: int = 4,
                                runs: int = 2, seed: int = 0) -> tuple[dict, dict[str, str]]:
    """The files of ``rehearsal_inputs`` with each drivable published number drawn at its target
    (``targets``: entry id -> value on the published scale); returns the artifacts and, for each
    entry of ``targets`` that is not driven, why. ``questions`` sizes a slice no entry sizes
    (dialogues of three turns per domain); ``runs`` is unused."""
    from convrag.layout import Layout
    from convrag.report.reproduction import load_published, published_path
    from convrag.studies.worse_labels import paths, wiring
    from convrag.studies.worse_labels.contexts import build_contexts
    from convrag.studies.worse_labels.plan import content_judges, human_judge, sets, slice_domains, slices

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    L = Layout(str(folder))
    arts = wiring.artifacts(config, L)
    w = config["worse_labels"]
    pub = {e.id: e for e in load_published(published_path("worse_labels"), "worse_labels").entries}
    undriven: dict[str, str] = {}
    cells: dict[tuple, list[tuple[str, float]]] = {}
    for eid, v in targets.items():
        e = pub[eid]
        cell, why = _route(e, v, config)
        if cell is None:
            undriven[eid] = why
        else:
            cells.setdefault(cell, []).append((eid, v))
            if e.kind == "estimate" and e.ours.low is None:  # drawn at its value all the same
                undriven[eid] = (f"{e.ours.target}'s {e.ours.value}: our table gives no 95% interval for it, so it is "
                                 "inconclusive whatever its value (drawn at it all the same)")
    # one value per cell: deterministic entries meet where their tolerances overlap; otherwise the first
    value: dict[tuple, float] = {}
    for cell, got in cells.items():
        lo = max(v - (pub[i].tolerance or 0) for i, v in got if pub[i].kind == "deterministic") if any(
            pub[i].kind == "deterministic" for i, _ in got) else None
        hi = min(v + (pub[i].tolerance or 0) for i, v in got if pub[i].kind == "deterministic") if lo is not None else None
        if lo is not None and lo <= hi and all(lo <= v <= hi for i, v in got if pub[i].kind != "deterministic"):
            value[cell] = (lo + hi) / 2
        else:
            value[cell] = got[0][1]
            for i, v in got[1:]:
                if abs(v - got[0][1]) > 1e-12:
                    undriven[i] = (f"the same cell as {got[0][0]} ({got[0][1]:g}), which is drawn: one rung gives one "
                                   f"value, and {v:g} lies outside its tolerance")
    ladders = {s: list(sp["ladder"]) for s, sp in slices(config).items()}
    soft = {c for c, got in cells.items() if all(i in undriven for i, _ in got)}  # drawn, but no entry driven
    mirror = {c: 2 * pub[got[0][0]].value - value[c] for c, got in cells.items()
              if abs(value[c] - pub[got[0][0]].value) > 1e-12}  # a moved target reflected about the published value

    def want(*cell):
        return value.get(cell)

    contexts, corpora, achieved, denominators, sizes, spread = {}, {}, {}, {}, {}, {}
    for s, sp in slices(config).items():
        doms = slice_domains(config, s)
        n_turns = want("data", s, "turns")
        n_dlg = want("data", s, "dialogues")
        if n_turns is None:
            n_turns = questions * TURNS * len(doms)
            per_dom = _split(n_turns, len(doms))
            if n_dlg is None:
                n_dlg = questions * len(doms)
        else:
            n_turns = half_up(n_turns)
            est = (config.get("estimate") or {}).get("tasks", {}).get(sp["benchmark"])
            per_dom = (_allot(n_turns, [int(est[d]) for d in doms]) if isinstance(est, dict) and set(doms) <= set(est)
                       else _split(n_turns, len(doms)))
        lo_t = half_up(want("data", s, "turns_per_dialogue_min") or TURNS)
        hi_t = half_up(want("data", s, "turns_per_dialogue_max") or TURNS + (n_dlg is None))
        if n_dlg is None:  # dialogues of 3-5 turns where no entry says how many
            n_dlg = max(len(doms), half_up(n_turns / ((lo_t + hi_t) / 2)))
        n_dlg = half_up(n_dlg)
        # per domain as many dialogues as its turns allow with one dialogue at lo and one at hi (a
        # moved minimum or maximum can ask for fewer dialogues than the count entry: it gives way)
        dlg_dom = [min(max(nd, -(-(nt + hi_t - lo_t) // hi_t)), max(1, (nt - (hi_t - lo_t)) // lo_t))
                   for nd, nt in zip(_split(n_dlg, len(doms)), per_dom)]
        tasks, texts = [], {}
        words = [f"w{i}" for i in range(400)]
        b = sp["benchmark"]
        for d, nt, nd in zip(doms, per_dom, dlg_dom):
            for q, length in enumerate(_dialogue_lengths(nt, nd, lo_t, hi_t)):
                conv = f"{d}-{q}"
                for t in range(1, length + 1):
                    hist = [x for k in range(1, t) for x in ({"role": "user", "text": f"question {k} of {conv}?"},
                                                              {"role": "assistant", "text": f"answer {k}"})]
                    gold = f"{conv}_doc_{t}"
                    texts[gold] = " ".join(rng.choice(words, 30))
                    texts[f"{conv}_copy_{t}"] = texts[gold] + " w0"
                    tasks.append(TurnTask(task_id=f"{conv}_turn_{t}", benchmark=b, conversation_id=conv, turn=t,
                                          history=hist, question=f"question {t} of {conv}?",
                                          reference_answers=[f"answer {t}"], gold_docs={gold: 1},
                                          rewrite=f"standalone question {t} of {conv}?",
                                          labels={"domain": d, "first_turn": t == 1}))
            for i in range(CORPUS_PAD):
                texts[f"{d}-other-{i}"] = " ".join(rng.choice(words, 30))
        by_dom = {d: [t for t in tasks if t.labels["domain"] == d] for d in doms}
        runs_ = {}
        for rung in ladders[s]:
            hit = want("hit", s, rung)
            if hit is None and want("miss", s, rung) is not None:
                hit = 1 - want("miss", s, rung)
            if hit is None:
                i = ladders[s].index(rung)
                hit = 0.3 + 0.5 * i / max(1, len(ladders[s]) - 1)
            hit = min(max(hit, HIT_RANGE[0]), HIT_RANGE[1])  # contexts with and without gold kept for the labels
            k_dom = _allot(half_up(hit * len(tasks)), [len(by_dom[d]) for d in doms])
            mean = want("ndcg", s, rung)
            carry, run, sums = 0.0, {}, []
            for di, d in enumerate(doms):
                ts = by_dom[d]
                m = None if mean is None else min(max(mean + carry, 0.0), 1.0)
                ranks, total = _ranks(len(ts), k_dom[di], m, rng)
                if mean is not None:
                    carry += mean - total / len(ts)
                sums.append(total / len(ts))
                for t, r in zip(ts, ranks):
                    run[t.task_id] = int(r)
            achieved[("ndcg", s, rung)] = float(np.mean(sums))
            no_gold = [tid for tid, r in run.items() if not 1 <= r <= w["top_k"]]
            achieved[("hit", s, rung)] = 1 - len(no_gold) / len(run)
            achieved[("miss", s, rung)] = len(no_gold) / len(run)
            denominators[("hit", s, rung)] = denominators[("miss", s, rung)] = len(run)
            share = want("copy", s, rung)
            n_copy = half_up(share * len(no_gold)) if share is not None else len(no_gold) // 10
            copied = set(rng.choice(no_gold, size=n_copy, replace=False)) if n_copy else set()
            achieved[("copy", s, rung)] = n_copy / len(no_gold) if no_gold else float("nan")
            denominators[("copy", s, rung)] = len(no_gold)
            scored = {}
            for t in tasks:
                d = t.labels["domain"]
                order = list(rng.permutation([f"{d}-other-{i}" for i in range(CORPUS_PAD)]))[:DEPTH]
                if t.task_id in copied:
                    order.insert(int(rng.integers(0, w["top_k"])), f"{t.conversation_id}_copy_{t.turn}")
                r = run[t.task_id]
                gold = next(iter(t.gold_docs))
                order.insert(r - 1 if r else len(order), gold)
                scored[t.task_id] = {doc: float(len(order) + 1 - j) for j, doc in enumerate(order)}
            runs_[rung] = scored
        df, items = build_contexts(s, tasks, runs_, texts, w["top_k"], sp.get("control"))
        write_parquet(df, paths.contexts(L, s))
        write_jsonl(paths.contexts(L, s, "items.jsonl"), items)
        contexts[s], corpora[s] = df, (tasks, texts)
        per = df[df["set"] == "gold"].groupby(["domain", "dialogue"]).size()
        achieved[("data", s, "turns")] = float(len(tasks))
        achieved[("data", s, "dialogues")] = float(len(per))
        achieved[("data", s, "turns_per_dialogue_min")] = float(per.min())
        achieved[("data", s, "turns_per_dialogue_max")] = float(per.max())
        achieved[("data", s, "contexts_judged")] = float(df["set"].isin([*_analysed(config, s), "gold"]).sum())
        sizes[s] = _corpus_sizes(want("data", s, "corpus_documents_min"), want("data", s, "corpus_documents_max"),
                                 {d: sum(1 for x in texts if x.startswith(f"{d}-")) for d in doms})
        achieved[("data", s, "corpus_documents_min")] = float(min(sizes[s].values()))
        achieved[("data", s, "corpus_documents_max")] = float(max(sizes[s].values()))
        # the content labels: designed counts per (rung, labeller), gold and control as the design says
        labelled = df[df["set"].isin(set(sets(config, s)) - {"none"})]
        n_docs = dict(zip(df["context_id"], df["doc_ids"].map(len)))
        for j in content_judges(config):
            verdicts = {}
            for set_, g in labelled.groupby("set", sort=False):
                ids = list(rng.permutation(g["context_id"].to_numpy()))
                ng = set(g.loc[g["no_gold"].astype(bool), "context_id"])
                if set_ == "control":
                    share = want("ctl", s, j)
                    n_yes = half_up(share * len(ids)) if share is not None else len(ids) // 10
                    achieved[("ctl", s, j)], denominators[("ctl", s, j)] = n_yes / len(ids), len(ids)
                    labs = {c: ("yes" if i < n_yes else "no") for i, c in enumerate(ids)}
                elif set_ in ladders[s]:
                    t = {m: want("lab", s, set_, j, m) for m in LABEL_METRICS.values()}
                    t = {m: x for m, x in t.items() if x is not None}
                    for m in list(t):  # out of [0, 1] (or J out of reach): as far the other way
                        alt = mirror.get(("lab", s, set_, j, m))
                        if alt is not None and not 0 <= t[m] <= 1:
                            t[m] = alt
                    if ("J" in t and ("lab", s, set_, j, "J") in mirror):
                        t["J_alt"] = mirror[("lab", s, set_, j, "J")]
                    if "fm" in t and "prec" in t and ("lab", s, set_, j, "fm") in soft:
                        t["fm"] = min(t["fm"], 0.8 * (1 - t["prec"]))  # a drawn-only share gives way
                    if "fm" not in t and "ppi" not in t and j != w["judges"]["primary"]:
                        prim = want("lab", s, set_, w["judges"]["primary"], "fm")
                        if prim is not None:  # another judge's false misses: the primary's share where it has
                            t["fm"] = min(prim, 0.8 * (1 - t.get("prec", 0.0)))  # one, room left for its "no"
                    c0, c1, got = _label_counts(len(ng), len(ids) - len(ng), t)
                    labs = _assign([c for c in ids if c in ng], c0) | _assign([c for c in ids if c not in ng], c1)
                    for m, x in got.items():
                        achieved[("lab", s, set_, j, m)] = x
                    y, n = c0["yes"], c0["no"]
                    sens = n / (n + c1["no"]) if n + c1["no"] else 0.0
                    spec = c1["yes"] / (c1["yes"] + y) if c1["yes"] + y else 0.0
                    spread[("lab", s, set_, j, "J")] = 3.92 * np.sqrt(sens * (1 - sens) / max(1, n + c1["no"])
                                                                      + spec * (1 - spec) / max(1, c1["yes"] + y))
                    denominators.update({("lab", s, set_, j, "fm"): len(ng), ("lab", s, set_, j, "fmp"): len(ng),
                                         ("lab", s, set_, j, "ppi"): len(ng), ("lab", s, set_, j, "prec"): y + n,
                                         ("lab", s, set_, j, "J"): y + n + c1["yes"] + c1["no"]})
                else:  # gold: mostly yes
                    c1 = {"yes": half_up(DEFAULT_G[0] * len(ids)), "partial": half_up(DEFAULT_G[1] * len(ids))}
                    c1["no"] = len(ids) - c1["yes"] - c1["partial"]
                    labs = _assign(ids, c1)
                for c, lab in labs.items():
                    k = n_docs[c]
                    verdicts[c] = {"label": lab if k else "no",
                                   "support": [] if lab == "no" or not k else [int(rng.integers(1, k + 1))]}
            write_jsonl(paths.labels(L, s, j), [_verdict(c, j, verdicts[c]) for c in labelled["context_id"]])
        _reads(config, L, s, df, rng)
    _audit(config, L, contexts, rng)
    for j in wiring.fitted_rungs(config):
        names = wiring.component_names(config, j["slice"], j["rung"])
        given = wiring.rung(config, j["slice"], j["rung"]).get("weights")
        write_json(paths.weights(L, j["slice"], j["rung"]),
                   {"weights": list(given or [1.0 / len(names)] * len(names)), "components": names,
                    "source": "given" if given else "rehearsal (equal)"})
    if human_judge(config):
        got = _human_calibrated(config, L, corpora[w["replication"] or w["main"]], rng,
                                {j: want("human", j) for j in ("relevant", "rejected")})
        for j, (share, n) in got.items():
            achieved[("human", j)], denominators[("human", j)] = share, n
    _gold_reports(config, L, corpora, sizes)
    # what each driven entry gets: its cell's drawn value, within a count's step and the published
    # value's rounding of its target (or its tolerance), or it is listed with what it gets
    for cell, got in cells.items():
        for eid, v in got:
            if eid in undriven:
                continue
            e = pub[eid]
            x = achieved.get(cell)
            if x is None:
                undriven[eid] = f"the grid has no {cell[1:]} to draw it in"
                continue
            if e.kind == "deterministic":
                ok = abs(x - v) <= (e.tolerance or 0) + 1e-9
            else:
                step = 1.0 if e.scale == "count" else 1.0 / max(1, denominators.get(cell, 1))
                ok = abs(x - v) <= step + 0.5 * 10 ** -max(_digits(e.value), 2) + 1e-9
            wide = _width(cell, x, denominators, spread)
            if ok and e.kind == "estimate" and e.scale == "share" and wide > WIDE:
                undriven[eid] = (f"drawn at {x:.4g}, but at this size ({denominators.get(cell)} units) its 95% interval is "
                                 f"about {wide:.2f} wide, more than four margins of 0.03 allow (with room for the "
                                 "bootstrap's noise): inconclusive at any value near it")
            if not ok:
                undriven[eid] = (f"over-determined: drawn with the other numbers of its cell's group ({cell[0]} "
                                 f"{', '.join(map(str, cell[1:]))}) at their targets it comes out at {x:.4g}, not {v:.4g}")
    return {k: v for k, v in arts.items() if v is not None}, undriven


WIDE = 0.115  # a share's predicted 95% width above which the width rule (4 margins of .03) may call it inconclusive


def _width(cell: tuple, x: float, denominators: dict, spread: dict) -> float:
    """The 95% interval width a share drawn at ``x`` over its cell's units should get (a
    binomial's; Youden's J: its two rates')."""
    if cell in spread:
        return float(spread[cell])
    n = denominators.get(cell)
    if not n or not np.isfinite(x):
        return 0.0
    return float(3.92 * np.sqrt(max(x * (1 - x), 0.0) / n))


def _analysed(config: dict, s: str) -> list[str]:
    from convrag.studies.worse_labels.plan import analysed_rungs

    return analysed_rungs(config, s)


def _assign(ids: list, counts: dict) -> dict:
    """The first ``counts['yes']`` of ``ids`` yes, the next partial, the rest no."""
    y, p = counts["yes"], counts["partial"]
    return {c: ("yes" if i < y else "partial" if i < y + p else "no") for i, c in enumerate(ids)}


def _corpus_sizes(lo: float | None, hi: float | None, real: dict[str, int]) -> dict[str, int]:
    """Each domain's corpus size in the gold report: the real synthetic count, or, where entries
    name the fewest and most documents, the first domain the most, the second the fewest, the
    others evenly between."""
    doms = list(real)
    if lo is None and hi is None:
        return dict(real)
    lo_, hi_ = half_up(lo if lo is not None else min(real.values())), half_up(hi if hi is not None else max(real.values()))
    lo_, hi_ = max(lo_, max(real.values())), max(hi_, max(real.values()))
    out = {}
    for i, d in enumerate(doms):
        out[d] = hi_ if i == 0 else lo_ if i == 1 else half_up(lo_ + (hi_ - lo_) * i / (len(doms) + 1))
    return out


def _reads(config: dict, L, s: str, df, rng) -> None:
    """The readers' and answer judges' records, as ``rehearsal_inputs`` draws them."""
    from convrag.studies.worse_labels import paths, wiring
    from convrag.studies.worse_labels.plan import readers, sets

    answer = wiring.answer_models(config)
    gold_in = dict(zip(df["context_id"], ~df["no_gold"].astype(bool)))
    n_docs = dict(zip(df["context_id"], df["doc_ids"].map(len)))
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


def _audit(config: dict, L, contexts: dict, rng) -> None:
    """The auditor's records on ``judges.audit_sample``'s draw, as ``rehearsal_inputs`` draws them."""
    from convrag.studies.worse_labels import judges, paths, wiring

    w = config["worse_labels"]
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


def _human_calibrated(config: dict, L, corpus: tuple, rng, shares: dict) -> dict[str, tuple[float, int]]:
    """``_human``'s feedback and verdicts with the human judge's "yes" share on the accepted and
    on the rejected passages drawn at ``shares`` (judgment -> share, None: as ``_human``);
    returns judgment -> (the share drawn, its passages)."""
    import pandas as pd

    from convrag.studies.worse_labels import paths
    from convrag.studies.worse_labels.followups import HUMAN_COLUMNS, HUMAN_SET
    from convrag.studies.worse_labels.plan import human_judge

    tasks, texts = corpus
    rows = []
    for t in tasks:
        d, conv = t.labels["domain"], t.conversation_id
        shown = [(next(iter(t.gold_docs)), "relevant"), (f"{d}-other-{int(rng.integers(0, CORPUS_PAD))}", "rejected"),
                 (f"{conv}_copy_{t.turn}", "unjudged")]
        rows += [dict(conversation_id=conv, turn=t.turn, task_id=t.task_id, doc_id=doc, judgment=j, domain=d)
                 for doc, j in shown]
    fb = pd.DataFrame(rows, columns=HUMAN_COLUMNS)
    write_parquet(fb, paths.human(L))
    judge = human_judge(config)
    shown = fb[fb["judgment"] != "unjudged"].drop_duplicates(["task_id", "doc_id"])
    verdicts, got = [], {}
    for judgment, default in (("relevant", 0.6), ("rejected", 0.1)):
        part = shown[shown["judgment"] == judgment]
        share = shares.get(judgment)
        n_yes = half_up((default if share is None else share) * len(part))
        got[judgment] = (n_yes / len(part) if len(part) else float("nan"), len(part))
        order = rng.permutation(len(part))
        for i, r in zip(order, part.itertuples()):
            lab = "yes" if i < n_yes else "no"
            verdicts.append(_verdict(f"{HUMAN_SET}|{r.task_id}|{r.doc_id}", judge,
                                     {"label": lab, "support": [] if lab == "no" else [1]}))
    write_jsonl(paths.human_labels(L, judge), verdicts)
    return got
