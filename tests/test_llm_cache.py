"""Cache keys, persistence, deduplication, lazy backend loading and concurrent writers."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp

from convrag.llm.cache import LLMCache, cache_key
from convrag.llm.engine import Engine
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Response, Sampling

MSG = [{"role": "user", "content": "What is the capital of France?"}]


class CountingBackend:
    """Deterministic fake: the answer echoes the request, so mix-ups are visible."""

    def __init__(self):
        self.batches: list[int] = []

    def generate(self, requests):
        self.batches.append(len(requests))
        return [Response(text=f"{r.messages[-1]['content']}|{r.seed}|{r.sample_index}",
                         prompt_tokens=10, completion_tokens=3, finish_reason="stop") for r in requests]


def spec(batch_size=4, backend="transformers"):
    entry = {"backend": backend, "weights": {"path": "/nonexistent/model.gguf"}, "batch_size": batch_size}
    return parse_registry({"fake": entry})["fake"]


def key(req, model="m1", rev="r1"):
    return cache_key(model, rev, req)


def test_keys_distinct_for_every_setting():
    base = Request(MSG)
    variants = {
        "seed": Request(MSG, seed=1),
        "sample_index": Request(MSG, sample_index=1),
        "temperature": Request(MSG, sampling=Sampling(temperature=0.7)),
        "top_p": Request(MSG, sampling=Sampling(top_p=0.9)),
        "max_tokens": Request(MSG, sampling=Sampling(max_tokens=255)),
        "stop": Request(MSG, sampling=Sampling(stop=("\n",))),
        "labels": Request(MSG, labels=("A", "B")),
        "json_mode": Request(MSG, json_mode=True),
        "messages": Request([{"role": "user", "content": "What is the capital of Spain?"}]),
        "role": Request([{"role": "system", "content": MSG[0]["content"]}]),
    }
    keys = {name: key(r) for name, r in variants.items()}
    keys["base"] = key(base)
    keys["model"] = key(base, model="m2")
    keys["revision"] = key(base, rev="r2")
    keys["no_revision"] = key(base, rev=None)
    assert len(set(keys.values())) == len(keys), keys
    assert all(len(k) == 64 for k in keys.values())


def test_keys_equal_for_equal_requests():
    a = Request(MSG, sampling=Sampling(temperature=0, stop=["x"]), seed=3)
    b = Request([dict(MSG[0])], sampling=Sampling(temperature=0.0, stop=("x",)), seed=3)
    assert key(a) == key(b)
    assert key(Request(MSG, labels=["A", "B"])) == key(Request(MSG, labels=("A", "B")))
    assert key(Request(MSG, labels=("A", "B"))) != key(Request(MSG, labels=("B", "A")))


def test_seeds_and_samples_many_distinct():
    keys = {key(Request(MSG, sampling=Sampling(temperature=1.0), seed=s, sample_index=i))
            for s in range(20) for i in range(20)}
    assert len(keys) == 400


def test_cache_roundtrip(tmp_path):
    c = LLMCache(tmp_path / "c.sqlite")
    assert c.get_many(["nope"]) == {}
    c.put_many({"k1": {"a": 1}, "k2": {"b": [1, 2]}})
    assert c.get_many(["k1", "k2", "k3"]) == {"k1": {"a": 1}, "k2": {"b": [1, 2]}}
    assert len(c) == 2
    mode = c._connection().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode.lower() == "wal"
    # more keys than one SQL statement takes
    many = {f"k{i}": i for i in range(1200)}
    c.put_many(many)
    got = c.get_many(list(many))
    assert got == many


def test_engine_dedupes_batches_and_keeps_order(tmp_path):
    be = CountingBackend()
    eng = Engine(spec(batch_size=4), LLMCache(tmp_path / "c.sqlite"), backend=be)
    reqs = [Request([{"role": "user", "content": f"q{i % 7}"}]) for i in range(20)]  # 7 unique
    out = eng.generate(reqs)
    assert [r.text.split("|")[0] for r in out] == [f"q{i % 7}" for i in range(20)]
    assert be.batches == [4, 3]
    acc = eng.accounting
    assert (acc.requests, acc.unique_requests, acc.calls, acc.batches, acc.cache_hits) == (20, 7, 7, 2, 0)
    assert acc["prompt_tokens"] == 200 and acc.completion_tokens == 60
    assert acc.backend_prompt_tokens == 70 and acc.backend_completion_tokens == 21
    assert not any(r.cached for r in out)


def test_persistence_across_engines(tmp_path):
    path = tmp_path / "c.sqlite"
    reqs = [Request(MSG, sampling=Sampling(temperature=0.8), seed=s, sample_index=i) for s in (0, 1) for i in (0, 1)]
    e1 = Engine(spec(), LLMCache(path), backend=CountingBackend())
    first = e1.generate(reqs)
    assert len({r.text for r in first}) == 4  # samples stay distinct
    be2 = CountingBackend()
    e2 = Engine(spec(), LLMCache(path), backend=be2)
    second = e2.generate(reqs)
    assert be2.batches == []
    assert e2.accounting.calls == 0 and e2.accounting.cache_hits == 4
    assert [r.text for r in second] == [r.text for r in first]
    assert all(r.cached for r in second)
    assert e2.accounting.prompt_tokens == 40  # cached responses still counted


def test_fully_cached_call_never_loads_backend(tmp_path):
    path = tmp_path / "c.sqlite"
    s = spec()
    warm = Engine(s, LLMCache(path), backend=CountingBackend())
    warm.generate([Request(MSG)])
    cold = Engine(s, LLMCache(path))  # no injected backend: building one would fail (no weights)
    out = cold.generate([Request(MSG), Request(MSG)])
    assert out[0].cached and out[0].text.startswith("What is")
    assert not cold.backend_loaded
    assert cold.accounting.load_seconds == 0.0


def test_different_model_does_not_share_cache(tmp_path):
    path = tmp_path / "c.sqlite"
    Engine(spec(), LLMCache(path), backend=CountingBackend()).generate([Request(MSG)])
    other = dataclasses.replace(spec(), weights={"path": "/other/model.gguf"})
    be = CountingBackend()
    Engine(other, LLMCache(path), backend=be).generate([Request(MSG)])
    assert be.batches == [1]


def test_write_accounting(tmp_path):
    eng = Engine(spec(), None, backend=CountingBackend())
    eng.generate([Request(MSG), Request(MSG, seed=2)])
    eng.write_accounting(tmp_path / "acc" / "a.json")
    data = json.loads((tmp_path / "acc" / "a.json").read_text())
    assert data["model"] == "fake" and data["calls"] == 2 and data["batches"] == 1
    assert data["prompt_tokens"] == 20 and data["completion_tokens"] == 6
    assert data["backend_seconds"] >= 0 and "wall_seconds" in data


def _writer(path: str, worker: int, n: int, barrier) -> None:
    c = LLMCache(path, timeout_s=1.0)  # short busy timeout: exercise the retry loop
    barrier.wait()
    for i in range(0, n, 5):
        items = {f"w{worker}-{j}": {"worker": worker, "j": j} for j in range(i, i + 5)}
        items[f"shared-{i}"] = {"j": i}  # both processes write these keys
        c.put_many(items)
        c.get_many(list(items))
    c.close()


def test_two_processes_write_at_once(tmp_path):
    path = str(tmp_path / "c.sqlite")
    LLMCache(path).close()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    n = 1000
    procs = [ctx.Process(target=_writer, args=(path, w, n, barrier)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    c = LLMCache(path)
    want = [f"w{w}-{j}" for w in (0, 1) for j in range(n)] + [f"shared-{i}" for i in range(0, n, 5)]
    got = c.get_many(want)
    assert len(got) == len(want) == 2 * n + n // 5
    assert got["w1-999"] == {"worker": 1, "j": 999}


def test_put_waits_out_a_held_write_lock(tmp_path):
    """A writer blocked longer than its busy timeout retries instead of failing."""
    import sqlite3
    import threading
    import time

    path = tmp_path / "c.sqlite"
    LLMCache(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO responses VALUES ('held', '1', 0)")
    t = threading.Thread(target=lambda: (time.sleep(1.0), holder.execute("COMMIT")))
    t.start()
    c = LLMCache(path, timeout_s=0.1, retries=30)
    t0 = time.perf_counter()
    c.put_many({"mine": {"x": 1}})
    t.join()
    assert time.perf_counter() - t0 >= 0.5  # it really had to wait
    assert c.get_many(["mine", "held"]) == {"mine": {"x": 1}, "held": 1}


def test_unreadable_cache_entry_is_asked_again(tmp_path):
    path = tmp_path / "c.sqlite"
    eng = Engine(spec(), LLMCache(path), backend=CountingBackend())
    req = Request(MSG)
    LLMCache(path).put_many({eng.key(req): {"garbage": True}})
    out = eng.generate([req])
    assert eng.accounting.calls == 1 and not out[0].cached
    assert Engine(spec(), LLMCache(path)).generate([req])[0].cached
