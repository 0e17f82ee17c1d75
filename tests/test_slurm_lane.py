"""SLURM lane: a small real target of the default workflow submitted through a real SLURM with
snakemake-executor-plugin-slurm and a profile derived from profiles/slurm.

Needs a running SLURM: `bash .ci/slurm_lane.sh` starts munged, slurmctld and slurmd (one node,
partition `debug`, no slurmdbd) and runs this file with CONVRAG_SLURM_LANE=1. Elsewhere the
SLURM tests skip, saying why; the profile test runs everywhere.

Target: the mini-world corpus, its questions, the BM25 index, the shards and ONE simulate job
(2 questions x 1 run, FULL, BM25) with the real SmolLM2: 5 SLURM jobs. The simulate model is
`smollm2-135m-a100`, a registry copy of smollm2-135m declared as a GPU model (gpus: 1,
gpu_model: a100); the lane's node has one fake a100 GRES, and the model still runs on CPU.
The sharding model stays the CPU smollm2-135m (resources gpu=0, gpu_model=""). Checks:
  * each job really went through SLURM: Snakemake's log names a SLURM job id per job, each id
    has its log under .snakemake/slurm_logs/rule_<rule>/, and slurmctld's record of the id
    (`scontrol show job`, kept MinJobAge=3600 s: the lane's miniature runs for minutes) says
    COMPLETED, exit 0:0, in this workdir.
    `sacct` is not used: without slurmdbd it exits 1 ("accounting storage is disabled"), which
    is also why the profile polls with squeue;
  * GPU requests follow the registry: the simulate job was allocated gres gpu:a100:1, the CPU
    model's shard job asked for no GPU (an empty gpu_model adds nothing to sbatch);
  * the outputs equal a local run of the same target: conversations, shards, questions and
    corpus byte for byte (batch-invariant sampling);
  * a job that exits 1 under SLURM (more questions asked than the corpus has) makes Snakemake
    exit non-zero, and slurmctld records that job FAILED.

And one paper config in miniature (issue 44: ``convrag miniature`` with the SLURM profile, study
``$CONVRAG_SLURM_MINIATURE``, default worse_labels): every rule of the paper config's dry-run
executed (``executed E of P rules``, E = P), every job of a rule that is not a ``localrules`` one
submitted through SLURM and recorded COMPLETED, and its reproduction page "not comparable" on
every row (a miniature's verdicts); its wall time printed.
"""

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT

pytestmark = [pytest.mark.workflow, pytest.mark.tinymodel]

PROFILE = REPO_ROOT / "profiles" / "slurm" / "config.yaml"
GPU_MODEL = "smollm2-135m-a100"
CONV = f"results/lic_rag/conversations/miniworld/{GPU_MODEL}/bm25/FULL_none/chunk0.jsonl"
SAME_BYTES = [
    CONV,
    "results/lic_rag/shards/miniworld/shards.jsonl",
    "results/datasets/miniworld/questions.jsonl",
    "results/corpora/miniworld/corpus.jsonl",
    "results/corpora/miniworld/questions_all.jsonl",
]
CLUSTER_RULES = {"prepare_corpus", "select_questions", "build_index", "lic_rag_shard", "lic_rag_simulate"}
GROUPING_KEYS = ("groups", "group-components", "config")  # profiles/slurm: one engine per model and allocation
RUN_TIMEOUT_S = 900  # a hung status loop must not hang CI: `timeout -s KILL` (see local-slurm.md)


def _slurm_unavailable() -> str | None:
    if os.environ.get("CONVRAG_SLURM_LANE") != "1":
        return ("SLURM lane not requested: `bash .ci/slurm_lane.sh` starts a one-node SLURM and runs "
                "this file with CONVRAG_SLURM_LANE=1")
    if not shutil.which("sinfo") or not shutil.which("scontrol"):
        return "CONVRAG_SLURM_LANE=1 but sinfo/scontrol are not on PATH (is slurm-client installed?)"
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "CONVRAG_SLURM_LANE=1 but `sinfo` did not answer within 30 s"
    if r.returncode != 0 or not r.stdout.strip():
        return f"CONVRAG_SLURM_LANE=1 but `sinfo` does not answer (exit {r.returncode}): {r.stderr.strip()[:300]}"
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed in this environment"
    return None


needs_slurm = pytest.mark.skipif(bool(_slurm_unavailable()), reason=_slurm_unavailable() or "")


# --- profiles --------------------------------------------------------------------------------

