"""The engine with the real packaged SmolLM2-135M (transformers backend, GGUF, CPU)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from convrag.llm.cache import LLMCache
from convrag.llm.engine import Engine, load_engine
from convrag.llm.registry import load_registry
from convrag.llm.types import Request, Sampling

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.tinymodel

QUESTIONS = ["What is the capital of France?", "Name a primary color.", "What is 2+2?",
             "Who wrote Hamlet?", "Give me a synonym for happy.", "What is the boiling point of water?",
             "Translate 'hello' to Spanish.", "Which planet is called the red planet?"]


def chat(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


@pytest.fixture(scope="module")
def spec():
    return load_registry(ROOT / "config" / "models.yaml")["smollm2-135m"]


@pytest.fixture(scope="module")
def backend(spec):
    from convrag.llm.backends.transformers_backend import TransformersBackend
    return TransformersBackend(spec)  # loaded once for the module (~20 s)


def test_thread_budget_order():
    from convrag.llm.backends.transformers_backend import thread_budget
    import os

    assert thread_budget({"CONVRAG_THREADS": "3", "OMP_NUM_THREADS": "1"}) == 3  # the job's --threads first
    assert thread_budget({"OMP_NUM_THREADS": "1"}) == 1  # Snakemake's per-job value, CI's pytest
    assert thread_budget({"OMP_NUM_THREADS": "4,2"}) == (os.cpu_count() or 1)  # nested lists: not ours to read
    assert thread_budget({"CONVRAG_THREADS": "0"}) == (os.cpu_count() or 1)
    assert thread_budget({}) == (os.cpu_count() or 1)


def test_batch_then_fully_cached(spec, backend, tmp_path):
    eng = Engine(spec, LLMCache(tmp_path / "cache.sqlite"), backend=backend)
    reqs = [Request(chat(q), sampling=Sampling(max_tokens=12)) for q in QUESTIONS]  # 12: 'Paris' fits, CI time
    out = eng.generate(reqs, desc="tiny")
    assert len(out) == 8
    assert all(r.text.strip() for r in out)
    assert all(r.prompt_tokens > 10 and 1 <= r.completion_tokens <= 12 for r in out)
    assert all(r.finish_reason in ("stop", "length") for r in out)
    assert not any(r.cached for r in out)
    assert "paris" in out[0].text.lower()
    assert eng.accounting.calls == 8 and eng.accounting.batches == 1
    assert eng.accounting.backend_seconds > 0

    again = eng.generate(reqs)
    assert eng.accounting.calls == 8 and eng.accounting.batches == 1  # no new backend work
    assert eng.accounting.cache_hits == 8
    assert [r.text for r in again] == [r.text for r in out]
    assert all(r.cached for r in again)
    assert eng.accounting.completion_tokens == 2 * sum(r.completion_tokens for r in out)


def test_greedy_is_batch_invariant(backend):
    reqs = [Request(chat(q), sampling=Sampling(max_tokens=16)) for q in QUESTIONS[:4]]
    batch = backend.generate(reqs)
    alone = backend.generate([reqs[2]])
    assert alone[0].text == batch[2].text


def test_seeded_sampling_batch_invariant_and_seed_dependent(backend):
    hot = Sampling(temperature=0.8, top_p=0.95, max_tokens=16)  # CI time (was 24)
    reqs = [Request(chat(q), sampling=hot, seed=7) for q in QUESTIONS]
    batch = backend.generate(reqs)
    alone = backend.generate([reqs[3]])[0]
    assert alone.text == batch[3].text and alone.completion_tokens == batch[3].completion_tokens
    other_seed = backend.generate([Request(chat(QUESTIONS[3]), sampling=hot, seed=8)])[0]
    other_sample = backend.generate([Request(chat(QUESTIONS[3]), sampling=hot, seed=7, sample_index=1)])[0]
    assert other_seed.text != batch[3].text
    assert other_sample.text != batch[3].text
    # sampling really is stochastic relative to greedy for at least some prompts
    greedy = backend.generate([Request(chat(q), sampling=Sampling(max_tokens=16)) for q in QUESTIONS])
    assert sum(g.text != s.text for g, s in zip(greedy, batch)) >= 3


def test_stop_strings_and_max_tokens(backend):
    r = Request(chat("Count from 1 to 20, separated by commas."), sampling=Sampling(max_tokens=60, stop=("5",)))
    short = Request(chat("Write a long story about a dragon."), sampling=Sampling(max_tokens=5))
    a, b = backend.generate([r, short])
    assert "5" not in a.text and a.finish_reason == "stop" and a.completion_tokens < 60
    assert b.finish_reason == "length" and b.completion_tokens == 5


def test_label_logprobs(backend):
    reqs = [Request(chat("What is the capital of France? Answer with one word."), labels=("Paris", "Banana")),
            Request(chat("Is this question answerable from the passage? Passage: Paris is the capital "
                         "of France. Question: What is the capital of France? Reply ANSWERABLE or "
                         "UNANSWERABLE."), labels=("ANSWERABLE", "UNANSWERABLE"))]
    paris, ans = backend.generate(reqs)
    assert set(paris.label_logprobs) == {"Paris", "Banana"}
    assert all(math.isfinite(v) and v < 0 for r in (paris, ans) for v in r.label_logprobs.values())
    assert paris.label_logprobs["Paris"] > paris.label_logprobs["Banana"] + 3
    assert paris.text == "Paris" and paris.finish_reason == "label" and paris.completion_tokens == 0
    assert ans.text in ("ANSWERABLE", "UNANSWERABLE")
    # scoring a label alone gives the same number as in a batch
    alone = backend.generate([reqs[0]])[0]
    assert alone.label_logprobs["Paris"] == pytest.approx(paris.label_logprobs["Paris"], abs=1e-3)


def test_load_engine_is_lazy(tmp_path):
    eng = load_engine("smollm2-135m", ROOT / "config" / "models.yaml", tmp_path / "c.sqlite")
    assert not eng.backend_loaded and (eng.spec.batch_size, eng.spec.max_num_seqs) == (256, 64)


def _without_reuse(backend, reqs):
    backend.set_prefix_reuse(False)
    try:
        return backend.generate(reqs)
    finally:
        backend.set_prefix_reuse(True)


def test_shared_prefix_and_finished_rows_change_no_text(backend):
    """The decode loop's shortcuts (the batch's common prompt prefix computed once and
    reused; rows leaving the batch when they end) give the same text as each request decoded
    alone with every token computed."""
    system = {"role": "system", "content": "You answer in one short sentence, then a line 'Answer: <x>'."}
    reqs = [Request([system, {"role": "user", "content": q}],
                    sampling=Sampling(temperature=0.7 if i % 2 else 0.0, top_p=0.9, max_tokens=4 + 4 * (i % 4),
                                      stop=("\n\n",) if i % 3 == 0 else ()), seed=3, sample_index=i)
            for i, q in enumerate(QUESTIONS)]
    backend.set_prefix_reuse(True)
    before = backend.prefill_tokens
    shared = backend.generate(reqs)
    computed = backend.prefill_tokens - before
    assert computed < sum(r.prompt_tokens for r in shared)  # the system prompt was computed once
    unshared = _without_reuse(backend, reqs)
    backend.set_prefix_reuse(False)
    alone = [backend.generate([r])[0] for r in reqs]
    backend.set_prefix_reuse(True)
    assert [r.text for r in shared] == [r.text for r in unshared] == [r.text for r in alone]
    assert [r.completion_tokens for r in shared] == [r.completion_tokens for r in alone]
    assert len({r.completion_tokens for r in shared}) > 1  # rows really ended at different steps


def test_next_turn_reuses_the_previous_prompt_and_reply(backend):
    """A conversation's next call repeats its previous prompt and reply: with reuse only the
    new tokens are computed, and the texts equal full recomputation, for three turns of four
    conversations (greedy and sampled rows)."""
    follow = ["Why?", "Say it again in three words."]
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS[:4]]
    samp = [Sampling(max_tokens=10), Sampling(temperature=0.8, top_p=0.95, max_tokens=10)]  # CI time: 10-token replies
    backend.set_prefix_reuse(True)
    for turn in range(3):
        reqs = [Request(c, sampling=samp[i % 2], seed=turn, sample_index=i) for i, c in enumerate(convs)]
        before = backend.prefill_tokens
        reused = backend.generate(reqs)
        computed = backend.prefill_tokens - before
        full = _without_reuse(backend, reqs)
        assert [r.text for r in reused] == [r.text for r in full], turn
        total = sum(r.prompt_tokens for r in reused)
        if turn:  # everything but the reply's end and the new message came from the store
            assert computed < 0.5 * total, (turn, computed, total)
        for c, r in zip(convs, reused):
            c += [{"role": "assistant", "content": r.text}, {"role": "user", "content": follow[turn % 2]}]


def test_label_scores_equal_with_and_without_reuse(backend):
    system = {"role": "system", "content": "Reply with one word: ANSWERABLE or UNANSWERABLE."}
    reqs = [Request([system, {"role": "user", "content": f"Passage: Paris is the capital of France. Question: {q}"}],
                    labels=("ANSWERABLE", "UNANSWERABLE")) for q in QUESTIONS[:4]]
    backend.set_prefix_reuse(True)
    before = backend.prefill_tokens
    reused = backend.generate(reqs)
    computed = backend.prefill_tokens - before
    backend.set_prefix_reuse(False)
    before = backend.prefill_tokens
    full = backend.generate(reqs)
    full_computed = backend.prefill_tokens - before
    backend.set_prefix_reuse(True)
    for a, b in zip(reused, full):
        for lab in a.label_logprobs:
            assert a.label_logprobs[lab] == pytest.approx(b.label_logprobs[lab], abs=1e-3)
    assert computed < 0.6 * full_computed  # each prompt once (system prompt once), not once per label


def test_preallocated_kv_buffers_give_the_concatenating_cache_texts(backend, monkeypatch):
    """Decoding into preallocated buffers (prefix_cache.BufferLayer) computes exactly what
    transformers' concatenating DynamicCache computes: same texts and token counts for greedy
    and sampled rows that end at different steps (rows leave the batch), with and without a
    reused prefix."""
    from convrag.llm.backends import transformers_backend as tb
    from convrag.llm.prefix_cache import BufferLayer

    system = {"role": "system", "content": "Answer briefly."}
    reqs = [Request([system, {"role": "user", "content": q}],
                    sampling=Sampling(temperature=0.8 if i % 2 else 0.0, top_p=0.95, max_tokens=4 + 4 * (i % 3)),
                    seed=5, sample_index=i) for i, q in enumerate(QUESTIONS)]
    built = []
    real = tb.buffered_cache

    def spy(cls, config, room):
        cache = real(cls, config, room)
        built.append(cache)
        return cache

    monkeypatch.setattr(tb, "buffered_cache", spy)
    buffered = _without_reuse(backend, reqs)
    assert built and all(isinstance(layer, BufferLayer) for layer in built[0].layers)
    monkeypatch.setattr(tb, "buffered_cache", lambda cls, config, room: cls(config=config))
    plain = _without_reuse(backend, reqs)
    assert [r.text for r in buffered] == [r.text for r in plain]
    assert [r.completion_tokens for r in buffered] == [r.completion_tokens for r in plain]
    assert len({r.completion_tokens for r in plain}) > 1
    monkeypatch.setattr(tb, "buffered_cache", real)
    backend.set_prefix_reuse(True)
    backend.generate(reqs[:3])  # stores those prompts: the next call reuses them into its buffers
    reused = backend.generate(reqs)
    assert [r.text for r in reused] == [r.text for r in plain]


def test_pool_template_kwargs_change_identity_and_backend(tmp_path, monkeypatch):
    """A grid's thinking switch: the engine's chat-template variables (and so its model id and
    cache keys) change, the registry entry's own are kept, and each setting gets its backend."""
    from convrag.llm.engine import EnginePool

    reg = tmp_path / "models.yaml"
    reg.write_text("q:\n  backend: openai\n  api_model: q\n  base_url: http://127.0.0.1:9\n  api_key_env: NO_SUCH_KEY_ENV\n"
                   "  chat_template_kwargs: {other: 1}\n")
    monkeypatch.setenv("NO_SUCH_KEY_ENV", "x")  # the backend is built (never called)
    pool = EnginePool(reg, None)
    plain, think = pool.engine("q", role="a"), pool.engine("q", role="b", template_kwargs={"enable_thinking": True})
    assert plain.spec.chat_template_kwargs == {"other": 1}
    assert think.spec.chat_template_kwargs == {"other": 1, "enable_thinking": True}
    assert plain.model_id != think.model_id
    assert pool.backend(plain.spec) is pool.backend(plain.spec)
    assert pool.backend(plain.spec) is not pool.backend(think.spec)
    pool.close()


