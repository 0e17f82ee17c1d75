"""Table 2's conversational retrieval beyond one query string per turn, over the dense index
the ad-hoc runs already built (passages stay embedded by the frozen ad-hoc encoder):

- **session encoders** (KD-ANCE, Conv-ANCE; ``convrag.retrieval.conv_dense`` trains them): the
  whole session (question + earlier turns, most recent first) is ONE query embedding;
- **LLM4CS** (Mao et al. 2023, "Large Language Models Know Your Contextual Search Intent"): an
  LLM writes rewrites (and hypothetical responses), each embedded by the ad-hoc encoder, and an
  aggregation turns them into ONE query vector. Its three promptings: REW (n sampled rewrites),
  RTR (n rewrites, then one response to each rewrite), RAR (n samples that each hold a rewrite
  and a response); its three aggregations (:func:`aggregate`): Mean (the mean of every rewrite
  and response embedding), SC (self-consistency: the candidate with the largest summed inner
  product with all candidates, with its own response), MaxProb (the most probable output: here
  the greedy decode, temperature 0, one per turn, as this project's backends report no sequence
  probabilities). A run's policy names its variant (:func:`llm4cs_policy`; ``llm4cs`` = REW + Mean).

Both write the same run, queries and accounting files as ``convrag retrieve``, so the shared
scoring step reads them like any other run.
"""

from __future__ import annotations

import numpy as np

from convrag.errors import ConfigError
from convrag.records import TurnTask

SESSION_PREFIX = "session_"
LLM4CS = "llm4cs"
PROMPTINGS = ("rew", "rtr", "rar")
AGGREGATIONS = ("maxprob", "sc", "mean")


def session_policy(encoder: str) -> str:
    """The run's policy name (and file stem) of a session encoder: ``session_<name>``."""
    return SESSION_PREFIX + encoder


def session_runs(tasks: list[TurnTask], retriever, model_dir, k: int, policy: str, max_turns: int | None = None,
                 batch_size: int = 32) -> tuple[dict, list[dict], dict]:
    """(run, query records, counts) of one trained session encoder searched in ``retriever``'s
    (a DenseRetriever) index."""
    from convrag.retrieval.conv_dense import encode_sessions, session_text

    sessions = [session_text(t.history, t.question, max_turns) for t in tasks]
    res = retriever.search_vectors(encode_sessions(model_dir, sessions, batch_size=batch_size), k)
    return _run(tasks, res, policy, [{"query": s} for s in sessions], 0)


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"llm4cs: n must be a positive integer, got {n!r}")


def llm4cs_rewrites(engine, tasks: list[TurnTask], prompts: dict, n: int, sampling, seed: int = 0
                    ) -> tuple[list[list[str]], int]:
    """n sampled rewrites per turn in one batched call (``sample_index`` 0..n-1 makes the samples
    distinct and each one cached); an empty sample falls back to the question (counted)."""
    from convrag.llm.types import Request
    from convrag.rag.policies import rewrite_messages
    from convrag.rag.retrieve import query_states

    _check_n(n)
    states = query_states(tasks)
    reqs = [Request(messages=rewrite_messages(s, prompts), sampling=sampling, seed=seed, sample_index=i)
            for s in states for i in range(n)]
    replies = engine.generate(reqs, desc="LLM4CS rewrites") if reqs else []
    out, fallbacks = [], 0
    for j, s in enumerate(states):
        texts = []
        for r in replies[j * n:(j + 1) * n]:
            text = r.text.strip().strip('"').strip()
            fallbacks += not text
            texts.append(text or s.user_turns[-1])
        out.append(texts)
    return out, fallbacks


def mean_embeddings(groups: list[np.ndarray]) -> np.ndarray:
    """LLM4CS's "Mean" aggregation: per turn, the mean of its rewrites' (normalised) embeddings,
    L2-normalised again so that inner product stays cosine."""
    if not groups:
        return np.zeros((0, 0), dtype=np.float32)
    means = np.stack([g.mean(axis=0) for g in groups]).astype(np.float32)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return means / np.where(norms > 0, norms, 1.0)


