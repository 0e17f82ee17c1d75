"""Conda environments for `snakemake --sdm conda` (envs/*.yaml).

* every env file is valid YAML with name, channels and dependencies, installs python and pip
  from conda-forge and the project itself (editable, from ${CONVRAG_REPO}) with pip;
* every pin that appears both in an env file and in pyproject.toml agrees;
* every rule with a shell command has a conda directive that resolves, for every model of the
  registry and every retriever, to an existing env file; and the right one (vLLM -> vllm-gpu,
  pyserini -> java-bm25, everything else -> cpu).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from convrag.config import REPO_ROOT

ENV_DIR = REPO_ROOT / "envs"
ENV_FILES = sorted(ENV_DIR.glob("*.yaml"))
EXPECTED = {"cpu.yaml", "vllm-gpu.yaml", "java-bm25.yaml"}


def _env(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _pip_requirements(env: dict) -> list[Requirement]:
    reqs = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep.get("pip", []):
                line = line.strip()
                if line and not line.startswith("-"):  # options: -e, --extra-index-url
                    reqs.append(Requirement(line))
    return reqs


def _conda_specs(env: dict) -> dict[str, str]:
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", dep)
            out[m.group(1)] = m.group(2).strip()
    return out


def _pyproject_requirements() -> dict[str, list[Requirement]]:
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    proj = data["project"]
    reqs = list(proj.get("dependencies", []))
    for extra in proj.get("optional-dependencies", {}).values():
        reqs.extend(extra)
    out: dict[str, list[Requirement]] = {}
    for r in map(Requirement, reqs):
        out.setdefault(canonicalize_name(r.name), []).append(r)
    return out


def test_env_files_exist_and_are_complete():
    assert {p.name for p in ENV_FILES} >= EXPECTED
    for path in ENV_FILES:
        env = _env(path)
        assert isinstance(env, dict), f"{path}: not a mapping"
        for key in ("name", "channels", "dependencies"):
            assert env.get(key), f"{path}: missing '{key}'"
        assert "conda-forge" in env["channels"], f"{path}: conda-forge channel missing"
        conda = _conda_specs(env)
        assert "python" in conda and "pip" in conda, f"{path}: python and pip must come from conda"
        pip_blocks = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
        assert len(pip_blocks) == 1, f"{path}: expected one pip section"
        assert any(x.startswith("-e ${CONVRAG_REPO}") for x in pip_blocks[0]), f"{path}: the project is not installed from the repo"


def test_env_specific_contents():
    cpu, gpu, java = (_env(ENV_DIR / n) for n in ("cpu.yaml", "vllm-gpu.yaml", "java-bm25.yaml"))
    names = {n: {canonicalize_name(r.name): r for r in _pip_requirements(e)} for n, e in
             (("cpu", cpu), ("gpu", gpu), ("java", java))}
    assert str(names["cpu"]["torch"].specifier) == "==2.13.0"
    assert any("download.pytorch.org/whl/cpu" in x for d in cpu["dependencies"] if isinstance(d, dict)
               for x in d["pip"]), "cpu env must take torch from the PyTorch CPU index"
    assert "vllm" in names["gpu"]
    # exactly one faiss build per env, through the project's extras: GPU index on GPU nodes
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [canonicalize_name(Requirement(r).name) for r in extras["gpu"]] == ["faiss-gpu"]
    assert [canonicalize_name(Requirement(r).name) for r in extras["cpu"]] == ["faiss-cpu"]
    # sft: coral_sft runs in cpu / gpu; pyserini: the JDK env's Lucene BM25 (gensim for lucene_bm25)
    for env, extra in ((cpu, "cpu,sft"), (gpu, "gpu,sft"), (java, "cpu,pyserini")):
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert "-e ${CONVRAG_REPO}[%s]" % extra in pip, (extra, pip)
    assert _conda_specs(java).get("openjdk", "").lstrip("=").startswith("21")
    assert "pyserini" in names["java"]


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_pins_agree_with_pyproject(path):
    project = _pyproject_requirements()
    env = _env(path)
    checked = 0
    for req in _pip_requirements(env):
        for proj in project.get(canonicalize_name(req.name), []):
            checked += 1
            env_pins = [s.version for s in req.specifier if s.operator == "=="]
            proj_pins = [s.version for s in proj.specifier if s.operator == "=="]
            if env_pins and proj_pins:
                assert Version(env_pins[0]) == Version(proj_pins[0]), f"{path.name}: {req} vs pyproject {proj}"
            elif env_pins:
                assert proj.specifier.contains(env_pins[0], prereleases=True), f"{path.name}: {req} vs pyproject {proj}"
            else:
                assert req.specifier == proj.specifier, f"{path.name}: {req} vs pyproject {proj}"
    # python itself: the env's version must satisfy requires-python
    requires = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    py = _conda_specs(env)["python"].lstrip("=")
    assert SpecifierSet(requires).contains(py + ".0" if py.count(".") == 1 else py), f"{path.name}: python {py}"
    if path.name in EXPECTED:
        assert checked >= 1, f"{path.name}: no pin shared with pyproject was checked"


# ---- rules -> env files ----------------------------------------------------------------

_PROBE = r"""
import json, sys, types
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from snakemake.settings.enums import Quietness