def test_rows_joining_a_running_batch_change_no_text(spec, backend, monkeypatch):
    """Continuous batching (issue 47, item 4): with room for 3 rows, 8 requests of different
    prompt lengths and budgets decode with rows joining the running batch as others end (their
    prompts prefilled in passes of similar length, then merged into the batch); every text and
    token count equals the request decoded alone with every token computed, greedy and sampled."""
    import dataclasses

    from convrag.llm.backends import transformers_backend as tb

    system = {"role": "system", "content": "Answer briefly."}
    reqs = [Request([system, {"role": "user", "content": q + " Explain." * (i % 3)}],
                    sampling=Sampling(temperature=0.8 if i % 2 else 0.0, top_p=0.95, max_tokens=4 + 5 * (i % 4),
                                      stop=("\n\n",) if i % 3 == 0 else ()), seed=11, sample_index=i)
            for i, q in enumerate(QUESTIONS)]
    merges = []
    real = tb.merge_batches

    def spy(cls, config, batches, room):
        merges.append(len(batches))
        return real(cls, config, batches, room)

    monkeypatch.setattr(tb, "merge_batches", spy)
    monkeypatch.setattr(backend, "spec", dataclasses.replace(spec, batch_size=8, max_num_seqs=3,
                                                             max_num_batched_tokens=8192))
    backend.set_prefix_reuse(True)
    steps, rows = backend.decode_steps, backend.decode_rows
    joined = backend.generate(reqs)
    steps, rows = backend.decode_steps - steps, backend.decode_rows - rows
    assert merges, "no row joined a running batch"
    assert rows / steps > 2.0  # the batch stays nearly full (at most 3 rows)
    monkeypatch.setattr(backend, "spec", spec)
    backend.set_prefix_reuse(False)
    try:
        alone = [backend.generate([r])[0] for r in reqs]
    finally:
        backend.set_prefix_reuse(True)
    assert [r.text for r in joined] == [r.text for r in alone]
    assert [r.completion_tokens for r in joined] == [r.completion_tokens for r in alone]
    assert len({r.completion_tokens for r in alone}) > 1