def llm4cs_runs(tasks: list[TurnTask], retriever, rewrites: list[list[str]], k: int, fallbacks: int = 0
                ) -> tuple[dict, list[dict], dict]:
    """(run, query records, counts): the mean embedding of each turn's rewrites searched in
    ``retriever``'s (a DenseRetriever) index; all rewrites are embedded in one batch."""
    flat = [r for rs in rewrites for r in rs]
    emb = retriever.encode_queries(flat) if flat else np.zeros((0, 0), dtype=np.float32)
    groups, i = [], 0
    for rs in rewrites:
        groups.append(emb[i:i + len(rs)])
        i += len(rs)
    res = retriever.search_vectors(mean_embeddings(groups), k) if groups else []
    return _run(tasks, res, LLM4CS, [{"query": rs[0], "rewrites": rs} for rs in rewrites], fallbacks)


def _run(tasks, res, policy: str, queries: list[dict], fallbacks: int) -> tuple[dict, list[dict], dict]:
    run, records = {}, []
    for t, q, hits in zip(tasks, queries, res):
        run[t.task_id] = {d: float(s) for d, s in hits}
        records.append({"task_id": t.task_id, "policy": policy, **q, "hits": len(hits)})
    counts = {"tasks": len(tasks), "policy_fallbacks": fallbacks,
              "empty_rankings": sum(1 for r in records if r["hits"] == 0)}
    return run, records, counts


# ---------------------------------------------------------------------------------------
# LLM4CS variants: prompting (REW / RTR / RAR) x aggregation (MaxProb / SC / Mean)
# ---------------------------------------------------------------------------------------


def _check_variant(prompting: str, aggregation: str) -> None:
    if prompting not in PROMPTINGS:
        raise ConfigError(f"llm4cs: prompting {prompting!r} is not one of {', '.join(PROMPTINGS)}")
    if aggregation not in AGGREGATIONS:
        raise ConfigError(f"llm4cs: aggregation {aggregation!r} is not one of {', '.join(AGGREGATIONS)}")


def llm4cs_policy(prompting: str, aggregation: str) -> str:
    """A variant's run policy: ``llm4cs`` for REW + Mean (the run's earlier name), else
    ``llm4cs_<prompting>_<aggregation>``."""
    _check_variant(prompting, aggregation)
    return LLM4CS if (prompting, aggregation) == ("rew", "mean") else f"{LLM4CS}_{prompting}_{aggregation}"


def llm4cs_variant(policy: str) -> tuple[str, str]:
    """(prompting, aggregation) of a run policy from :func:`llm4cs_policy`."""
    if policy == LLM4CS:
        return "rew", "mean"
    parts = policy.split("_")
    if len(parts) != 3 or parts[0] != LLM4CS:
        raise ConfigError(f"llm4cs: {policy!r} is not an LLM4CS run policy (llm4cs or llm4cs_<prompting>_<aggregation>)")
    _check_variant(parts[1], parts[2])
    return parts[1], parts[2]


def llm4cs_label(prompting: str, aggregation: str, n: int, model: str) -> str:
    """Table 2's ``query`` label of a variant."""
    k = 1 if aggregation == "maxprob" else n
    what = {"rew": f"{k} rewrite{'s' * (k > 1)}", "rtr": f"{k} rewrite{'s' * (k > 1)}, then a response to each",
            "rar": f"{k} rewrite-and-response sample{'s' * (k > 1)}"}[prompting]
    how = {"mean": "mean", "sc": "self-consistency", "maxprob": "MaxProb (greedy)"}[aggregation]
    return f"LLM4CS {prompting.upper()} + {how}: {what} by {model}"


def llm4cs_requests(prompting: str, aggregation: str, n: int) -> int:
    """LLM requests per turn of a variant (for sizing): k = 1 (MaxProb) or n samples, twice that
    for RTR (a response per rewrite)."""
    _check_variant(prompting, aggregation)
    _check_n(n)
    k = 1 if aggregation == "maxprob" else n
    return 2 * k if prompting == "rtr" else k