snakefile, workdir, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    wapi = api.workflow(
        resource_settings=ResourceSettings(),
        config_settings=ConfigSettings(configfiles=[Path(p) for p in spec["configfiles"]], config=spec["config"]),
        snakefile=Path(snakefile), workdir=Path(workdir))
    wf = wapi._workflow
    models, retrievers = list(wf.globals["MODELS"]), list(wf.config["retrievers"])
    out = {}
    for rule in wf.rules:
        if not rule.shellcmd:
            continue
        env = rule._conda_env
        if env is None:
            out[rule.name] = None
            continue
        # a study rule's own wildcards (coral's encoder / name) take the first configured entry
        coral = wf.config.get("coral") or {}
        extra = {"encoder": next(iter(coral.get("session_encoders") or {}), None),
                 "name": next(iter(coral.get("sft") or {}), None),
                 "rewriter": next((n for n, x in (coral.get("sft") or {}).items() if x.get("retrieves")), None)}
        # worse_labels' slice / rung: the first slice and its first rung
        wl = {k: v for k, v in ((wf.config.get("worse_labels") or {}).get("slices") or {}).items() if v}
        sl = next(iter(wl), None)
        extra.update(slice=sl, rung=next(iter(((wl.get(sl) or {}).get("ladder") or {})), None))
        cases = ({"*": env} if not callable(env) else
                 {f"{m}|{r}": env(types.SimpleNamespace(model=m, retriever=r, policy="llm_rewrite", strategy="llm_summary", reader=m, judge=m, **extra)) for m in models for r in retrievers})
        out[rule.name] = {k: [v, rule.basedir.join(v).get_path_or_uri(secret_free=True)] for k, v in cases.items()}
print("PROBE" + json.dumps(out))
"""


def _probe(tmp_path: Path, configfiles: list[Path], config: dict | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(REPO_ROOT / "Snakefile"), str(tmp_path),
         json.dumps({"configfiles": [str(p) for p in configfiles], "config": config or {}})],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE"))
    return json.loads(line[len("PROBE"):])


def _check_all_resolve(envs: dict) -> None:
    assert envs, "no shell rules found"
    for rule, cases in envs.items():
        assert cases is not None, f"rule {rule} runs a shell command but has no conda directive"
        for case, (rel, path) in cases.items():
            assert Path(path).resolve().parent == ENV_DIR.resolve(), f"rule {rule} ({case}): {rel} is not in envs/"
            assert Path(path).is_file(), f"rule {rule} ({case}): env file {path} does not exist"


def test_every_shell_rule_has_an_existing_env_default_config(tmp_path):
    envs = _probe(tmp_path, [REPO_ROOT / "config" / "config.yaml"])
    _check_all_resolve(envs)
    # the embedded default runs on CPU only
    assert envs["lic_rag_simulate"]["smollm2-135m|bm25"][0].endswith("envs/cpu.yaml")


def test_env_choice_per_job_on_the_study_grid(tmp_path):
    # the paper grid, with its BM25 switched to the Lucene backend so every branch is reached
    override = {"retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "pyserini"}},
                               "bm25s": {"kind": "bm25", "params": {"backend": "bm25s"}}}}
    envs = _probe(tmp_path, [REPO_ROOT / "config" / "studies" / "lic_rag.yaml"], override)
    _check_all_resolve(envs)
    name = {rule: {case: Path(rel).name for case, (rel, _) in cases.items()} for rule, cases in envs.items()}
    sim, idx = name["lic_rag_simulate"], name["build_index"]
    assert sim["qwen2.5-7b-instruct|dense"] == "vllm-gpu.yaml"
    assert sim["llama-3.3-70b-instruct|bm25"] == "vllm-gpu.yaml"  # GPU env carries the JDK too
    assert sim["gpt-4o|bm25s"] == "cpu.yaml"
    assert sim["gpt-4o|bm25"] == "java-bm25.yaml"
    assert sim["smollm2-135m|closed_book"] == "cpu.yaml"
    assert idx["gpt-4o|bm25"] == "java-bm25.yaml"
    assert idx["gpt-4o|dense"] == "cpu.yaml"
    assert name["lic_rag_shard"]["*"] == "cpu.yaml"  # sharding model gpt-4o: API
    for rule in ("download_file", "prepare_corpus", "select_questions", "lic_rag_score"):
        assert name[rule]["*"] == "cpu.yaml"


def test_coral_training_jobs_take_the_gpu_env_when_they_ask_for_gpus(tmp_path):
    envs = _probe(tmp_path, [REPO_ROOT / "config" / "studies" / "coral.yaml"])
    _check_all_resolve(envs)
    for rule in ("coral_train_session_encoder", "coral_sft"):  # the paper config: one A100 each
        assert {Path(rel).name for rel, _ in envs[rule].values()} == {"vllm-gpu.yaml"}, rule
    envs = _probe(tmp_path, [REPO_ROOT / "config" / "tests" / "coral.yaml"])
    for rule in ("coral_train_session_encoder", "coral_sft"):  # the small grid: CPU
        assert {Path(rel).name for rel, _ in envs[rule].values()} == {"cpu.yaml"}, rule