def _cluster_profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def _test_profile() -> dict:
    """profiles/slurm with the local test cluster's values: same keys, plus what a cluster without
    slurmdbd and accounts needs (docs: ../shared/reference/local-slurm.md)."""
    prof = copy.deepcopy(_cluster_profile())
    # one job per allocation, each loading its own models (the grouped layout has its own test:
    # test_grouped_jobs_share_one_engine)
    for key in GROUPING_KEYS:
        prof.pop(key, None)
    prof["jobs"] = 4
    prof["latency-wait"] = 5
    prof["default-resources"].pop("slurm_account")
    prof["default-resources"].update({"slurm_partition": "debug", "mem_mb": 500, "runtime": 10})
    # The node has 20 GB, 2 CPUs and one (fake) GPU: requests sized for real nodes are refused
    # ("Requested node configuration is not available"), e.g. cpus_per_gpu: 8.
    for rule in CLUSTER_RULES:
        res = prof["set-resources"].setdefault(rule, {})
        res.update({"mem_mb": 3000, "runtime": 20})
        if "cpus_per_gpu" in res:
            res["cpus_per_gpu"] = 1
    prof.update({
        "slurm-no-account": True,
        "slurm-status-command": "squeue",               # no slurmdbd: sacct cannot answer
        "slurm-init-seconds-before-status-checks": 2,  # slurm.conf MinJobAge=3600 >> 3 x this
        "slurm-keep-successful-logs": True,            # evidence for the test
    })
    return prof


def test_cluster_profile_is_complete():
    """Runs everywhere: the shipped profile names the executor, placeholders and resources."""
    prof = _cluster_profile()
    assert prof["executor"] == "slurm"
    for key in ("jobs", "latency-wait", "retries"):
        assert isinstance(prof[key], int) and prof[key] >= 1, key
    dr = prof["default-resources"]
    assert dr["slurm_account"] == "YOUR_SLURM_ACCOUNT" and dr["slurm_partition"] == "YOUR_PARTITION"
    assert dr["mem_mb"] > 0 and dr["runtime"] > 0
    assert {"build_index", "lic_rag_simulate"} <= set(prof["set-resources"])
    text = PROFILE.read_text()
    assert "REPLACE" in text and "gpu_model" in text and "CONVRAG_CACHE_JOURNAL=DELETE" in text
    # the derived test profile keeps every key of the real one but the grouping (its own test)
    assert set(prof) - set(GROUPING_KEYS) <= set(_test_profile())
    # the grouping: every group of a rule the profile names, its size, one job at a time in it
    groups = dict(g.split("=", 1) for g in prof["groups"])
    sizes = dict(g.split("=", 1) for g in prof["group-components"])
    assert set(groups.values()) == set(sizes) and all(int(n) >= 1 for n in sizes.values())
    assert all(prof["set-resources"][rule]["model_slot"] == 1 for rule in groups)
    assert prof["resources"] == ["model_slot=1"] and prof["set-resource-scopes"] == ["model_slot=local"]
    assert "model_server={mode: node}" in prof["config"]