def parse_rar(reply: str, prompts: dict) -> tuple[str, str]:
    """(rewrite, response) of a RAR reply: the text after the prompt file's ``rar.rewrite_label``
    and ``rar.response_label`` (case-insensitive); without labels, the first line is the rewrite
    and the rest the response. Either may be "" (the caller falls back and counts)."""
    import re

    text = (reply or "").strip()
    rl, al = prompts["rar"]["rewrite_label"], prompts["rar"]["response_label"]
    m = re.search(rf"{re.escape(rl)}\s*(.*?)\s*(?:{re.escape(al)}\s*(.*))?$", text, re.IGNORECASE | re.DOTALL)
    if m:
        return m.group(1).strip().strip('"').strip(), (m.group(2) or "").strip()
    first, _, rest = text.partition("\n")
    return first.strip().strip('"').strip(), rest.strip()


def _sampling_for(sampling, aggregation: str, prompting: str, stage: str):
    """MaxProb decodes greedily; a response (RTR's second step, RAR's samples) may span lines and
    gets 4x the rewrite's tokens."""
    import dataclasses

    s = dataclasses.replace(sampling, temperature=0.0, top_p=1.0) if aggregation == "maxprob" else sampling
    if prompting == "rar" or stage == "response":
        s = dataclasses.replace(s, stop=(), max_tokens=4 * s.max_tokens)
    return s


def llm4cs_generate(engine, tasks: list[TurnTask], prompts: dict, variant_prompts: dict, prompting: str,
                    aggregation: str, n: int, sampling, seed: int = 0) -> tuple[list[dict], int]:
    """Per turn ``{"rewrites": [...], "responses": [...] or None}`` of one variant, every call
    batched (RTR: the rewrites, then one batched call for their responses). ``prompts``: the
    rewrite prompt file (REW / RTR rewrites); ``variant_prompts``: ``response`` (RTR) and ``rar``.
    An empty rewrite falls back to the question, an empty response to its rewrite (counted)."""
    from convrag.llm.types import Request
    from convrag.rag.policies import rewrite_messages
    from convrag.rag.retrieve import query_states

    _check_variant(prompting, aggregation)
    _check_n(n)
    k = 1 if aggregation == "maxprob" else n
    states = query_states(tasks)
    fallbacks = 0
    if prompting == "rar":
        rar = variant_prompts["rar"]
        s = _sampling_for(sampling, aggregation, prompting, "rewrite")
        reqs = []
        for st in states:
            history = "\n".join(f"{t['role'].capitalize()}: {t['text'].strip()}" for t in st.turns[:-1]) or "(none)"
            msgs = [{"role": "system", "content": rar["system"].strip()},
                    {"role": "user", "content": rar["user"].format(history=history, question=st.user_turns[-1])}]
            reqs += [Request(messages=msgs, sampling=s, seed=seed, sample_index=i) for i in range(k)]
        replies = engine.generate(reqs, desc="LLM4CS RAR") if reqs else []
        out = []
        for j, st in enumerate(states):
            rws, rsp = [], []
            for r in replies[j * k:(j + 1) * k]:
                rw, a = parse_rar(r.text, variant_prompts)
                fallbacks += (not rw) + (not a)
                rws.append(rw or st.user_turns[-1])
                rsp.append(a or rws[-1])
            out.append({"rewrites": rws, "responses": rsp})
        return out, fallbacks
    s = _sampling_for(sampling, aggregation, prompting, "rewrite")
    reqs = [Request(messages=rewrite_messages(st, prompts), sampling=s, seed=seed, sample_index=i)
            for st in states for i in range(k)]
    replies = engine.generate(reqs, desc="LLM4CS rewrites") if reqs else []
    out = []
    for j, st in enumerate(states):
        rws = []
        for r in replies[j * k:(j + 1) * k]:
            text = r.text.strip().strip('"').strip()
            fallbacks += not text
            rws.append(text or st.user_turns[-1])
        out.append({"rewrites": rws, "responses": None})
    if prompting == "rtr":
        resp = variant_prompts["response"]
        s2 = _sampling_for(sampling, aggregation, prompting, "response")
        reqs = [Request(messages=[{"role": "system", "content": resp["system"].strip()},
                                  {"role": "user", "content": resp["user"].format(question=rw)}],
                        sampling=s2, seed=seed, sample_index=i)
                for o in out for i, rw in enumerate(o["rewrites"])]
        replies = engine.generate(reqs, desc="LLM4CS responses") if reqs else []
        i = 0
        for o in out:
            o["responses"] = []
            for rw in o["rewrites"]:
                text = replies[i].text.strip()
                i += 1
                fallbacks += not text
                o["responses"].append(text or rw)
    return out, fallbacks


