"""Errors that name the field, the file and the line, and say what to do (issue 39, item 3): each
test makes the fault by hand and asserts the message text."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from convrag.config import REPO_ROOT, ConfigOrigin, load_config, validate_config
from convrag.errors import ConfigError
from convrag.llm.registry import load_registry

DEFAULT = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


def _line_of(path: Path, text: str) -> int:
    """The 1-based line of the only line of ``path`` that is ``text`` (indentation aside)."""
    hits = [i for i, ln in enumerate(path.read_text().splitlines(), start=1) if ln.strip() == text]
    assert len(hits) == 1, hits
    return hits[0]


def _shown(path: Path) -> str:
    """A file as messages name it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _write_default(tmp_path: Path, keys: tuple, value, name: str = "cfg.yaml") -> Path:
    """The embedded default config with one value set, as a --configfile would give it."""
    cfg = copy.deepcopy(DEFAULT)
    node = cfg
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    p = tmp_path / name
    p.write_text(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False))
    return p


def _dry_run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           "--directory", str(cwd), *args], capture_output=True, text=True, env=env, timeout=300)


# ---- 1. a decoding setting out of range names itself and its range ----------------------------


@pytest.mark.parametrize("keys, value, why", [
    (("lic_rag", "assistant", "temperature"), -0.5, "-0.5 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("lic_rag", "assistant", "top_p"), 1.5, "1.5 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("lic_rag", "assistant", "max_tokens"), 0, "0 is less than the minimum of 1 (allowed: an integer >= 1)"),
    (("lic_rag", "assistant_by_model", "smollm2-135m"), {"temperature": -0.25},
     "-0.25 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("lic_rag", "user_simulator", "top_p"), 1.25, "1.25 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("cross", "sampling", "top_p"), 0, "0 is less than or equal to the minimum of 0 (allowed: a number > 0 and <= 1)"),
    (("mtrag_un", "generation", "sampling"), {"temperature": -1.5},
     "-1.5 is less than the minimum of 0 (allowed: a number >= 0)"),
    (("coral", "generation", "sampling"), {"top_p": 2.5},
     "2.5 is greater than the maximum of 1 (allowed: a number > 0 and <= 1)"),
    (("worse_labels", "bootstrap", "n_resamples"), 5, "5 is less than the minimum of 10 (allowed: an integer >= 10)"),
])
def test_a_decoding_setting_out_of_range_names_the_key_and_the_range(tmp_path, keys, value, why):
    """The sampling blocks are `unevaluatedProperties: false` over an `allOf`/`$ref`: a failing value
    used to be reported as `Unevaluated properties are not allowed ('stop' was unexpected)`."""
    p = _write_default(tmp_path, keys, value)
    leaf = keys if not isinstance(value, dict) else (*keys, *value)
    shown = value if not isinstance(value, dict) else next(iter(value.values()))
    line = _line_of(p, f"{leaf[-1]}: {shown}")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{_shown(p)}:{line}: invalid config key '{'.'.join(leaf)}': {why}"
    assert "Unevaluated" not in str(e.value)


def test_an_unknown_key_in_a_sampling_block_is_still_named(tmp_path):
    p = _write_default(tmp_path, ("lic_rag", "assistant", "temprature"), 0.5)
    with pytest.raises(ConfigError, match=r"cfg\.yaml:\d+: invalid config key 'lic_rag\.assistant\.temprature': "
                                          r"unknown key$"):
        load_config(p)


# ---- 2. the config file and line, not "config (config/config.yaml + ...)" and common.smk ---------


LIC_K3 = """\
studies: [lic_rag]
corpora:
  miniworld: {kind: miniworld}
datasets:
  miniworld: {corpus: miniworld, n_questions: 3}
retrievers:
  bm25:
    kind: bm25
    params: {backend: bm25s, k3: 1.5, b: 0.75}
lic_rag:
  datasets: [miniworld]
  models: [smollm2-135m]
  retrievers: [bm25]
"""


