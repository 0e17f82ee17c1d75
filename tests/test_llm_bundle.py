"""Strict replay, engine traces and portable cache bundles (convrag.llm.engine, convrag.llm.bundle),
with a scripted backend double: what a colleague needs to rebuild targets offline from recorded
answers, and the errors that say exactly which request or file is wrong."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import zipfile

import pytest

from convrag.cli import main
from convrag.errors import ConfigError, DataError, ReplayMissError
from convrag.llm import bundle
from convrag.llm.cache import LLMCache, cache_key
from convrag.llm.engine import Engine, job_name, replay_mode
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Response, Sampling

SPECS = parse_registry({
    "fake": {"backend": "transformers", "weights": {"path": "/nonexistent/model.gguf"}, "batch_size": 4},
    "fake2": {"backend": "transformers", "weights": {"path": "/nonexistent/other.gguf"}, "batch_size": 4,
              "revision": "abc"},
})
JOB = "convrag retrieve --out-run r.trec --accounting r.accounting.json"


class Scripted:
    """Answers 'A:<last message>' and records every batch, so backend use is countable."""

    def __init__(self):
        self.batches: list[list[str]] = []

    def generate(self, requests):
        self.batches.append([r.messages[-1]["content"] for r in requests])
        return [Response(text=f"A:{r.messages[-1]['content']}", prompt_tokens=7, completion_tokens=2,
                         finish_reason="stop") for r in requests]


def req(q: str, **kw) -> Request:
    return Request([{"role": "system", "content": "Rewrite."}, {"role": "user", "content": q}],
                   sampling=Sampling(max_tokens=8), **kw)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("CONVRAG_LLM_REPLAY", "CONVRAG_LLM_TRACE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CONVRAG_JOB", JOB)


def _traced_cache(tmp_path):
    """A cache answered by two models with tracing on, plus one entry no traced job used."""
    cache = LLMCache(tmp_path / "src.sqlite")
    trace = tmp_path / "trace"
    e1 = Engine(SPECS["fake"], cache, backend=Scripted(), role="rewriter", trace=trace)
    e2 = Engine(SPECS["fake2"], cache, backend=Scripted(), role="judge", trace=trace)
    e1.generate([req("q1"), req("q2"), req("q1")])
    e2.generate([req("q1")])
    Engine(SPECS["fake"], cache, backend=Scripted()).generate([req("untraced")])  # no trace: not exported
    return cache, trace, e1, e2


# ---- replay mode, job names, traces ------------------------------------------------------


def test_replay_mode_values(monkeypatch):
    assert replay_mode() is None
    for off in ("", "false", "0", "off"):
        monkeypatch.setenv("CONVRAG_LLM_REPLAY", off)
        assert replay_mode() is None
    monkeypatch.setenv("CONVRAG_LLM_REPLAY", "Strict")
    assert replay_mode() == "strict"
    monkeypatch.setenv("CONVRAG_LLM_REPLAY", "lax")
    with pytest.raises(ConfigError, match=r"\$CONVRAG_LLM_REPLAY='lax'.*llm_cache\.replay"):
        replay_mode()
    with pytest.raises(ConfigError, match="replay='yes'"):
        Engine(SPECS["fake"], replay="yes")


def test_job_name_from_argv(monkeypatch):
    monkeypatch.delenv("CONVRAG_JOB")
    argv = ["/venv/bin/convrag", "retrieve", "--tasks", "t.jsonl", "--out-run", "r.trec", "--out-queries=q.jsonl",
            "--accounting", "a.json", "--recall-k", "10"]
    assert job_name(argv) == "convrag retrieve --out-run r.trec --out-queries=q.jsonl --accounting a.json"
    assert job_name(["convrag", "mtrag-un", "score-retrieval", "--runs", "[]", "--out", "s.parquet"]) == \
        "convrag mtrag-un score-retrieval --out s.parquet"
    assert job_name(["pytest", "-q"]) == "pytest -q"
    monkeypatch.setenv("CONVRAG_JOB", "rule x")
    assert job_name(argv) == "rule x"


def test_trace_lines_name_every_key_once_per_engine(tmp_path):
    cache, trace, e1, e2 = _traced_cache(tmp_path)
    e1.generate([req("q2")])  # already traced by e1: no new line
    lines = [json.loads(x) for x in (trace / f"{os.getpid()}.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # e1: q1, q2 (the duplicate q1 once); e2: q1
    # the prompt hash is sha256 of the messages' canonical JSON, written out here by hand
    q1_prompt = hashlib.sha256(b'[{"content":"Rewrite.","role":"system"},{"content":"q1","role":"user"}]').hexdigest()
    first = lines[0]
    assert first == {"key": cache_key(e1.model_id, None, req("q1")), "model": "fake", "model_id": e1.model_id,
                     "revision": None, "role": "rewriter", "job": JOB, "prompt_sha256": q1_prompt, "hit": False}
    assert [x["role"] for x in lines] == ["rewriter", "rewriter", "judge"]
    assert lines[2]["model"] == "fake2" and lines[2]["revision"] == "abc" and lines[2]["prompt_sha256"] == q1_prompt
    assert lines[2]["key"] != first["key"]  # same prompt, other model: another cache entry
    # a new engine (a rerun) traces hits as hits
    Engine(SPECS["fake"], cache, backend=Scripted(), role="rewriter", trace=trace).generate([req("q1")])
    last = json.loads((trace / f"{os.getpid()}.jsonl").read_text().splitlines()[-1])
    assert last["key"] == first["key"] and last["hit"] is True


def test_trace_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVRAG_LLM_TRACE", str(tmp_path / "envtrace"))
    Engine(SPECS["fake"], None, backend=Scripted()).generate([req("q1")])
    (line,) = (tmp_path / "envtrace" / f"{os.getpid()}.jsonl").read_text().splitlines()
    assert json.loads(line)["role"] is None and json.loads(line)["hit"] is False


# ---- strict replay ---------------------------------------------------------------------------


def test_strict_replay_miss_names_request_model_role_job(tmp_path, monkeypatch):
    cache = LLMCache(tmp_path / "c.sqlite")
    Engine(SPECS["fake"], cache, backend=Scripted()).generate([req("known")])
    monkeypatch.setenv("CONVRAG_LLM_REPLAY", "strict")
    backend = Scripted()
    eng = Engine(SPECS["fake"], cache, backend=backend, role="rewriter")
    long_q = "Where was Sera Lund born, and which theatre did she found in the port city? " * 3
    with pytest.raises(ReplayMissError) as err:
        eng.generate([req("known"), req(long_q), req("also new"), req(long_q)])
    msg = str(err.value)
    missing = cache_key(eng.model_id, None, req(long_q))
    assert "2 of 3 requests are not in the LLM cache" in msg and str(tmp_path / "c.sqlite") in msg
    assert "model fake (" in msg and eng.model_id in msg and "revision None" in msg
    assert "role rewriter" in msg and f"job `{JOB}`" in msg
    assert f"first missing key {missing}: user message 'Where was Sera Lund born" in msg and "(cut)" in msg
    assert backend.batches == [] and eng.accounting.calls == 0  # nothing reached the backend
    # without an injected backend none is ever built (the spec's weights do not exist)
    lazy = Engine(SPECS["fake"], cache, role=None)
    with pytest.raises(ReplayMissError, match="1 of 1 requests.*role unknown"):
        lazy.generate([req("new")])
    assert not lazy.backend_loaded


def test_strict_replay_all_hits_answers_from_the_cache(tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite")
    first = Engine(SPECS["fake"], cache, backend=Scripted()).generate([req("a"), req("b")])
    eng = Engine(SPECS["fake"], cache, replay="strict")
    again = eng.generate([req("b"), req("a"), req("b")])
    assert [r.text for r in again] == ["A:b", "A:a", "A:b"] and all(r.cached for r in again)
    assert [r.text for r in first] == ["A:a", "A:b"]
    assert eng.accounting.calls == 0 and eng.accounting.cache_hits == 2 and not eng.backend_loaded


# ---- bundles ---------------------------------------------------------------------------------


def test_export_import_round_trip(tmp_path):
    cache, trace, e1, e2 = _traced_cache(tmp_path)
    out = tmp_path / "b.convrag-cache"
    manifest = bundle.export_bundle(cache.path, [trace], out)
    keys = sorted([cache_key(e1.model_id, None, req("q1")), cache_key(e1.model_id, None, req("q2")),
                   cache_key(e2.model_id, "abc", req("q1"))])
    assert manifest["counts"] == {"entries": 3, "models": 2, "jobs": 1, "trace_records": 3}
    assert manifest["jobs"] == [JOB] and manifest["format"] == "convrag-llm-cache-bundle"
    assert {(m["model_id"], m["revision"]): (m["names"], m["entries"]) for m in manifest["models"]} == {
        (e1.model_id, None): (["fake"], 2), (e2.model_id, "abc"): (["fake2"], 1)}
    assert [r["key"] for r in manifest["requests"]] == keys
    with zipfile.ZipFile(out) as z:
        assert sorted(z.namelist()) == ["entries.jsonl", "manifest.json"]
        payload = z.read("entries.jsonl")
    assert hashlib.sha256(payload).hexdigest() == manifest["entries_sha256"]
    assert [json.loads(x)["key"] for x in payload.decode().splitlines()] == keys

    dest = tmp_path / "fresh" / "llm.sqlite"
    assert bundle.import_bundle(out, dest) == {"entries": 3, "added": 3, "present": 0}
    got, src = LLMCache(dest).get_many(keys), cache.get_many(keys)
    assert got == src and len(LLMCache(dest)) == 3  # the untraced entry stayed behind
    assert got[keys[0]]["text"].startswith("A:q")
    assert bundle.import_bundle(out, dest) == {"entries": 3, "added": 0, "present": 3}  # idempotent

    # the same trace over the same cache gives the same bytes
    bundle.export_bundle(cache.path, [trace], tmp_path / "b2.convrag-cache")
    assert (tmp_path / "b2.convrag-cache").read_bytes() == out.read_bytes()

    # a strict engine over the imported cache answers the traced requests without a backend
    eng = Engine(SPECS["fake2"], LLMCache(dest), replay="strict")
    assert [r.text for r in eng.generate([req("q1")])] == ["A:q1"] and eng.accounting.calls == 0


def _rewrite(src, dst, manifest=None, entries=None):
    with zipfile.ZipFile(src) as z:
        m, e = z.read("manifest.json"), z.read("entries.jsonl")
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest(json.loads(m))) if manifest else m)
        z.writestr("entries.jsonl", entries(e) if entries else e)


def test_import_checks_the_manifest(tmp_path):
    cache, trace, *_ = _traced_cache(tmp_path)
    good = tmp_path / "good.zip"
    bundle.export_bundle(cache.path, [trace], good)
    dest = tmp_path / "dest.sqlite"

    bad = tmp_path / "edited.zip"
    _rewrite(good, bad, entries=lambda e: e.replace(b'"A:q2"', b'"A:q3"'))
    with pytest.raises(DataError, match=rf"cache bundle {bad}: entries.jsonl has sha256 .* damaged or edited"):
        bundle.import_bundle(bad, dest)

    def drop_request(m):
        m["requests"] = m["requests"][1:]
        return m
    _rewrite(good, bad, manifest=drop_request)
    with pytest.raises(DataError, match=rf"{bad}: the manifest's requests and entries.jsonl differ .*1 entries not"):
        bundle.import_bundle(bad, dest)

    def miscount(m):
        m["models"][0]["entries"] += 1
        return m
    _rewrite(good, bad, manifest=miscount)
    with pytest.raises(DataError, match=rf"{bad}: the manifest's counts"):
        bundle.import_bundle(bad, dest)

    _rewrite(good, bad, manifest=lambda m: {**m, "format_version": 99})
    with pytest.raises(DataError, match=rf"{bad}: unknown format 'convrag-llm-cache-bundle' version 99"):
        bundle.import_bundle(bad, dest)

    bad.write_text("not a zip")
    with pytest.raises(DataError, match=rf"{bad}: not a convrag-llm-cache-bundle"):
        bundle.import_bundle(bad, dest)
    assert len(LLMCache(dest)) == 0  # nothing of a bad bundle was written


def test_import_conflict_fails_and_writes_nothing(tmp_path):
    cache, trace, e1, _ = _traced_cache(tmp_path)
    out = tmp_path / "b.zip"
    bundle.export_bundle(cache.path, [trace], out)
    dest = LLMCache(tmp_path / "dest.sqlite")
    k = cache_key(e1.model_id, None, req("q2"))
    dest.put_many({k: Response("another answer", 7, 2, "stop").to_dict()})
    with pytest.raises(DataError, match=rf"1 of its 3 entries conflict .* \(first key {k}, model .*roles rewriter\); "
                                        "nothing was imported"):
        bundle.import_bundle(out, dest.path)
    assert len(dest) == 1 and dest.get_many([k])[k]["text"] == "another answer"


def test_export_fails_on_a_traced_key_missing_from_the_cache(tmp_path):
    cache, trace, e1, _ = _traced_cache(tmp_path)
    k = cache_key(e1.model_id, None, req("q2"))
    with sqlite3.connect(cache.path) as con:
        con.execute("DELETE FROM responses WHERE key = ?", (k,))
    with pytest.raises(DataError, match=rf"1 of 3 traced requests are not in it, first key {k} \(model fake = .*"
                                        rf"role rewriter, job {JOB}"):
        bundle.export_bundle(cache.path, [trace], tmp_path / "b.zip")
    assert not (tmp_path / "b.zip").exists()
    with pytest.raises(DataError, match="trace folder .*nowhere: not found"):
        bundle.export_bundle(cache.path, [tmp_path / "nowhere"], tmp_path / "b.zip")
    (trace / "bad.jsonl").write_text('{"key": "abc"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: not a trace record"):
        bundle.read_traces([trace])


def test_cli_cache_export_and_import(tmp_path, capsys):
    cache, trace, *_ = _traced_cache(tmp_path)
    out, dest = tmp_path / "t.convrag-cache", tmp_path / "d" / "llm.sqlite"
    assert main(["cache", "export", "--cache", str(cache.path), "--trace", str(trace), "--out", str(out)]) == 0
    assert "3 entries, 2 model(s), 1 job(s), 3 traced uses" in capsys.readouterr().out
    assert main(["cache", "import", str(out), "--cache", str(dest)]) == 0
    assert "3 entries, 3 added, 0 already present" in capsys.readouterr().out
    assert main(["cache", "import", str(tmp_path / "missing.zip"), "--cache", str(dest)]) == 2
    assert f"convrag cache import: error: cache bundle {tmp_path / 'missing.zip'}: not found" in capsys.readouterr().err
