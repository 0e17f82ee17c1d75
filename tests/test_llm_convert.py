"""The one-time GGUF -> safetensors conversion gives the same model, and loads fast."""

import pytest

from convrag.llm.convert import MARKER, convert_gguf
from convrag.llm.engine import Engine
from convrag.llm.registry import get_spec, load_registry
from convrag.llm.types import Request, Sampling
from convrag.config import REPO_ROOT

pytestmark = pytest.mark.tinymodel


def test_converted_model_answers_exactly_like_the_gguf(tmp_path, monkeypatch):
    spec = get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), "smollm2-135m")
    reqs = [Request(messages=[{"role": "user", "content": q}], sampling=Sampling(temperature=0.8, max_tokens=16), seed=3)
            for q in ("What is the capital of France?", "Name a colour.")]
    monkeypatch.setenv("CONVRAG_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("CONVRAG_NO_GGUF_CONVERSION", "1")
    direct = [r.text for r in Engine(spec).generate(reqs)]
    monkeypatch.setenv("CONVRAG_NO_GGUF_CONVERSION", "0")
    converted_engine = Engine(spec)
    converted = [r.text for r in converted_engine.generate(reqs)]
    assert converted == direct
    folders = [p for p in tmp_path.iterdir() if (p / MARKER).exists()]
    assert len(folders) == 1 and (folders[0] / "model.safetensors").stat().st_size > 100_000_000
    # a second conversion call is a no-op returning the same folder
    folder, gguf = spec.weights_location()
    assert convert_gguf(folder, gguf) == folders[0]