def test_the_dry_run_names_the_configfile_and_line_and_not_common_smk(tmp_path):
    """The issue's two faults through Snakemake itself: a --configfile that replaces the default,
    with an unknown retriever param (item 3: it used to pass the dry run) and, in a second file,
    an out-of-range temperature (item 1)."""
    k3 = tmp_path / "k3.yaml"
    k3.write_text(LIC_K3)
    proc = _dry_run("--configfile", str(k3), cwd=tmp_path)
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert ("Config error: k3.yaml:9: invalid config key 'retrievers.bm25.params.k3': not a param of retriever kind "
            "'bm25' (known: b, backend, k1, stemmer, stopwords, threads)") in out, out[-2000:]
    assert "common.smk" not in out and "config/config.yaml" not in out and "Traceback" not in out, out[-2000:]

    hot = tmp_path / "hot.yaml"
    hot.write_text("lic_rag:\n  assistant:\n    temperature: -0.5\n")
    k3.write_text(LIC_K3.replace("k3:", "k1:"))
    proc = _dry_run("--configfile", str(k3), str(hot), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert ("Config error: hot.yaml:3: invalid config key 'lic_rag.assistant.temperature': -0.5 is less than the "
            "minimum of 0 (allowed: a number >= 0)") in out, out[-2000:]
    assert "common.smk" not in out, out[-2000:]


def test_an_error_names_the_file_that_set_the_key_among_several(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(LIC_K3.replace("k3:", "k1:"))
    b.write_text("# the second file\nlic_rag:\n  runs: 0\n")
    cfg = {**yaml.safe_load(a.read_text()), "lic_rag": {**yaml.safe_load(a.read_text())["lic_rag"], "runs": 0}}
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, source=ConfigOrigin([a, b]))
    assert str(e.value) == (f"{_shown(b)}:3: invalid config key 'lic_rag.runs': 0 is less than the minimum "
                            "of 1 (allowed: an integer >= 1)")
    # set by --config: that is where it came from
    with pytest.raises(ConfigError) as e:
        validate_config(copy.deepcopy(cfg), source=ConfigOrigin([a], {"lic_rag": {"runs": "0"}}))
    assert str(e.value).startswith("--config lic_rag=...: invalid config key 'lic_rag.runs': 0 is less than")
    # a key the file does not write (a required one) is placed at its block
    cfg = yaml.safe_load(a.read_text())
    del cfg["datasets"]["miniworld"]["n_questions"]
    a.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError) as e:
        validate_config(cfg, source=ConfigOrigin([a]))
    line = a.read_text().splitlines().index("datasets:") + 2  # its "  miniworld:"
    assert str(e.value) == (f"{_shown(a)}:{line} (under 'datasets.miniworld'): invalid config key "
                            "'datasets.miniworld.n_questions': required, not set")


# ---- 3. an unknown retriever param fails at config time, for every kind ----------------------------


@pytest.mark.parametrize("kind, params, bad, known", [
    ("bm25", {"k3": 1.2}, "k3", "b, backend, k1, stemmer, stopwords, threads"),
    ("dense", {"batchsize": 8}, "batchsize", None),
    ("hipporag2", {"dampning": 0.5}, "dampning", None),
    ("pog", {"depth": 2}, "depth", None),
    ("closed_book", {"k1": 1}, "k1", "none"),
])
def test_an_unknown_retriever_param_is_a_config_error_naming_the_known_ones(tmp_path, kind, params, bad, known):
    from convrag.retrieval import KINDS

    known = known or ", ".join(sorted(KINDS.get(kind).DEFAULTS))
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("    kind: bm25\n    params: {backend: bm25s, k3: 1.5, b: 0.75}\n",
                                f"    kind: {kind}\n    params:\n      {bad}: {params[bad]}\n"))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value).startswith(f"{_shown(p)}:10: invalid config key 'retrievers.bm25.params.{bad}': "
                                   f"not a param of retriever kind '{kind}' (known: {known})")


def test_a_near_miss_param_gets_a_suggestion(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("k3:", "k_1:"))
    with pytest.raises(ConfigError, match=r"'retrievers\.bm25\.params\.k_1': not a param .*; did you mean 'k1'\?$"):
        load_config(p)


# ---- 7. duplicate keys in the model registry and in config files ----------------------------------


def test_a_model_named_twice_in_the_registry_is_an_error(tmp_path):
    text = (REPO_ROOT / "config" / "models.yaml").read_text()
    first = next(ln for ln in text.splitlines() if ln and not ln.startswith((" ", "#")))
    reg = tmp_path / "models.yaml"
    reg.write_text(text + "\n" + first + "\n  backend: openai\n  api_model: x\n  api_key_env: X\n")
    n_first = text.splitlines().index(first) + 1
    n_again = len(text.splitlines()) + 2
    with pytest.raises(ConfigError) as e:
        load_registry(reg)
    assert str(e.value) == (f"{reg}:{n_again}: duplicate key '{first.rstrip(':')}' (first at line {n_first}): YAML keeps "
                            "only the last value, so one of them would be lost silently; remove or rename one")


def test_a_key_twice_in_a_config_file_is_an_error_in_load_config_and_the_workflow(tmp_path):
    p = tmp_path / "cfg.yaml"
    p.write_text(LIC_K3.replace("k3:", "k1:") + "  runs: 2\n  runs: 3\n")
    want = (f"{p}:15: duplicate key 'runs' (first at line 14): YAML keeps only the last value, so one of them would be "
            "lost silently; remove or rename one")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == want
    # what Snakemake read (last one wins) is checked again from the files themselves
    with pytest.raises(ConfigError) as e:
        validate_config(yaml.safe_load(p.read_text()), source=ConfigOrigin([p]))
    assert str(e.value) == want
