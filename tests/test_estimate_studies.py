"""`convrag estimate` on every paper config (config/studies/*.yaml): lic_rag's GPU-hours, and
the call counts of mtrag_un, coral, worse_labels and cross worked out by hand
from hand-made accounting files of the default config's jobs (placed
with each study's own paths, so the measured grid is the default's). No model runs.

Measured, per job (requests / prompt / completion; units in the file's ``job`` block):
  mtrag_un  rewrite 10 / 3,000 / 100 per 10 tasks; answer 10 / 5,000 / 200 per 10 tasks;
            judge 30 / 15,000 / 300 per 10 items. Passages: 400 characters (100 tokens).
  coral     rewrites and answers 1 request per task (LLM4CS: per task and sample), 400 prompt
            tokens each; pairwise judge 2 per item; the sweep's m=1 and m=2 answers 400 and 500.
  worse_labels  1 expansion request per task and expansion; readers 2 per context, content and
            answer judges 1 per context.
  cross     recorded 1 reader request per task, sharded 3; scoring 1 + 1 per final answer.
Call counts are then worked out by hand from each paper config (its grid and estimate.tasks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from convrag.config import REPO_ROOT, config_registry, load_config
from convrag.cost import summarize
from convrag.layout import Layout
from convrag.studies import all_studies

STUDIES = ("lic_rag", "mtrag_un", "coral", "worse_labels", "cross")


def _acc(requests, prompt, completion):
    return {"requests": requests, "unique_requests": requests, "cache_hits": 0, "calls": requests,
            "prompt_tokens": prompt, "completion_tokens": completion}


def _write(path, data) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data if isinstance(data, str) else json.dumps(data))


def _lines(path, n: int, **rec) -> None:
    _write(path, "".join(json.dumps({"i": i, **rec}) + "\n" for i in range(n)))


def _lic_rag(cfg, L):
    """Every simulate job of the default: 2 conversations per cell, 1 assistant and 1 user request
    each (its counts are checked by hand in test_estimate.py; here: the paper config is sized)."""
    from convrag.retrieval import capabilities, retriever_kind
    from convrag.studies.lic_rag import paths
    from convrag.studies.lic_rag.plan import simulate_jobs

    for j in simulate_jobs(cfg):
        cells = {f"{c}_{p}": {"conversations": 2, "assistant": _acc(2, 1000, 40), "user_simulator": _acc(2, 200, 20)}
                 for c, p in j["cells"]}
        n = len(cells)
        acc = {"assistant": _acc(2 * n, 1000 * n, 40 * n), "user_simulator": _acc(2 * n, 200 * n, 20 * n),
               "classifier": _acc(2 * n, 200 * n, 4 * n), "judge": _acc(n, 100 * n, 2 * n), "cells": cells}
        if capabilities(retriever_kind(cfg, j["retriever"])).llm_at_query:
            acc["retriever"] = _acc(2 * n, 300 * n, 30 * n)
        _write(paths.job_accounting(L, j["dataset"], j["model"], j["retriever"], j["chunk"]), acc)


def _mtrag_un(cfg, L):
    from convrag.studies.mtrag_un import paths
    from convrag.studies.mtrag_un.plan import domains, model_jobs

    for j in model_jobs(cfg):
        if j["stage"] == "retrieve":
            _write(paths.run(L, j["benchmark"], j["domain"], j["retriever"], j["policy"], "accounting.json"),
                   {"rewriter": _acc(10, 3000, 100), "job": {"tasks": 10}})
        elif j["stage"] == "answer":
            _write(paths.answers(L, j["benchmark"], j["model"], j["setting"], j["domain"], "accounting.json"),
                   {"reader": _acc(10, 5000, 200), "job": {"tasks": 10}})
        elif j["stage"] == "evaluate":
            _write(paths.evaluation(L, j["benchmark"], j["model"], j["setting"], j["domain"], "accounting.json"),
                   {"judge": _acc(30, 15000, 300), "job": {"items": 10}})
    for d in domains(cfg):
        _lines(L.corpus(f"{cfg['mtrag_un']['benchmark']}.{d}"), 3, text="x" * 400)


def _coral(cfg, L):
    from convrag.studies.coral import paths
    from convrag.studies.coral.plan import constructed, model_jobs, source, sweep_m

    src = source(cfg)
    if constructed(cfg):
        _lines(paths.tasks(L, src), 10)
        _write(paths.tasks(L, src, "accounting.json"), {"contextualiser": _acc(20, 4000, 100)})
    for j in model_jobs(cfg):
        if j["stage"] == "retrieve":
            n = 10 * j.get("samples", 1)
            _write(paths.run(L, src, j["retriever"], j["policy"], "accounting.json"),
                   {"rewriter": _acc(n, 400 * n, 10 * n), "job": {"tasks": 10}})
        elif j["stage"] == "answer" and j["role"] == "reader":
            m = sweep_m(j["strategy"])
            n, per = (4, 300 + 100 * m) if m is not None else (10, 400)
            acc = {"reader": _acc(n, per * n, 20 * n)}
            if j["strategy"] == "llm_summary":
                acc["summariser"] = _acc(n, 200 * n, 30 * n)
            _write(paths.answers(L, src, j["model"], j["strategy"], "accounting.json"), acc)
            _write(paths.evaluation(L, src, j["model"], j["strategy"], "accounting.json"),
                   {"judge": _acc(0, 0, 0), "pairwise_judge": _acc(2 * n, 800 * n, 2 * n), "job": {"items": n}})


def _worse_labels(cfg, L):
    from convrag.studies.worse_labels import paths
    from convrag.studies.worse_labels.plan import (content_judges, readers, rung_jobs, sets, slice_domains,
                                                   slices)

    for name, s in slices(cfg).items():
        turns = 0
        for j in rung_jobs(cfg):
            if j["slice"] != name:
                continue
            spec = s["ladder"][j["rung"]]
            _write(paths.run(L, name, j["part"], j["rung"], j["domain"], "accounting.json"), {"job": {"tasks": 5}})
            turns += 5 if (j["part"], j["rung"]) == ("eval", next(iter(s["ladder"]))) else 0
            if spec["kind"] == "expansion":
                n = 5 * len(spec["expansions"])
                _write(paths.components(L, name, j["part"], j["rung"], j["domain"], "accounting.json"),
                       {"expander": _acc(n, 200 * n, 30 * n), "job": {"tasks": 5}})
        assert turns == 5 * len(slice_domains(cfg, name))
        ctx = turns * len(sets(cfg, name))  # every turn has a context of every set
        for m in readers(cfg):
            _write(paths.reads(L, name, m, "accounting.json"),
                   {"reader": _acc(2 * ctx, 600 * ctx, 20 * ctx), "job": {"contexts": ctx}})
            _write(paths.correctness(L, name, m, "accounting.json"), {f"judge:{m}": _acc(ctx, 300 * ctx, 2 * ctx)})
        for m in content_judges(cfg):
            _write(paths.labels(L, name, m, "accounting.json"),
                   {"judge": _acc(ctx, 700 * ctx, 5 * ctx), "job": {"items": ctx}})


def _cross(cfg, L):
    from convrag.studies.cross import paths
    from convrag.studies.cross.plan import answer_jobs, benchmarks
    from convrag.studies.cross.wiring import shard_benchmarks

    for d in shard_benchmarks(cfg):
        _lines(L.questions(d), 3)
        _write(paths.shards(L, d, "accounting.json"), {"model": "m", **_acc(6, 1200, 300)})
    for j in answer_jobs(cfg):
        per = 3 if j["delivery"] == "sharded" else 1
        _write(paths.answers(L, j["benchmark"], j["retriever"], j["policy"], j["reader"], j["delivery"],
                             "accounting.json"), {"reader": _acc(4 * per, 1600 * per, 40 * per), "job": {"tasks": 4}})
    for b in benchmarks(cfg):
        _write(paths.scores(L, b, "accounting.json"),
               {"answer_correctness": _acc(8, 2000, 8), "worse_labels_content": _acc(8, 4000, 16),
                "job": {"final_answers": 8}})


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    res = tmp_path_factory.mktemp("measured") / "results"
    mcfg = load_config(REPO_ROOT / "config" / "config.yaml")
    L = Layout(str(res))
    for key, fill in (("lic_rag", _lic_rag), ("mtrag_un", _mtrag_un), ("coral", _coral), ("worse_labels", _worse_labels),
                      ("cross", _cross)):
        assert key in mcfg["studies"], f"the default no longer runs {key}: this test measures it"
        fill(mcfg, L)
    return {"results": str(res), "config": mcfg, "passage_tokens": None}


def _size(study: str, measured: dict, **edit):
    cfg = load_config(REPO_ROOT / "config" / "studies" / f"{study}.yaml")
    for k, v in edit.items():
        cfg[k] = v
    work = all_studies()[study].estimate(cfg, measured, None)
    return cfg, work, summarize({study: work}, config_registry(cfg))


def _calls(work, role: str) -> float:
    return sum(w.tokens.requests for w in work if w.role == role and w.scenario == "measured")


@pytest.mark.parametrize("study", STUDIES)
def test_every_paper_config_gets_gpu_hours(measured, study):
    edit = {"estimate": {"tasks": {"coral": 100}}} if study == "coral" else {}
    _, work, s = _size(study, measured, **edit)
    assert work, work.notes
    assert s["totals"]["gpu_hours"]["measured"] > 0 and s["totals"]["gpu_hours"]["long"] > 0
    assert any(r["models"] != "-" for r in s["layout"]["rows"])  # a SLURM layout with GPU jobs


def test_mtrag_un_calls_and_passages(measured):
    cfg, work, _ = _size("mtrag_un", measured)
    # Table 4's 13 models x 2 settings x 507 tasks (142 + 131 + 77 + 157), one reader request per task
    assert len(cfg["mtrag_un"]["generation"]["models"]) == 13
    assert _calls(work, "reader") == pytest.approx(13 * 2 * 507)
    # 4 retrievers x 507 tasks with the LLM rewrite
    assert _calls(work, "rewriter") == pytest.approx(4 * 507)
    # 3 judge requests per item: 26 generation cells x 507, and MTRAG's 159 human-evaluated tasks
    assert _calls(work, "judge") == pytest.approx(3 * (26 * 507 + 159))
    # rag: top_k 5 vs 2 measured: +3 passages of 400 / 4 = 100 tokens on a 500-token prompt
    rag = sum(w.tokens.prompt_tokens for w in work if w.role == "reader" and w.scenario == "measured"
              and w.job.endswith("/rag"))
    assert rag == pytest.approx(13 * 507 * (500 + 300))


def test_coral_calls_and_sweep(measured):
    cfg, work, _ = _size("coral", measured, estimate={"tasks": {"coral": 100}})
    g = cfg["coral"]["generation"]
    # every generation model under every strategy, and the fine-tuned generators (coral.sft.<name>.answers,
    # §D.2: one per base x strategy) under the strategy each was tuned on (raw context: the summary too)
    sft = [x for x in (cfg["coral"].get("sft") or {}).values() if x["role"] == "generate" and x.get("answers")]
    assert len(sft) == 9 and sum(x["strategy"] == "raw_context" for x in sft) == 3
    sweep = g["history_sweep"]
    table3 = (len(g["models"]) * len(g["strategies"]) + len(sft) + 3) * 100
    fig4 = (len(g["models"]) + 3) * len(sweep["m"]) * sweep["conversations"]  # the raw-context checkpoints sweep
    assert _calls(work, "reader") == pytest.approx(table3 + fig4)
    judges = 1 + len(cfg["coral"]["evaluation"]["judges"])  # the comparison model and the judges
    assert _calls(work, "pairwise_judge") == pytest.approx(2 * judges * (table3 + fig4))
    # the sweep's prompt: 100 tokens per history turn (m=1: 400, m=2: 500), + 3 passages of 63.5
    m10 = [w for w in work if w.role == "reader" and w.scenario == "measured" and w.job.endswith("history_m10")]
    per_call = sum(w.tokens.prompt_tokens for w in m10) / sum(w.tokens.requests for w in m10)
    assert per_call == pytest.approx(1300 + 3 * _passage(measured), rel=1e-6)


def _passage(measured) -> float:
    from convrag.sizing import passage_tokens
    from convrag.studies.coral.plan import source

    return passage_tokens(measured, [source(measured["config"])])[0]


def test_coral_without_its_task_count_says_so(measured):
    _, work, _ = _size("coral", measured, estimate={"tasks": {}})
    assert any("estimate.tasks.coral" in n for n in work.notes)
    assert _calls(work, "reader") > 0  # Figure 4's sweep is still sized (its conversations are in the config)


def test_worse_labels_calls(measured):
    cfg, work, _ = _size("worse_labels", measured)
    # fusion: 3 expansions x RECOR dev's 858 turns, one request each
    assert _calls(work, "expander") == pytest.approx(858 * 3)
    # readers: 2 per context; recor 858 turns x its context sets, mtrag 777 x its sets; 3 readers
    from convrag.studies.worse_labels.plan import sets

    ctx = 858 * len(sets(cfg, "recor")) + 777 * len(sets(cfg, "mtrag"))
    assert _calls(work, "reader") == pytest.approx(3 * 2 * ctx)
    assert _calls(work, "answer_judge") == pytest.approx(2 * 3 * ctx)  # 2 answer judges x 3 readers
    assert any("recor_train" in n for n in work.notes)  # the train split's size is not known here


def test_cross_calls(measured):
    cfg, work, _ = _size("cross", measured)
    # turn benchmarks (recorded only): 3 readers x (closed book + 8 retrievers x policies);
    # coral all 4 policies, mtrag_un / mtrag / mtrag_retrieval / recor_dev 3 (no shipped rewrite in
    # mtrag_un, mtrag, recor_dev)
    turns = 3 * (1 + 8 * 4) * 6480 + 3 * (1 + 8 * 3) * (507 + 842 + 777 + 858)
    # 5 multi-hop datasets x 150 questions, 3 x 33 cells, recorded (1 request) and sharded (3)
    multihop = 5 * 150 * 3 * 33 * (1 + 3)
    assert _calls(work, "reader") == pytest.approx(turns + multihop)
    # sharding: 2 requests per question
    assert _calls(work, "sharding") == pytest.approx(2 * 5 * 150)
    assert not any("estimate.tasks" in n for n in work.notes)
    cfg["estimate"] = {"tasks": {k: v for k, v in cfg["estimate"]["tasks"].items() if k != "coral"}}
    work = all_studies()["cross"].estimate(cfg, measured, None)
    assert any("benchmark coral" in n and "estimate.tasks.coral" in n for n in work.notes)


def test_an_unmeasured_study_is_not_sized_as_zero(tmp_path):
    import subprocess
    import sys

    (tmp_path / "results").mkdir()
    out = subprocess.run([sys.executable, "-m", "convrag.cli", "estimate", "--config",
                          str(REPO_ROOT / "config" / "studies" / "mtrag_un.yaml"), "--measured",
                          str(tmp_path / "results")], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "mtrag_un: nothing sized" in out.stderr


SHIPPED = sorted((REPO_ROOT / "config" / "studies").glob("*.yaml"))


def _cli_estimate(config, results, cwd):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "convrag.cli", "estimate", "--config", str(config), "--measured",
                           str(results), "--json"], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_estimate_sizes_every_shipped_config(measured, path, tmp_path):
    """`convrag estimate` exits 0 on every file in config/studies/ (issue 39, item 2) and sizes
    something for each study the config runs: its LLM calls, or (a config that plans no model
    job, the CORAL sample) the tasks it would read, with 0 calls. A sample sizes its sample."""
    out = _cli_estimate(path, measured["results"], tmp_path)  # another folder: paths resolve as from anywhere
    assert out.returncode == 0, out.stderr[-3000:]
    s = json.loads(out.stdout)
    cfg = load_config(path)
    assert [st["study"] for st in s["studies"]] == cfg["studies"]
    for st in s["studies"]:
        calls = st["tokens"]["measured"]["requests"]
        if all_studies()[st["study"]].plan(cfg):
            assert sum(st["jobs"].values()) > 0 and calls > 0, (st["study"], s["notes"])
        else:  # nothing calls a model: its size is the tasks it reads
            assert calls == 0 and re.search(r"[1-9][\d,]* tasks", st["facts"]["grid"]), st["facts"]
    if path.stem == "coral_sample":  # the sample's 8 conversations, 35 turns (tests/test_data_coral.py)
        assert s["studies"][0]["facts"]["grid"].startswith("35 tasks of coral_sample (counted in the local files")
    if path.stem == "mtrag_un_sample":
        # the 12 MTRAG conversations' 73 user turns: 2 settings x 73 answers, 2 retrievers x 73 LLM rewrites
        # (only llm_rewrite calls a model), 3 judge requests per item over 146 answers and the 36
        # human-evaluated responses of the sample's evaluation file
        roles = {r["role"]: r["tokens"]["measured"]["requests"] for r in s["roles"]}
        assert roles == {"reader": 2 * 73, "rewriter": 2 * 73, "judge": 3 * (2 * 73 + 36)}


def test_unknown_task_counts_are_said_once_per_benchmark(measured, tmp_path):
    """Without estimate.tasks and with no local sample, every job of a benchmark is unsized for one
    reason: the error says it once per benchmark, not once per job (it said it 25 times)."""
    import yaml

    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "mtrag_un.yaml").read_text())
    cfg.pop("estimate")
    path = tmp_path / "no_counts.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = _cli_estimate(path, measured["results"], tmp_path)
    assert out.returncode == 2 and "mtrag_un: nothing sized" in out.stderr
    assert out.stderr.count("set estimate.tasks.mtrag_un ") == 1, out.stderr
    assert out.stderr.count("set estimate.tasks.mtrag_human ") == 1, out.stderr
    assert "224 retrieve, answer, evaluate jobs of mtrag_un not sized" in out.stderr


# ---- every job within its SLURM time limit (issue 47, item 1) ----------------------------------


def _max_long(s: dict) -> float:
    return max((r["max_minutes"]["long"] or 0.0) for r in s["layout"]["rows"])


def _cross_with(tmp_path, **cross) -> tuple[dict, Path]:
    import yaml

    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "cross.yaml").read_text())
    cfg["cross"].update(cross)
    path = tmp_path / "cross_chunks.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_config(path), path


def test_a_job_over_its_limit_fails_the_estimate_naming_rule_key_and_value(measured, tmp_path):
    """cross with one scoring job per benchmark (the paper config's layout before issue 47): the
    phi-4 content label of a benchmark's every final answer runs past the 240-minute limit in the
    'long' scenario; the estimate names rule cross_score, cross.score_chunks and the chunk count
    that the layout recommends, and that count puts every job within half the limit."""
    cfg, path = _cross_with(tmp_path, score_chunks=1)
    s = summarize({"cross": all_studies()["cross"].estimate(cfg, measured, None)}, config_registry(cfg))
    score = [r for r in s["layout"]["rows"] if r["kind"] == "score"]
    assert len(score) == 1 and score[0]["jobs"] == 10 and score[0]["max_minutes"]["long"] > 240
    advice = next(c for c in s["layout"]["chunking"] if c["kind"] == "score")
    n = advice["config_value"]
    assert advice["config_key"] == "cross.score_chunks" and advice["rule"] == "cross_score" and n > 1
    # the fullest benchmark's answers over n jobs of at most the recommended units each
    assert advice["units_per_job_recommended"] * n >= advice["units_per_job_now"]
    assert len(s["over_limit"]) == 1
    msg = s["over_limit"][0]
    assert msg.startswith("rule cross_score (cross score jobs on phi-4): the fullest job takes "
                          f"{score[0]['max_minutes']['long']:.0f} minutes"), msg
    assert f"set cross.score_chunks to {n} " in msg, msg
    # the CLI fails (exit 2) with the same message, after printing its tables
    out = _cli_estimate(path, measured["results"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "jobs over the SLURM time limit" in out.stderr and f"set cross.score_chunks to {n} " in out.stderr
    assert "rule cross_score " in out.stderr
    # the recommended count: n jobs per benchmark, every one within 50% of the limit, no error
    cfg_n, path_n = _cross_with(tmp_path, score_chunks=n)
    s_n = summarize({"cross": all_studies()["cross"].estimate(cfg_n, measured, None)}, config_registry(cfg_n))
    row = next(r for r in s_n["layout"]["rows"] if r["kind"] == "score")
    assert row["jobs"] == 10 * n and row["max_minutes"]["long"] <= 120.0 and not s_n["over_limit"]
    assert next(c for c in s_n["layout"]["chunking"] if c["kind"] == "score")["rule"] == "cross_score_chunk"
    # one scoring job's tokens split n ways: the chunked grid asks the same in total
    tot = [sum(w.tokens.prompt_tokens for w in all_studies()["cross"].estimate(c, measured, None)
               if w.kind == "score") for c in (cfg, cfg_n)]
    assert tot[1] == pytest.approx(tot[0], rel=1e-9)
    assert _cli_estimate(path_n, measured["results"], tmp_path).returncode == 0


def test_a_job_no_key_splits_is_named_too():
    """A job kind without a chunk key over the limit: the message says no config key splits it."""
    from convrag.cost import over_limit

    layout = {"rows": [{"study": "s", "kind": "k", "models": "m", "max_minutes": {"measured": 200.0, "long": 300.0}}],
              "chunking": []}
    assert over_limit(layout, 240.0) == [
        "rule s_k (s k jobs on m): the fullest job takes 300 minutes in the 'long' scenario, over the 240-minute "
        "limit: no config key splits its work (its study sizes it as one unit)"]
    assert over_limit(layout, 300.0) == []


@pytest.mark.parametrize("study", STUDIES)
def test_every_paper_config_fits_its_limit_on_the_fixture(measured, study):
    """Each paper config's fullest job in the 'long' scenario, sized from this module's synthetic
    measured fixture (its own token counts, not the default run's): within the 240-minute limit,
    no over-limit message (the 50% check runs on the default run's results, below)."""
    edit = {"estimate": {"tasks": {"coral": 6480}}} if study == "coral" else {}
    _, _, s = _size(study, measured, **edit)
    assert not s["over_limit"] and _max_long(s) <= s["layout"]["job_minutes"], (study, _max_long(s))


MEASURED = REPO_ROOT / "results"


@pytest.mark.skipif(not all(any((MEASURED / s).glob("**/*.accounting.json")) for s in STUDIES),
                    reason="needs the default run's results/ (`snakemake --cores all`): every study's accounting")
@pytest.mark.parametrize("study", STUDIES)
def test_every_paper_config_fits_half_its_limit_on_the_default_run(study, tmp_path):
    """`convrag estimate --config config/studies/<study>.yaml` (measured: the default run in
    results/) exits 0 and its SLURM table has no job over 50% of the 240-minute limit in the
    'long' scenario (issue 47, must-show 2; before: cross's phi-4 scoring 812 minutes, lic_rag's
    qwen3.6-27b simulate 132)."""
    out = _cli_estimate(REPO_ROOT / "config" / "studies" / f"{study}.yaml", MEASURED, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    s = json.loads(out.stdout)
    assert not s["over_limit"] and _max_long(s) / s["layout"]["job_minutes"] <= 0.5, (study, _max_long(s))