def test_cluster_profile_plans_gpu_requests(tmp_path):
    """Runs wherever the plugin is installed: Snakemake accepts profiles/slurm as it ships, and
    the planned simulate job of a GPU model carries the registry's gpu / gpu_model."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(_config(tmp_path)))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO_ROOT / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
         "--workflow-profile", str(PROFILE.parent), CONV],
        capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = proc.stdout + proc.stderr
    # a grouped rule's job is printed inside its group job, indented
    resources = dict(re.findall(r"\n *rule (\w+):.*?\n +resources: ([^\n]*)", plan, flags=re.S))
    # Snakemake < 9.2x prints unevaluated string resources as <TBD> in a dry run
    assert re.search(r"slurm_account=(YOUR_SLURM_ACCOUNT|<TBD>)", resources["lic_rag_simulate"]), resources["lic_rag_simulate"]
    assert "gpu=1, gpu_model=a100" in resources["lic_rag_simulate"], resources["lic_rag_simulate"]
    assert "gpu=0, gpu_model=," in resources["lic_rag_shard"], resources["lic_rag_shard"]
    # a model's simulate jobs share an allocation (profiles/slurm: groups), one at a time in it
    assert f"Group job lic_rag_simulate_{GPU_MODEL} " in plan, plan[-3000:]
    assert "model_slot=1" in resources["lic_rag_simulate"], resources["lic_rag_simulate"]


# --- runs ------------------------------------------------------------------------------------

def _registry(workdir: Path) -> Path:
    """config/models.yaml plus GPU_MODEL: smollm2-135m declared as a one-A100 model."""
    reg = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text())
    reg[GPU_MODEL] = {**reg["smollm2-135m"], "gpus": 1, "gpu_model": "a100"}
    path = workdir / "models.yaml"
    path.write_text(yaml.safe_dump(reg, sort_keys=False))
    return path


def _config(workdir: Path, n_questions: int = 2) -> dict:
    cfg = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    cfg["models_registry"] = str(_registry(workdir))
    # one thread per job: two torch threads on a busy 2-core CI machine are several times slower
    cfg["threads"] = {"simulate": 1, "index": 1, "shard": 1}
    cfg["datasets"]["miniworld"]["n_questions"] = n_questions
    lic = cfg["lic_rag"]
    lic.update({"runs": 1, "conditions": ["FULL"], "retrievers": ["bm25"], "models": [GPU_MODEL]})
    # short shard attempts (they fail the checks and use the decomposition fallback): the 96-token
    # default takes minutes on a busy 2-core machine, and the lane tests SLURM, not sharding
    lic["sharding"].update({"model": "smollm2-135m", "attempts": 1, "max_tokens": 24})
    return cfg


def _env() -> dict:
    # The SLURM jobs inherit this environment (sbatch --export=ALL): the Snakemake restarted
    # inside each job and `convrag` must be on PATH, from this interpreter's venv.
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _snakemake(workdir: Path, target: str | list[str], *, slurm: bool, n_questions: int = 2,
               config: dict | None = None, profile: dict | None = None) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config or _config(workdir, n_questions)))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"),
           "--directory", str(workdir), "--configfile", str(workdir / "config.yaml")]
    if slurm:
        prof_dir = workdir / "profile"
        prof_dir.mkdir(exist_ok=True)
        (prof_dir / "config.yaml").write_text(yaml.safe_dump(profile or _test_profile(), sort_keys=False))
        cmd = ["timeout", "-s", "KILL", str(RUN_TIMEOUT_S)] + cmd + ["--workflow-profile", str(prof_dir)]
    else:
        cmd += ["--cores", "2"]  # picks up profiles/default, as a workstation run does
    targets = [target] if isinstance(target, str) else list(target)
    proc = subprocess.run(cmd + targets, capture_output=True, text=True, env=_env(), cwd=workdir,
                          timeout=RUN_TIMEOUT_S + 60)
    (workdir / "snakemake.out").write_text(proc.stdout + proc.stderr)
    assert proc.returncode not in (124, 137, -9), f"snakemake killed after {RUN_TIMEOUT_S} s:\n{proc.stderr[-4000:]}"
    return proc


def _submitted(workdir: Path) -> dict[str, list[str]]:
    """rule -> SLURM job ids, from Snakemake's own log of the run ('Job N has been submitted
    with SLURM jobid M (log: .../slurm_logs/rule_<rule>/...)')."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    assert logs, f"no Snakemake log in {workdir}/.snakemake/log"
    text = "\n".join(p.read_text() for p in logs)
    found: dict[str, list[str]] = {}
    for jobid, logfile in re.findall(r"submitted with SLURM jobid (\d+) \(log: ([^)]*)\)", text):
        # a group job's log is under slurm_logs/group_<group id>_<rules>/: keyed "group:<that>"
        if g := re.search(r"slurm_logs/group_([^/]+)/", logfile):
            found.setdefault(f"group:{g.group(1)}", []).append(jobid)
            continue
        rule = re.search(r"rule_([A-Za-z0-9_]+)", logfile).group(1)
        found.setdefault(rule, []).append(jobid)
    return found