def aggregate(rewrites: np.ndarray, responses: np.ndarray | None, aggregation: str) -> np.ndarray:
    """One turn's query vector from its rewrites' embeddings (k x d) and, for RTR / RAR, their
    responses' (k x d, row i answers rewrite i), L2-normalised (a positive scale leaves an
    inner-product ranking unchanged):

    - ``mean``: the mean of all 2k (or k) rows;
    - ``sc``: candidate i* = argmax_i sum_j r_i . r_j (the first on ties), then r_i* (REW) or
      (r_i* + a_i*) / 2;
    - ``maxprob``: the single (greedy) candidate: r_0 or (r_0 + a_0) / 2."""
    if aggregation not in AGGREGATIONS:
        raise ConfigError(f"llm4cs: aggregation {aggregation!r} is not one of {', '.join(AGGREGATIONS)}")
    r = np.asarray(rewrites, dtype=np.float64)
    a = None if responses is None else np.asarray(responses, dtype=np.float64)
    if a is not None and a.shape != r.shape:
        raise ConfigError(f"llm4cs: {len(a)} responses for {len(r)} rewrites")
    if aggregation == "mean":
        v = (np.concatenate([r, a]) if a is not None else r).mean(axis=0)
    else:
        if aggregation == "maxprob" and len(r) != 1:
            raise ConfigError(f"llm4cs: MaxProb takes the one greedy candidate, got {len(r)}")
        i = int(np.argmax((r @ r.T).sum(axis=1)))
        v = r[i] if a is None else (r[i] + a[i]) / 2
    norm = np.linalg.norm(v)
    return (v / norm if norm > 0 else v).astype(np.float32)


def llm4cs_variant_runs(tasks: list[TurnTask], retriever, generated: list[dict], aggregation: str, k: int,
                        policy: str, fallbacks: int = 0) -> tuple[dict, list[dict], dict]:
    """(run, query records, counts) of one variant: every rewrite and response embedded in one
    batch, aggregated per turn (:func:`aggregate`), searched in ``retriever``'s dense index."""
    texts = [x for g in generated for x in g["rewrites"] + (g["responses"] or [])]
    emb = retriever.encode_queries(texts) if texts else np.zeros((0, 0), dtype=np.float32)
    vecs, i = [], 0
    for g in generated:
        nr, na = len(g["rewrites"]), len(g["responses"] or [])
        vecs.append(aggregate(emb[i:i + nr], emb[i + nr:i + nr + na] if g["responses"] is not None else None,
                              aggregation))
        i += nr + na
    res = retriever.search_vectors(np.stack(vecs), k) if vecs else []
    queries = [{"query": g["rewrites"][0], "rewrites": g["rewrites"], "responses": g["responses"]} for g in generated]
    return _run(tasks, res, policy, queries, fallbacks)


def check_llm4cs_prompts(prompts, where: str = "prompts") -> None:
    """RTR's ``response`` {system, user({question})} and RAR's ``rar`` {system,
    user({history}, {question}), rewrite_label, response_label}, before any model call."""
    if not isinstance(prompts, dict):
        raise ConfigError(f"{where}: expected a mapping of prompts")
    for block, keys in (("response", ("system", "user")), ("rar", ("system", "user", "rewrite_label", "response_label"))):
        b = prompts.get(block)
        if not isinstance(b, dict) or not all(isinstance(b.get(k), str) and b.get(k).strip() for k in keys):
            raise ConfigError(f"{where}: {block} needs {', '.join(keys)}")
