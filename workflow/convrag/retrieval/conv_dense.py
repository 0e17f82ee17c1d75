"""Conversational dense retrieval for CORAL (Table 2): a session encoder trained on top of the
ad-hoc dense encoder, so that the whole session (history + question) maps to ONE query embedding
that is searched in the already-built ``dense`` faiss index.

Only the query side is trained; passages stay embedded by the frozen ad-hoc encoder, so the
corpus index is reused as is. Two training styles:

``kd`` (ConvDR-style knowledge distillation): MSE between the student's embedding of the session
    and the frozen teacher's embedding of the golden standalone rewrite (sentence-transformers'
    ``MSELoss`` with the teacher embeddings as labels).
``contrastive`` (Conv-ANCE): cross-entropy over session x passage similarities, the passages being
    the batch's positives (in-batch negatives) plus any hard negatives given with the examples.
    ``MultipleNegativesRankingLoss`` would back-propagate into the passage side too, so the
    passage embeddings are computed once with the frozen base model and the loss is a few lines
    of torch over them: cheaper, and exactly "passage encoder frozen = the ad-hoc encoder".

Both use a plain torch loop (AdamW, constant learning rate, seeded shuffling and dropout) rather
than the sentence-transformers Trainer: a handful of steps needs no datasets/accelerate
machinery, and the loop is deterministic on CPU (same inputs + seed -> same weights). On a GPU
the kernels are not guaranteed bit-identical. Embeddings are L2-normalised everywhere, as the
dense index expects (inner product = cosine); with a base model that has no Normalize module
(MiniLM has one) the KD student's raw output is regressed on the normalised teacher embedding,
which pulls it onto the unit sphere as well.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, DataError
from convrag.io import read_json, write_json
from convrag.records import TurnTask
from convrag.retrieval.base import passage_text, staging_dir
from convrag.retrieval.dense import load_encoder

STYLES = ("kd", "contrastive")
TRAINING_JSON = "training.json"


def session_text(history: list[dict], question: str, max_turns: int | None = None, sep: str = " [SEP] ") -> str:
    """The session as ONE encoder input: the current question first, then the earlier turns most
    recent first (ConvDR / Conv-ANCE order), so that truncation at the encoder's max length
    drops the oldest turns, not the question. ``max_turns`` keeps the last N history entries
    (user and assistant turns count one each); empty turns are left out."""
    if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 0):
        raise ConfigError(f"conv_dense: max_turns must be a non-negative integer or None, got {max_turns!r}")
    for i, turn in enumerate(history):
        if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
            raise DataError(f"conv_dense: history[{i}] must be a {{'role', 'text'}} dict, got {turn!r}")
    kept = history if max_turns is None else history[len(history) - min(max_turns, len(history)):]
    parts = [question.strip()] + [t["text"].strip() for t in reversed(kept)]
    return sep.join(p for p in parts if p)


def examples_from_tasks(tasks, passages_by_id: dict, max_turns: int | None = None) -> tuple[list[dict], dict]:
    """Training examples from TurnTask records: session from history + question, the benchmark's
    rewrite, and the gold passages with relevance > 0 (highest relevance first) as positives.
    A gold doc id missing from ``passages_by_id`` means the qrels and the corpus disagree, so it
    is an error rather than a silently dropped positive."""
    examples, report = [], {"tasks": 0, "with_rewrite": 0, "with_positives": 0, "positives": 0}
    for task in tasks:
        if isinstance(task, dict):
            task = TurnTask.from_dict(task)
        missing = sorted(d for d in task.gold_docs if d not in passages_by_id)
        if missing:
            raise DataError(f"task '{task.task_id}': gold doc id(s) {missing[:5]} not in the passage corpus")
        gold = sorted((d for d, rel in task.gold_docs.items() if rel > 0), key=lambda d: -task.gold_docs[d])
        rewrite = task.rewrite.strip() if task.rewrite and task.rewrite.strip() else None
        positives = [passage_text(passages_by_id[d]) for d in gold]
        examples.append({"session": session_text(task.history, task.question, max_turns),
                         "rewrite": rewrite, "positives": positives, "negatives": []})
        report["tasks"] += 1
        report["with_rewrite"] += rewrite is not None
        report["with_positives"] += bool(positives)
        report["positives"] += len(positives)
    return examples, report


def _check_example(i: int, ex) -> dict:
    def texts(key):
        v = ex.get(key) or []
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise DataError(f"conv_dense: example {i}: '{key}' must be a list of non-empty strings")
        return v

    if not isinstance(ex, dict):
        raise DataError(f"conv_dense: example {i} must be a dict, got {type(ex).__name__}")
    session = ex.get("session")
    if not isinstance(session, str) or not session.strip():
        raise DataError(f"conv_dense: example {i} has no 'session' text")
    rewrite = ex.get("rewrite")
    if rewrite is not None and not isinstance(rewrite, str):
        raise DataError(f"conv_dense: example {i}: 'rewrite' must be a string or null")
    return {"session": session, "rewrite": rewrite.strip() if rewrite and rewrite.strip() else None,
            "positives": texts("positives"), "negatives": texts("negatives")}


def _features(model, texts: list[str]) -> dict:
    """Tokenised batch on the model's device (``preprocess`` in sentence-transformers >= 6,
    ``tokenize`` before)."""
    prep = getattr(model, "preprocess", None)
    feats = prep(inputs=texts) if prep is not None else model.tokenize(texts)
    return {k: v.to(model.device) if hasattr(v, "to") else v for k, v in feats.items()}


def _embed(model, texts: list[str], batch_size: int):
    import torch

    emb = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                       show_progress_bar=False)
    return torch.from_numpy(np.ascontiguousarray(emb, dtype=np.float32)).to(model.device)


def _mse_loss(model):
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.losses import MSELoss
    except ImportError:  # 5.x
        from sentence_transformers.losses import MSELoss
    return MSELoss(model)


def _load(name_or_dir: str, device: str):
    """A fresh (uncached: it is trained in place) SentenceTransformer."""
    return load_encoder(name_or_dir, device)


def train_session_encoder(examples, *, style: str, base_model: str, out_dir, epochs: int = 1, batch_size: int = 8,
                          lr: float = 2e-5, seed: int = 0, max_steps: int | None = None, query_prefix: str = "",
                          temperature: float = 0.05, device: str = "auto", extra: dict | None = None) -> dict:
    """Train a session encoder from ``base_model`` (the ad-hoc encoder of the dense index) and save
    it to ``out_dir`` with ``training.json``. ``query_prefix`` is what the dense index puts before
    queries (bge-style): it goes before the sessions and the teacher's rewrites alike and is
    recorded, so ``encode_sessions`` applies it too. ``temperature`` scales the contrastive
    logits (cosines in [-1, 1] need sharpening; 0.05 = sentence-transformers' default scale 20).
    ``extra`` is recorded with the run (what the examples are). Returns the training record."""
    import torch

    if style not in STYLES:
        raise ConfigError(f"conv_dense: unknown training style {style!r} (allowed: {', '.join(STYLES)})")
    for key, v in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"conv_dense: {key} must be a positive integer, got {v!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1):
        raise ConfigError(f"conv_dense: max_steps must be a positive integer or None, got {max_steps!r}")
    checked = [_check_example(i, ex) for i, ex in enumerate(examples)]
    usable = [ex for ex in checked if (ex["rewrite"] if style == "kd" else ex["positives"])]
    if not usable:
        need = "a rewrite" if style == "kd" else "positives"
        raise DataError(f"conv_dense: none of the {len(checked)} examples has {need}; nothing to train on")

    t0 = time.perf_counter()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    out_dir = Path(out_dir)
    with staging_dir(out_dir) as tmp:
        model = _load(base_model, device)
        model.eval()  # frozen targets: computed once with the untrained (= ad-hoc) encoder
        with torch.no_grad():
            if style == "kd":
                targets = _embed(model, [query_prefix + ex["rewrite"] for ex in usable], batch_size)
            else:
                pool = list(dict.fromkeys(p for ex in usable for p in ex["positives"] + ex["negatives"]))
                col = {p: j for j, p in enumerate(pool)}
                pool_emb = _embed(model, pool, batch_size)
        mse = _mse_loss(model) if style == "kd" else None
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        model.train()
        steps, loss_value = 0, float("nan")
        per_epoch = math.ceil(len(usable) / batch_size)
        for epoch in range(epochs):
            order = list(range(len(usable)))
            rng.shuffle(order)
            for b in range(per_epoch):
                if max_steps is not None and steps >= max_steps:
                    break
                idx = order[b * batch_size:(b + 1) * batch_size]
                feats = _features(model, [query_prefix + usable[i]["session"] for i in idx])
                if style == "kd":
                    loss = mse([feats], targets[idx])
                else:
                    loss = _contrastive_loss(model, feats, [usable[i] for i in idx], epoch, col, pool_emb,
                                             temperature)
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                loss_value = float(loss.detach())
        model.eval()
        model.save(str(tmp))
        record = {"style": style, "base_model": base_model, "seed": seed, "epochs": epochs, "batch_size": batch_size,
                  "lr": lr, "max_steps": max_steps, "steps": steps, "query_prefix": query_prefix,
                  "temperature": temperature if style == "contrastive" else None,
                  "examples_used": len(usable), "examples_skipped": len(checked) - len(usable),
                  "final_loss": loss_value, "seconds": round(time.perf_counter() - t0, 3), **(extra or {})}
        write_json(tmp / TRAINING_JSON, record)
    return record


def _contrastive_loss(model, feats, batch: list[dict], epoch: int, col: dict, pool_emb, temperature: float):
    """Cross-entropy of each session over the batch's passages (its own positive, the other
    sessions' positives, all hard negatives). One positive per example and epoch, rotating
    through its positives; its other positives are masked out, not treated as negatives."""
    import torch

    pos = [ex["positives"][epoch % len(ex["positives"])] for ex in batch]
    cand = list(dict.fromkeys(pos + [n for ex in batch for n in ex["negatives"]]))
    where = {p: j for j, p in enumerate(cand)}
    q = model(feats)["sentence_embedding"]
    q = torch.nn.functional.normalize(q, dim=-1)
    logits = q @ pool_emb[[col[p] for p in cand]].T / temperature
    mask = torch.zeros_like(logits, dtype=torch.bool)
    for i, ex in enumerate(batch):
        for p in ex["positives"]:
            if p in where and p != pos[i]:
                mask[i, where[p]] = True
    logits = logits.masked_fill(mask, float("-inf"))
    labels = torch.tensor([where[p] for p in pos], device=logits.device)
    return torch.nn.functional.cross_entropy(logits, labels)


def encode_sessions(model_dir, sessions: list[str], batch_size: int = 32, device: str = "auto") -> np.ndarray:
    """L2-normalised float32 embeddings of session texts with a trained session encoder, ready
    for the dense index's inner-product search (the training's ``query_prefix`` is applied)."""
    model_dir = Path(model_dir)
    if not (model_dir / "modules.json").exists():
        raise DataError(f"{model_dir}: not a trained session encoder (no modules.json)")
    prefix = read_json(model_dir / TRAINING_JSON).get("query_prefix", "") if (model_dir / TRAINING_JSON).exists() else ""
    model = _load(str(model_dir), device)
    emb = model.encode([prefix + s for s in sessions] or [""], batch_size=batch_size, normalize_embeddings=True,
                       convert_to_numpy=True, show_progress_bar=len(sessions) >= 1000)
    return np.ascontiguousarray(emb[:len(sessions)], dtype=np.float32)
