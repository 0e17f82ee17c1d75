"""Learned-sparse retrieval with a tiny, seeded, locally built SPLADE model (no hub, no download).

The model is a 2-layer BertForMaskedLM with a 60-word WordPiece vocabulary saved as a plain
transformers folder; the retriever loads it by path. Its rankings are checked against dot
products computed here, independently, from a SparseEncoder assembled by hand.
"""

import json
import re
import shutil

import numpy as np
import pytest

from convrag.errors import ConfigError, DataError
from convrag.records import Passage, write_records
from convrag.retrieval import build_index, capabilities, load_retriever
from convrag.retrieval.sparse import DEFAULTS, top_k

DOCS = [
    Passage("whale", "Blue whale", "The blue whale is the largest animal on Earth, found in every sea."),
    Passage("paris", "Paris", "Paris is the capital and most populous city of France."),
    Passage("python", "Python", "Python is a programming language that emphasises code readability."),
    Passage("bread", "Bread", "Bread is baked from a dough of flour and water."),
    Passage("paris-copy", "Paris", "Paris is the capital and most populous city of France."),  # a tie with "paris"
    Passage("ocean", "", "The ocean covers most of the Earth and holds most of its water."),
]
QUERIES = ["biggest animal in the sea", "capital of France", "programming language code",
           "how is bread baked", "water"]
WORDS = sorted(set(re.findall(r"[a-z]+", " ".join(f"{p.title} {p.text} " for p in DOCS).lower()
                              + " ".join(QUERIES).lower())))


def _tiny_splade(folder):
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", "."] + WORDS
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True, model_max_length=64)
    torch.manual_seed(1234)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    model = BertForMaskedLM(cfg).eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return len(vocab)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sparse")
    n_vocab = _tiny_splade(tmp / "mlm")
    write_records(tmp / "c.jsonl", DOCS)
    params = {"model": str(tmp / "mlm"), "batch_size": 4}
    build_index("sparse", tmp / "c.jsonl", tmp / "idx", params)
    retriever = load_retriever("sparse", tmp / "idx", {**params, "batch_size": 16}, corpus_path=tmp / "c.jsonl")
    return tmp, params, retriever, n_vocab


@pytest.fixture(scope="module")
def reference(env):
    """Dense numpy vectors from a SparseEncoder built here from the same folder."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    tmp = env[0]
    enc = SparseEncoder(modules=[Transformer(str(tmp / "mlm"), transformer_task="fill-mask"),
                                 SpladePooling(pooling_strategy="max")], device="cpu")

    def vectors(texts, side, **kw):
        fn = enc.encode_query if side == "query" else enc.encode_document
        unique = list(dict.fromkeys(texts))  # the documented rule: identical texts share one vector
        out = fn(unique, convert_to_sparse_tensor=False, convert_to_tensor=True, **kw).cpu().numpy()
        return out.astype(np.float64)[[unique.index(t) for t in texts]]

    return vectors


def _doc_texts():
    return [f"{p.title}\n{p.text}" if p.title else p.text for p in DOCS]


def _ranking(scores: np.ndarray, k: int):
    """score descending, ties by corpus order, zero scores dropped: the documented rule."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [DOCS[i].doc_id for i in order if scores[i] > 0][:k]


def test_sparse_capabilities_and_defaults():
    c = capabilities("sparse")
    assert not (c.closed_book or c.needs_graph or c.uses_llm) and c.cost_class == "cheap"
    assert DEFAULTS["model"] == "opensearch-project/opensearch-neural-sparse-encoding-v2-distill"


def test_search_equals_independent_dot_products(env, reference):
    _, _, r, _ = env
    D = reference(_doc_texts(), "document")
    Q = reference(QUERIES, "query")
    # products summed element by element, not by a BLAS matrix product: a GEMM kernel may sum two
    # identical rows in different orders (edge rows), which would break the "paris" / "paris-copy" tie
    S = (Q[:, None, :] * D[None, :, :]).sum(-1)
    got = r.search(QUERIES, 3)
    assert [c.llm_calls for c in got.costs] == [0] * len(QUERIES)
    for qi, hits in enumerate(got):
        assert [d for d, _ in hits] == _ranking(S[qi], 3)
        ids = [p.doc_id for p in DOCS]
        assert np.allclose([s for _, s in hits], [S[qi, ids.index(d)] for d, _ in hits], rtol=1e-5)
    # the check above is about ranking, not luck: distinct documents have clearly distinct scores
    for row in S:
        distinct = np.sort(np.delete(row, 4))[::-1]  # "paris-copy" ties "paris" by construction
        assert np.min(-np.diff(distinct)) > 1e-4 * distinct[0]