def test_prefill_in_passes_of_similar_length_counts_less_padding(spec, backend, monkeypatch):
    """Prompts of very different lengths are computed in separate passes (plan_groups): the
    positions computed stay close to the prompt tokens (little left padding), and the texts
    equal those of the same requests decoded alone."""
    short = [Request(chat(q), sampling=Sampling(max_tokens=6)) for q in QUESTIONS[:4]]
    long = [Request(chat(q + " Think about the question carefully and step by step." * 12),
                    sampling=Sampling(max_tokens=6)) for q in QUESTIONS[4:]]
    reqs = [r for pair in zip(short, long) for r in pair]
    import dataclasses

    monkeypatch.setattr(backend, "spec", dataclasses.replace(spec, max_num_batched_tokens=8192))
    backend.set_prefix_reuse(False)
    try:
        tokens, positions = backend.prefill_tokens, backend.prefill_positions
        grouped = backend.generate(reqs)
        tokens, positions = backend.prefill_tokens - tokens, backend.prefill_positions - positions
        alone = [backend.generate([r])[0] for r in reqs]
    finally:
        backend.set_prefix_reuse(True)
    assert tokens == sum(r.prompt_tokens for r in grouped)
    assert positions < 1.1 * tokens, (positions, tokens)  # one padded pass: about 1.7x
    assert [r.text for r in grouped] == [r.text for r in alone]