def _scontrol(jobid: str) -> dict[str, str]:
    r = subprocess.run(["scontrol", "-o", "show", "job", jobid], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"scontrol show job {jobid}: {r.stderr}"
    return dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv)


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    if reason := _slurm_unavailable():
        pytest.skip(reason)
    wd = tmp_path_factory.mktemp("slurm")
    proc = _snakemake(wd, CONV, slurm=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return wd


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    if reason := _slurm_unavailable():
        pytest.skip(reason)
    wd = tmp_path_factory.mktemp("local")
    proc = _snakemake(wd, CONV, slurm=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return wd


@needs_slurm
def test_every_job_ran_under_slurm(slurm_run):
    submitted = _submitted(slurm_run)
    assert set(submitted) == CLUSTER_RULES, submitted
    assert all(len(ids) == 1 for ids in submitted.values()), submitted  # no retry was needed
    for rule, (jobid,) in submitted.items():
        logs = list((slurm_run / ".snakemake" / "slurm_logs" / f"rule_{rule}").rglob(f"{jobid}.log"))
        assert len(logs) == 1, f"no SLURM log for {rule} job {jobid}"
        assert rule in logs[0].read_text(), logs[0]
        rec = _scontrol(jobid)
        assert rec["JobState"] == "COMPLETED" and rec["ExitCode"] == "0:0", (rule, rec)
        assert rec["Partition"] == "debug" and Path(rec["WorkDir"]) == slurm_run, (rule, rec)
        assert rec["Comment"].startswith(f"rule_{rule}"), (rule, rec)
        assert Path(rec["StdOut"]) == logs[0].resolve(), (rule, rec)
    # GPU requests as the registry says: one a100 for the GPU model, nothing for the CPU model
    sim, shard = _scontrol(submitted["lic_rag_simulate"][0]), _scontrol(submitted["lic_rag_shard"][0])
    assert sim.get("TresPerJob") == "gres:gpu:a100:1", sim
    assert "gpu" not in shard.get("TresPerJob", "") + shard.get("TRES", ""), shard
    # the job's own Snakemake ran the rule (through srun, executor slurm-jobstep)
    sim_log = next((slurm_run / ".snakemake" / "slurm_logs" / "rule_lic_rag_simulate").rglob("*.log")).read_text()
    assert "rule lic_rag_simulate:" in sim_log and "Finished job" in sim_log, sim_log[-3000:]


@needs_slurm
def test_slurm_outputs_equal_local_run(slurm_run, local_run):
    for rel in SAME_BYTES:
        a, b = slurm_run / rel, local_run / rel
        assert a.is_file() and b.is_file(), rel
        assert a.read_bytes() == b.read_bytes(), f"{rel} differs between the SLURM and the local run"
    convs = [line for line in (slurm_run / CONV).read_text().splitlines() if line.strip()]
    assert len(convs) == 2  # 2 questions x 1 run


@needs_slurm
def test_failing_job_fails_the_run(tmp_path):
    wd = tmp_path / "fail"
    # the default mini world has 3 questions: asking for 9 makes `convrag select-questions` exit 1
    proc = _snakemake(wd, "results/datasets/miniworld/questions.jsonl", slurm=True, n_questions=9)
    assert proc.returncode != 0, "snakemake exited 0 although a SLURM job failed"
    submitted = _submitted(wd)
    assert submitted.get("prepare_corpus") and submitted.get("select_questions"), submitted
    assert _scontrol(submitted["prepare_corpus"][0])["JobState"] == "COMPLETED"
    for jobid in submitted["select_questions"]:  # the first try and each retry
        rec = _scontrol(jobid)
        assert rec["JobState"] == "FAILED" and rec["ExitCode"] != "0:0", rec
    assert "n_questions" in (wd / "results" / "logs" / "select_questions" / "miniworld.log").read_text()
    assert not (wd / "results/datasets/miniworld/questions.jsonl").exists()


@needs_slurm
def test_grouped_jobs_share_one_engine(tmp_path):
    """profiles/slurm's grouping (issue 47, item 3): two simulate jobs of one GPU model go in one
    sbatch (one GPU asked for), run one after another in it, and the model loads once: the
    allocation's Snakemake starts the model server (convrag.llm.node.Launcher) and both jobs,
    each its own srun step, call it."""
    import tempfile

    wd = tmp_path / "grouped"
    wd.mkdir()
    cfg = _config(wd, n_questions=2)
    cfg["lic_rag"]["chunk_size"] = 1  # 2 questions: two simulate jobs, chunk0 and chunk1
    # a short folder: a Unix socket path has at most 107 bytes
    server_dir = Path(tempfile.mkdtemp(prefix="cms-", dir="/tmp"))
    cfg["model_server"] = {"dir": str(server_dir), "idle_s": 600}
    shipped = _cluster_profile()
    profile = _test_profile()
    for key in GROUPING_KEYS:
        profile[key] = shipped[key]
    assert "model_server={mode: node}" in profile["config"]
    convs = [CONV.replace("chunk0", f"chunk{i}") for i in (0, 1)]
    proc = _snakemake(wd, convs, slurm=True, config=cfg, profile=profile)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    submitted = _submitted(wd)
    groups = {k: v for k, v in submitted.items() if k.startswith("group:")}
    assert list(groups) == [f"group:lic_rag_simulate_{GPU_MODEL}_lic_rag_simulate"], submitted
    assert "lic_rag_simulate" not in submitted, submitted  # no simulate job went alone
    (jobid,) = groups[f"group:lic_rag_simulate_{GPU_MODEL}_lic_rag_simulate"]  # one sbatch for both
    rec = _scontrol(jobid)
    assert rec["JobState"] == "COMPLETED" and rec["ExitCode"] == "0:0", rec
    assert rec.get("TresPerJob") == "gres:gpu:a100:1", rec  # one GPU for the group, not one per job
    group_log = next((wd / ".snakemake" / "slurm_logs").glob("group_*/**/*.log")).read_text()
    # the allocation's Snakemake ran both jobs, each as an srun step with a Snakemake of its own
    # (their output goes to the same log)
    assert "2 of 2 steps (100%) done" in group_log, group_log[-3000:]
    assert group_log.count("1 of 1 steps (100%) done") == 2, group_log[-3000:]

    # both jobs were clients of one server, started once; the first loaded it, the second connected
    served = []
    for i in (0, 1):
        log = (wd / "results" / "logs" / "lic_rag" / "simulate" / "miniworld" / GPU_MODEL / "bm25"
               / f"chunk{i}.log").read_text()
        m = re.search(r"model server: \S+ served by pid (\d+) on this node .*?job (\d+) of it\)", log)
        assert m, log[-3000:]
        served.append((m.group(1), m.group(2)))
    assert served[0][0] == served[1][0], served
    assert sorted(j for _, j in served) == ["1", "2"], served
    server_logs = list(server_dir.glob(f"{GPU_MODEL}-*.log"))
    assert len(server_logs) == 1, server_logs
    text = server_logs[0].read_text()
    assert text.count(f"loaded {GPU_MODEL}") == 1, text[-3000:]
    assert "stopped" in text, text[-3000:]  # ended with the allocation's Snakemake, cleanly
    for conv in convs:
        rows = [line for line in (wd / conv).read_text().splitlines() if line.strip()]
        assert len(rows) == 1, conv
    shutil.rmtree(server_dir, ignore_errors=True)


# --- a paper config in miniature through SLURM (issue 44, item 4) ------------------------------

MINIATURE = os.environ.get("CONVRAG_SLURM_MINIATURE", "worse_labels")
MINIATURE_TIMEOUT_S = 2400  # the lane's whole miniature; a hung status loop must not hang CI


def _miniature_profile() -> dict:
    """The lane's profile (``_test_profile``) for a whole paper DAG: every rule the shipped
    profile sizes for real nodes (32-64 GB, 8 CPUs per GPU) sized for the lane's one node
    (20 GB, 2 CPUs); the tiny models of a miniature need no more. Nothing else changes: the
    executor, status command and the rest are the shipped profile's with the lane's values."""
    prof = _test_profile()
    prof["default-resources"].update({"mem_mb": 2000, "runtime": 30})
    for res in prof["set-resources"].values():
        res.update({"mem_mb": 3000, "runtime": 30})
        if "cpus_per_gpu" in res:
            res["cpus_per_gpu"] = 1
    return prof


def _failed_jobs(text: str, wd: Path) -> str:
    """What a failed miniature job left: each 'Error in rule' block of Snakemake's output, the end of
    each log file it names and of the rule's SLURM job logs. A CI failure report shows only the end
    of the run's output, where the cause is not (stop 52: 'executed 13 of 14 rules', no reason)."""
    parts = []
    for m in re.finditer(r"^Error in rule (\w+):\n((?:[ \t]+.*\n?){0,40})", text, flags=re.M):
        rule, block = m.group(1), m.group(2)
        parts.append(f"Error in rule {rule}:\n{block}")
        for log in re.findall(r"log: (\S+?)(?: \(check log file\(s\) for error details\))?$", block, flags=re.M):
            for name in log.split(","):
                f = wd / name.strip()
                if f.is_file():
                    parts.append(f"--- {name.strip()} (end) ---\n{f.read_text(errors='replace')[-3000:]}")
        for f in sorted((wd / ".snakemake" / "slurm_logs").glob(f"rule_{rule}/**/*.log"))[-2:]:
            parts.append(f"--- {f.relative_to(wd)} (end) ---\n{f.read_text(errors='replace')[-2000:]}")
    return "\n".join(parts) or "(no 'Error in rule' block in the output)"


@needs_slurm
def test_a_paper_config_in_miniature_runs_through_slurm(tmp_path, shared_data, capsys):
    # CI's 90-minute limit: .ci/run names the latest time this ~10-minute run may start; later it
    # is skipped with the reason in the lane's summary (-rs), not left to overrun the limit
    start_by = os.environ.get("CONVRAG_SLURM_MINIATURE_START_BY")
    if start_by and time.time() > float(start_by):
        pytest.skip(f"CI clock past CONVRAG_SLURM_MINIATURE_START_BY ({time.strftime('%H:%M:%S', time.gmtime(float(start_by)))} UTC): "
                    f"the {MINIATURE} miniature was not started")
    wd = tmp_path / "miniature"
    prof_dir = tmp_path / "miniature-profile"
    prof_dir.mkdir(parents=True)
    (prof_dir / "config.yaml").write_text(yaml.safe_dump(_miniature_profile(), sort_keys=False))
    convrag = Path(sys.executable).parent / "convrag"
    # SIGTERM first: `convrag miniature` passes it to Snakemake and stops its servers; KILL 60 s later
    cmd = ["timeout", "-k", "60", str(MINIATURE_TIMEOUT_S), str(convrag), "miniature", MINIATURE, "--cores", "2",
           "--directory", str(wd), "--workflow-profile", str(prof_dir)]
    t0 = time.monotonic()
    # one stream, in the order written: the model server's loading bars (stderr) must not follow
    # the last line
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
                          cwd=tmp_path, timeout=MINIATURE_TIMEOUT_S + 120)
    wall = time.monotonic() - t0
    text = proc.stdout
    (tmp_path / "miniature.out").write_text(text)
    assert proc.returncode not in (124, 137, -9), f"miniature killed after {MINIATURE_TIMEOUT_S} s:\n{text[-4000:]}"
    last = text.strip().splitlines()[-1] if text.strip() else ""
    m = re.fullmatch(rf"miniature {MINIATURE}: executed (\d+) of (\d+) rules", last)
    assert m, text[-4000:]
    executed, planned = int(m.group(1)), int(m.group(2))
    assert proc.returncode == 0 and executed == planned, _failed_jobs(text, wd) + "\n--- output (end) ---\n" + text[-3000:]

    # every job of a cluster rule went through SLURM and finished there; Snakemake prints a job it
    # runs on the submit host (the workflow's and the study's `localrules:`: downloads, tables,
    # figures, cheap aggregation steps, `all`) as `localrule X:`, a cluster job as `rule X:`
    from convrag.miniature import executed_rules

    ran = executed_rules(text)
    local = set(re.findall(r"^localrule (\w+):", text, flags=re.M))
    cluster = {r: n for r, n in ran.items() if r not in local}
    assert not local & set(re.findall(r"^rule (\w+):", text, flags=re.M)), local  # a rule is one or the other
    assert {"download_file", "study_table", "all"} <= local, sorted(local)
    submitted = _submitted(wd)
    assert set(submitted) == set(cluster), (sorted(submitted), sorted(cluster))
    for rule, ids in submitted.items():
        assert len(ids) == cluster[rule], (rule, ids, cluster[rule])  # one SLURM job per job: no retry needed
        for jobid in ids:
            rec = _scontrol(jobid)
            assert rec["JobState"] == "COMPLETED" and rec["ExitCode"] == "0:0", (rule, jobid, rec)
            assert Path(rec["WorkDir"]) == wd.resolve(), (rule, rec)
    n_slurm = sum(len(v) for v in submitted.values())
    assert n_slurm >= 10, submitted  # a paper DAG, not a handful of jobs

    # a miniature's reproduction page: every row not comparable, for the miniature's reason
    import pandas as pd

    repro = next((wd / "results").glob(f"miniature_{MINIATURE}/{MINIATURE}/tables/reproduction.csv"), None)
    if repro is not None:  # a study without a published file (cross) has no reproduction table
        df = pd.read_csv(repro)
        assert len(df) and set(df["verdict"]) == {"not comparable"}, df["verdict"].value_counts()
        assert df["reason"].str.startswith("miniature run").all()
    with capsys.disabled():
        print(f"\n[slurm-lane] miniature {MINIATURE} through SLURM: executed {executed} of {planned} rules, "
              f"{sum(ran.values())} jobs ({n_slurm} through SLURM, {sum(ran.values()) - n_slurm} local rules' jobs) "
              f"in {wall:.0f} s")