def test_k_larger_than_corpus_and_ties_in_corpus_order(env, reference):
    _, _, r, _ = env
    hits = r.search(["capital of France"], 100)[0]
    assert len(hits) == len(DOCS)  # a random model's vectors overlap everywhere: all docs score > 0
    ids = [d for d, _ in hits]
    assert abs(ids.index("paris") - ids.index("paris-copy")) == 1 and ids.index("paris") < ids.index("paris-copy")
    assert dict(hits)["paris"] == dict(hits)["paris-copy"]  # identical passages share one vector
    twice = r.search(["water", "capital of France", "water"], 4)
    assert twice[0] == twice[2]
    # alone vs in a padded batch of three: the same ranking; scores equal up to float rounding
    # (the encoder's padded batch may sum in another order: 0.99510378 vs 0.99510384 measured)
    alone = r.search(["capital of France"], 4)[0]
    assert [d for d, _ in twice[1]] == [d for d, _ in alone]
    assert np.allclose([x for _, x in twice[1]], [x for _, x in alone], rtol=1e-6, atol=0)
    assert r.search([], 5) == []
    with pytest.raises(ConfigError, match="positive integer"):
        r.search(["x"], 0)


def test_index_files_and_manifest_counts(env, reference):
    import scipy.sparse as sp

    tmp, params, _, n_vocab = env
    man = json.loads((tmp / "idx" / "manifest.json").read_text())
    ids = json.loads((tmp / "idx" / "doc_ids.json").read_text())
    m = sp.load_npz(tmp / "idx" / "matrix.npz")
    assert ids == [p.doc_id for p in DOCS] and m.shape == (len(DOCS), n_vocab) and m.dtype == np.float32
    assert man["retriever"] == "sparse" and man["n_docs"] == len(DOCS)
    assert man["params"] == {**DEFAULTS, **params}
    idx = man["index"]
    per_doc = np.diff(m.tocsr().indptr)
    assert idx["dim"] == n_vocab and idx["nnz"] == m.nnz == int(per_doc.sum())
    assert idx["nnz_per_doc"]["min"] == per_doc.min() and idx["nnz_per_doc"]["max"] == per_doc.max()
    assert idx["nnz_per_doc"]["mean"] == pytest.approx(per_doc.mean(), abs=1e-3) and idx["empty_docs"] == 0
    assert len(idx["vocab_sha256"]) == 64 and idx["max_seq_length"] == 64
    D = reference(_doc_texts(), "document")
    assert np.allclose(m.toarray(), D, rtol=1e-5, atol=1e-6)
    assert m.nnz == int((D > 0).sum())  # no explicit zeros stored


def test_params_checked_against_manifest(env):
    tmp, params, _, _ = env
    idx = tmp / "idx"
    with pytest.raises(ConfigError, match=r"model='.*mlm' but model='other/model'"):
        load_retriever("sparse", idx, {**params, "model": "other/model"})
    for key, value in (("document_prompt", "passage: "), ("query_prompt", "query: "), ("max_length", 16),
                       ("max_active_dims", 8)):
        with pytest.raises(ConfigError, match=key):
            load_retriever("sparse", idx, {**params, key: value})
    load_retriever("sparse", idx, {**params, "batch_size": 1, "device": "cpu"})  # runtime keys may differ
    with pytest.raises(ConfigError, match="unknown param 'k1'"):
        load_retriever("sparse", idx, {**params, "k1": 0.9})
    with pytest.raises(ConfigError, match="batch_size"):
        load_retriever("sparse", idx, {**params, "batch_size": 0})
    with pytest.raises(ConfigError, match="max_length"):
        load_retriever("sparse", idx, {**params, "max_length": "long"})
    with pytest.raises(ConfigError, match="built for retriever 'sparse', not 'dense'"):
        load_retriever("dense", idx, {})
    write_records(tmp / "other.jsonl", DOCS[:2])
    with pytest.raises(DataError, match="different corpus"):
        load_retriever("sparse", idx, params, corpus_path=tmp / "other.jsonl")
    bad = tmp / "bad-idx"
    shutil.copytree(idx, bad)
    (bad / "doc_ids.json").write_text(json.dumps([p.doc_id for p in DOCS] + ["extra"]))
    with pytest.raises(DataError, match="rows for 7 doc ids"):
        load_retriever("sparse", bad, params)


def test_max_active_dims_prunes_and_drops_documents_without_a_shared_term(env, reference):
    tmp, params, _, _ = env
    p = {**params, "max_active_dims": 2}
    build_index("sparse", tmp / "c.jsonl", tmp / "idx2", p)
    man = json.loads((tmp / "idx2" / "manifest.json").read_text())
    assert man["index"]["nnz_per_doc"]["max"] <= 2
    r = load_retriever("sparse", tmp / "idx2", p)
    D = reference(_doc_texts(), "document", max_active_dims=2)
    Q = reference(QUERIES, "query", max_active_dims=2)
    S = Q @ D.T
    got = r.search(QUERIES, len(DOCS))
    assert [[d for d, _ in hits] for hits in got] == [_ranking(row, len(DOCS)) for row in S]
    assert any(len(hits) < len(DOCS) for hits in got)  # pruned vectors miss some documents entirely


def test_top_k_rule():
    cols = np.array([5, 1, 3, 2, 4, 0])
    vals = np.array([0.5, 0.9, 0.5, 0.0, 0.5, 0.2], dtype=np.float32)
    assert top_k(cols, vals, 2) == [(1, pytest.approx(0.9)), (3, 0.5)]
    assert [c for c, _ in top_k(cols, vals, 10)] == [1, 3, 4, 5, 0]  # zero dropped, ties by column
    assert top_k(cols[:0], vals[:0], 3) == []
