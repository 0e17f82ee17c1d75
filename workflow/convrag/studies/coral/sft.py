"""Supervised fine-tuning of CORAL's rewriter and generator (the paper's "-SFT" rows), LoRA with TRL.

Two steps, each its own function:

1. :func:`sft_examples` turns TurnTasks into TRL's *conversational prompt-completion* examples
   (``{"prompt": [messages], "completion": [{"role": "assistant", "content": target}]}``; TRL
   then computes the loss on the completion only). The prompt is exactly what the project sends
   at inference, built by the same code, so the fine-tuned model is trained on the context it
   will see:

   - role ``rewrite``: the ``llm_rewrite`` query policy's messages
     (:func:`convrag.rag.policies.rewrite_messages` over :func:`convrag.rag.retrieve.query_states`,
     the prompt file ``resources/prompts/rag/rewrite.yaml``); target: the golden rewrite
     (``TurnTask.rewrite``, stripped). A task without one is skipped and counted;
   - role ``generate``: coral's generation request for a history strategy
     (:func:`convrag.studies.coral.generate.generation_requests`, the passages shown being the
     task's entry of ``passages_by_task``, numbered 1..k); target: the golden response with
     citations (the paper trains on cited responses). The CORAL loader strips the ``[pid]``
     markers from ``reference_answers[0]`` and keeps the cited text in
     ``labels.reference_with_citations``, whose markers name corpus passage ids; the prompt asks
     for ``[n]`` = the n-th passage SHOWN (and the citation metrics read them so). So with
     ``citations="index"`` (default) every ``[pid]`` becomes ``[n]`` of that passage in the
     shown list, and a marker of a passage not shown (the retrieval missed it) is removed and
     counted. A task without ``reference_with_citations`` (other benchmarks, hand-made tasks)
     trains on ``reference_answers[0]`` as it is (counted). ``citations="none"`` trains on
     ``reference_answers[0]`` (no markers) throughout. A task without a reference is skipped
     and counted. ``llm_summary`` is rejected: its prompt needs LLM summaries.

2. :func:`train_sft` loads the base model exactly as the transformers backend does (registry
   entry -> :class:`TransformersBackend`, which turns a GGUF into a safetensors folder once via
   :func:`convrag.llm.convert.convert_gguf`), trains a LoRA adapter with ``trl.SFTTrainer``,
   merges it (``merge_and_unload``) and saves the merged model + tokenizer (safetensors) to
   ``out_dir/model`` with ``out_dir/training.json``. Everything is built in a staging folder and
   renamed at the end (:func:`convrag.retrieval.base.staging_dir`): a failed job leaves nothing.
   The merged folder is a plain registry model: ``weights: {path: <out_dir>/model}``.
   ``method="full"`` (the paper's choice) updates every weight instead, without an adapter.
   :func:`write_sft_registry` writes ``out_dir/registry.yaml``: the registry the run used plus
   the fine-tuned model under its own name, so the answer stage loads it as any registry model.

The paper's settings are the defaults: learning rate 1e-5, batch size 1, at most 4096 tokens
(longer examples are cut at the end by TRL, ``truncation_mode="keep_start"``; one whose
completion is cut away entirely is dropped by TRL: both counted in training.json).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from convrag.resources import REPO_ROOT
from convrag.errors import ConfigError, DataError
from convrag.records import TurnTask

__all__ = [
    "DEFAULT_LORA",
    "METHODS",
    "REWRITE_PROMPT_FILE",
    "ROLES",
    "SFT_STRATEGIES",
    "add_sft_cli",
    "cite_by_index",
    "load_rewrite_prompts",
    "sft_examples",
    "train_sft",
    "write_sft_registry",
]

ROLES = ("rewrite", "generate")
METHODS = ("lora", "full")  # LoRA (r 8: the laptop option) or every weight (the paper)
SFT_STRATEGIES = ("raw_context", "last_response", "rewrite")
CITATION_MODES = ("index", "none")
REWRITE_PROMPT_FILE = REPO_ROOT / "resources" / "prompts" / "rag" / "rewrite.yaml"
DEFAULT_LORA = {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": "all-linear"}
_CITATION = re.compile(r"\[(\d+)\]")  # CORAL's [pid] markers (convrag.data.coral.CITATION)


# ---------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------


def load_rewrite_prompts(path: str | Path | None = None) -> dict:
    """The rewrite prompt file (default :data:`REWRITE_PROMPT_FILE`), read as ``convrag
    retrieve`` reads ``--rewrite-prompts`` (plain YAML), with a check that it has the keys
    ``rewrite_messages`` needs."""
    import yaml

    path = Path(path if path is not None else REWRITE_PROMPT_FILE)
    try:
        prompts = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: rewrite prompt file not found") from e
    if not isinstance(prompts, Mapping) or not all(isinstance(prompts.get(k), str) for k in ("system", "user")):
        raise ConfigError(f"{path}: a rewrite prompt file needs 'system' and 'user' strings")
    return prompts


def cite_by_index(text: str, shown_ids: Sequence[str], cited: Sequence[str] | None = None) -> tuple[str, int, int]:
    """``text`` with every ``[pid]`` marker renumbered to ``[n]``, n = the 1-based position of
    passage ``pid`` in ``shown_ids`` (its first occurrence); a marker of a passage not shown is
    removed (nothing else changes, as the CORAL loader strips markers). Markers are the released
    data's numeric ids, or exactly the ids in ``cited`` (the task's ``cited_passages``: the
    generated world's ids look like ``coral_world/12``). Returns ``(text, kept, dropped)``."""
    pos: dict[str, int] = {}
    for n, pid in enumerate(shown_ids, start=1):
        pos.setdefault(str(pid), n)
    kept = dropped = 0

    def sub(m: re.Match) -> str:
        nonlocal kept, dropped
        if m.group(1) in pos:
            kept += 1
            return f"[{pos[m.group(1)]}]"
        dropped += 1
        return ""

    pattern = _CITATION
    if cited:
        ids = sorted({str(c) for c in cited}, key=len, reverse=True)
        pattern = re.compile(r"\[(" + "|".join(map(re.escape, ids)) + r"|\d+)\]")
    return pattern.sub(sub, text), kept, dropped


def _example(prompt: list[dict], target: str) -> dict:
    return {"prompt": prompt, "completion": [{"role": "assistant", "content": target}]}


def _unique(tasks: Sequence[TurnTask]) -> None:
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise DataError(f"sft examples: duplicate task id {t.task_id!r}")
        seen.add(t.task_id)


def _check_role_strategy(role: str, strategy: str) -> None:
    if role not in ROLES:
        raise ConfigError(f"sft examples: role {role!r} is not one of {', '.join(ROLES)}")
    if role == "generate" and strategy not in SFT_STRATEGIES:
        why = " (llm_summary needs LLM summaries of the history)" if strategy == "llm_summary" else ""
        raise ConfigError(f"sft examples: strategy {strategy!r}: SFT examples support "
                          f"{', '.join(SFT_STRATEGIES)}{why}")


def sft_examples(tasks: Sequence[TurnTask], role: str, prompts: Mapping, *,
                 passages_by_task: Mapping[str, Sequence] | None = None, strategy: str = "raw_context",
                 max_history_turns: int | None = None, citations: str = "index") -> tuple[list[dict], dict]:
    """TRL conversational prompt-completion examples of ``tasks`` for ``role`` (module doc),
    in task order, and a report.

    ``prompts``: the rewrite prompt file (role rewrite, :func:`load_rewrite_prompts`) or coral's
    generation prompts (role generate, ``generate.load_prompts``). ``passages_by_task`` (task
    id -> passages shown, as ``generation_requests`` takes them) is required for generate.

    Report: ``role, strategy (None for rewrite), citations, tasks, used, skipped`` (reason ->
    count), ``skipped_tasks`` (reason -> task ids), and per role: rewrite ``targets_with_newline``
    (the llm_rewrite policy stops at a newline, so such a target teaches a cut); generate
    ``rewrite_fallbacks`` (strategy rewrite, task without a rewrite: its question is asked),
    ``citations_kept``, ``citations_dropped`` (cited passage not shown), ``plain_targets``
    (trained on ``reference_answers[0]``: no ``reference_with_citations``), ``targets_without_citation``."""
    _check_role_strategy(role, strategy)
    if citations not in CITATION_MODES:
        raise ConfigError(f"sft examples: citations {citations!r} is not one of {', '.join(CITATION_MODES)}")
    tasks = list(tasks)
    _unique(tasks)
    examples: list[dict] = []
    skipped: dict[str, list[str]] = {}
    report: dict[str, Any] = {"role": role, "strategy": strategy if role == "generate" else None,
                              "citations": citations if role == "generate" else None, "tasks": len(tasks)}

    if role == "rewrite":
        from convrag.rag.policies import rewrite_messages
        from convrag.rag.retrieve import query_states

        newline = 0
        for t, state in zip(tasks, query_states(tasks)):
            target = (t.rewrite or "").strip()
            if not target:
                skipped.setdefault("no_rewrite", []).append(t.task_id)
                continue
            newline += "\n" in target
            examples.append(_example(rewrite_messages(state, prompts), target))
        report["targets_with_newline"] = newline
    else:
        from convrag.llm.types import Sampling
        from convrag.studies.coral.generate import generation_requests, shown_passages, uses_rewrite_fallback

        if passages_by_task is None:
            raise ConfigError("sft examples: role 'generate' needs passages_by_task (the passages shown per task)")
        keep, targets = [], []
        kept = dropped = plain = uncited = 0
        for t in tasks:
            reference = (t.reference_answers[0] if t.reference_answers else "").strip()
            if not reference:
                skipped.setdefault("no_reference", []).append(t.task_id)
                continue
            cited = t.labels.get("reference_with_citations") if citations == "index" else None
            if isinstance(cited, str) and cited.strip():
                ids = [p["id"] for p in shown_passages(passages_by_task, t)]
                target, k, d = cite_by_index(cited.strip(), ids, t.labels.get("cited_passages"))
                target = target.strip()
                kept, dropped = kept + k, dropped + d
            else:
                target = reference
                plain += citations == "index"
            uncited += not _CITATION.search(target)
            keep.append(t)
            targets.append(target)
        # the requests' sampling and seed are not part of the messages
        requests = generation_requests(keep, passages_by_task, strategy, prompts, Sampling(), seed=0,
                                       max_history_turns=max_history_turns)
        examples = [_example(r.chat, target) for r, target in zip(requests, targets)]
        report.update(rewrite_fallbacks=sum(uses_rewrite_fallback(t, strategy) for t in keep),
                      max_history_turns=max_history_turns, citations_kept=kept, citations_dropped=dropped,
                      plain_targets=plain, targets_without_citation=uncited)
    report.update(used=len(examples), skipped={k: len(v) for k, v in skipped.items()}, skipped_tasks=skipped)
    return examples, report


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------


def _lora_config(lora: Mapping | None):
    from peft import LoraConfig

    lora = dict(lora or {})
    unknown = sorted(set(lora) - set(DEFAULT_LORA))
    if unknown:
        raise ConfigError(f"train_sft: unknown lora key {unknown[0]!r}; expected {', '.join(DEFAULT_LORA)}")
    c = {**DEFAULT_LORA, **lora}
    if isinstance(c["r"], bool) or not isinstance(c["r"], int) or c["r"] < 1:
        raise ConfigError(f"train_sft: lora r must be a positive integer, got {c['r']!r}")
    if not isinstance(c["alpha"], (int, float)) or c["alpha"] <= 0:
        raise ConfigError(f"train_sft: lora alpha must be a positive number, got {c['alpha']!r}")
    if not isinstance(c["dropout"], (int, float)) or not 0 <= c["dropout"] < 1:
        raise ConfigError(f"train_sft: lora dropout must be in [0, 1), got {c['dropout']!r}")
    tm = c["target_modules"]
    if not (isinstance(tm, str) or (isinstance(tm, list) and tm and all(isinstance(x, str) for x in tm))):
        raise ConfigError(f"train_sft: lora target_modules must be a string or a list of module names, got {tm!r}")
    return LoraConfig(r=c["r"], lora_alpha=c["alpha"], lora_dropout=float(c["dropout"]), target_modules=tm,
                      task_type="CAUSAL_LM"), c


def _check_examples(examples: Sequence[Mapping]) -> None:
    if not examples:
        raise DataError("train_sft: no training examples")
    for i, ex in enumerate(examples):
        ok = (isinstance(ex, Mapping) and isinstance(ex.get("prompt"), list) and ex["prompt"]
              and isinstance(ex.get("completion"), list) and len(ex["completion"]) == 1
              and ex["completion"][0].get("role") == "assistant"
              and isinstance(ex["completion"][0].get("content"), str))
        if not ok:
            raise DataError(f"train_sft: example {i} is not a conversational prompt-completion example "
                            "({prompt: [messages], completion: [{role: assistant, content}]})")


def _versions() -> dict:
    import importlib.metadata as md

    return {p: md.version(p) for p in ("trl", "peft", "transformers", "torch", "accelerate", "datasets")}


def train_sft(examples: Sequence[Mapping], *, base_model: str, registry_path: str | Path, out_dir: str | Path,
              lora: Mapping | None = None, epochs: float = 1, max_steps: int | None = None, lr: float = 1e-5,
              batch_size: int = 1, max_length: int | None = 4096, seed: int = 0, gradient_checkpointing: bool = True,
              role: str | None = None, examples_report: Mapping | None = None, method: str = "lora") -> dict:
    """LoRA-fine-tune registry model ``base_model`` on ``examples`` (from :func:`sft_examples`),
    merge the adapter and save the merged model to ``out_dir/model``; returns what is written to
    ``out_dir/training.json``.

    ``lora``: ``{r, alpha, dropout, target_modules}`` (defaults :data:`DEFAULT_LORA`); with
    ``method="full"`` no adapter is made (``lora`` must then be empty) and every weight trains.
    ``max_steps`` (optimizer steps) overrides ``epochs`` when given. ``gradient_checkpointing``
    (TRL's default, on) saves memory on long examples at some speed. ``role`` and
    ``examples_report`` are only recorded. The registry entry's ``chat_template`` (if any) is the
    tokenizer's template during training and is saved with the tokenizer; its
    ``chat_template_kwargs`` are applied to every example (give them again in the fine-tuned
    model's registry entry)."""
    import torch
    import transformers
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from convrag.llm.backends.transformers_backend import TransformersBackend
    from convrag.llm.registry import get_spec, load_registry
    from convrag.retrieval.base import staging_dir

    _check_examples(examples)
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"train_sft: max_steps must be a positive integer or None, got {max_steps!r}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigError(f"train_sft: batch_size must be a positive integer, got {batch_size!r}")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 2):
        raise ConfigError(f"train_sft: max_length must be an integer >= 2 or None, got {max_length!r}")
    if not lr > 0 or not epochs > 0:
        raise ConfigError(f"train_sft: lr and epochs must be positive, got lr={lr!r}, epochs={epochs!r}")
    if method not in METHODS:
        raise ConfigError(f"train_sft: method {method!r} is not one of {', '.join(METHODS)}")
    if method == "full" and lora:
        raise ConfigError("train_sft: lora settings are given but method is 'full' (no adapter is trained)")
    peft_config, lora_used = _lora_config(lora) if method == "lora" else (None, None)
    spec = get_spec(load_registry(registry_path), base_model)
    t0 = time.time()
    transformers.set_seed(seed)  # the LoRA matrices are initialised before the Trainer seeds
    # exactly the backend's loading: weights location, GGUF -> safetensors (cached), dtype, device
    backend = TransformersBackend(spec)
    model, tok = backend.model, backend.tok
    if backend.template:  # the registry's template: train on what inference renders, save it
        tok.chat_template = backend.template
    rows = [{"prompt": [dict(m) for m in ex["prompt"]], "completion": [dict(m) for m in ex["completion"]]}
            for ex in examples]
    if spec.chat_template_kwargs:
        rows = [{**r, "chat_template_kwargs": dict(spec.chat_template_kwargs)} for r in rows]
    on_gpu = str(backend.device).startswith("cuda")

    # transformers 5.24 renamed gradient_checkpointing (a deprecated alias that warns) to
    # activation_checkpointing; 5.19 knows only the old name
    ckpt = ("activation_checkpointing" if "activation_checkpointing" in SFTConfig.__dataclass_fields__
            else "gradient_checkpointing")

    with staging_dir(out_dir) as stage:
        work = stage / "trainer"  # the Trainer's output_dir: nothing is saved there (save_strategy "no")
        args = SFTConfig(
            output_dir=str(work), num_train_epochs=float(epochs), max_steps=max_steps if max_steps else -1,
            learning_rate=lr, per_device_train_batch_size=batch_size, gradient_accumulation_steps=1,
            max_length=max_length, truncation_mode="keep_start", completion_only_loss=True, packing=False,
            seed=seed, data_seed=seed, report_to=[], save_strategy="no", logging_strategy="steps", logging_steps=1,
            # TRL 1.x turns bf16 autocast on by default: on a CPU without bf16 units that made one
            # step of SmolLM2-135M ~50x slower (measured: 60 s instead of ~1 s); CPU trains in fp32
            use_cpu=not on_gpu, bf16=on_gpu and torch.cuda.is_bf16_supported(), fp16=False,
            dataloader_num_workers=0, disable_tqdm=True, shuffle_dataset=False,
            **{ckpt: gradient_checkpointing},
        )
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok,
                             peft_config=peft_config)
        used = len(trainer.train_dataset)
        if not used:
            raise DataError(f"train_sft: TRL dropped all {len(examples)} examples: each one's prompt fills "
                            f"max_length={max_length} tokens, leaving no completion token to learn")
        at_max = (sum(1 for ids in trainer.train_dataset["input_ids"] if len(ids) >= max_length)
                  if max_length is not None else 0)
        result = trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        final_loss = float(losses[-1]) if losses else float(result.training_loss)
        if not math.isfinite(final_loss):
            raise DataError(f"train_sft: the training loss is {final_loss} (diverged); nothing is saved")
        merged = trainer.model.merge_and_unload() if method == "lora" else trainer.model
        merged.config.use_cache = True  # training turns the KV cache off in the config
        merged.save_pretrained(stage / "model", safe_serialization=True)
        tok.save_pretrained(stage / "model")
        shutil.rmtree(work, ignore_errors=True)
        info = {
            "base_model": base_model, "base_model_id": spec.model_id(), "base_revision": spec.load_revision(),
            "registry": str(registry_path), "role": role,
            "examples_given": len(examples), "examples_used": used,
            "examples_dropped_by_truncation": len(examples) - used, "examples_at_max_length": at_max,
            "steps": int(trainer.state.global_step), "epochs": float(trainer.state.epoch or 0.0),
            "final_loss": final_loss, "mean_loss": float(result.training_loss), "losses": [float(x) for x in losses],
            "lr": lr, "batch_size": batch_size, "max_length": max_length, "max_steps": max_steps,
            "epochs_asked": epochs, "gradient_checkpointing": gradient_checkpointing,
            "method": method, "lora": lora_used, "seed": seed, "device": str(backend.device), "bf16_autocast": bool(args.bf16),
            "dtype": str(model.dtype).replace("torch.", ""),
            "chat_template_kwargs": spec.chat_template_kwargs, "seconds": round(time.time() - t0, 3),
            "versions": _versions(), "examples_report": dict(examples_report) if examples_report else None,
        }
        (stage / "training.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    del trainer, merged, model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return info


def write_sft_registry(registry_path: str | Path, base_model: str, name: str, out_dir: str | Path) -> Path:
    """``out_dir/registry.yaml``: every entry of ``registry_path`` plus ``name``, the base
    model's entry with ``weights: {path: model}`` (relative: the registry loader resolves it
    against the registry's own folder, so the results folder can move) and ``revision:
    sha256:<...>`` of the merged weights (the cache keys on the revision, so weights tuned again
    into the same folder never get the old weights' answers), so a job given this registry
    loads the fine-tuned model by ``name`` with the base's backend, dtype, context length,
    template and size."""
    import yaml

    data = yaml.safe_load(Path(registry_path).read_text(encoding="utf-8")) or {}
    if base_model not in data:
        raise ConfigError(f"{registry_path}: no model {base_model!r} to derive {name!r} from")
    if name in data:
        raise ConfigError(f"{registry_path}: the fine-tuned model's name {name!r} is already a registry model")
    entry = {k: v for k, v in dict(data[base_model]).items() if k != "revision"}
    entry["weights"] = {"path": "model"}
    entry["revision"] = f"sha256:{folder_sha256(Path(out_dir) / 'model')[:16]}"
    entry["family"] = entry.get("family") or re.match(r"[A-Za-z]*", base_model).group(0).lower() or base_model
    out = Path(out_dir) / "registry.yaml"
    out.write_text(yaml.safe_dump({**data, name: entry}, sort_keys=False), encoding="utf-8")
    return out


def folder_sha256(folder: Path) -> str:
    """sha256 over every file of ``folder`` (relative name and content, in name order)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# CLI: convrag coral sft
# ---------------------------------------------------------------------------------------


def gold_passages(tasks: Sequence[TurnTask], corpus_path: str | Path, k: int) -> dict[str, list]:
    """Each task's golden passages (``gold_docs`` with grade > 0, in grade then id order, at most
    ``k``) with their corpus texts: what a generator trained on another split (no retrieval run
    there) is shown. A golden id missing from the corpus is an error naming the task."""
    from convrag.records import Passage, read_records

    want = {d for t in tasks for d, g in t.gold_docs.items() if g > 0}
    corpus = {p.doc_id: p for p in read_records(corpus_path, Passage) if p.doc_id in want}
    out = {}
    for t in tasks:
        ids = sorted((d for d, g in t.gold_docs.items() if g > 0), key=lambda d: (-t.gold_docs[d], d))[:k]
        gone = [d for d in ids if d not in corpus]
        if gone:
            raise DataError(f"{corpus_path}: golden passage {gone[0]!r} of task {t.task_id!r} is not in the corpus")
        out[t.task_id] = [corpus[d] for d in ids]
    return out


def cmd_sft(a) -> None:
    from convrag.cliargs import set_threads
    from convrag.io import write_json
    from convrag.records import read_records

    set_threads(a.threads)
    _check_role_strategy(a.role, a.strategy)
    tasks = read_records(a.tasks, TurnTask)
    passages = None
    if a.role == "rewrite":
        prompts = load_rewrite_prompts(a.prompts)
    else:
        from convrag.rag.replay import shown_passages
        from convrag.studies.coral.generate import load_prompts

        need = ("corpus",) if a.gold_passages else ("run", "run_queries", "corpus")
        missing = [f"--{k}" for k in need if not getattr(a, k)]
        if missing:
            raise ConfigError(f"coral sft: --role generate needs {', '.join(m.replace('_', '-') for m in missing)} "
                              "(the retrieval run whose top-k passages are shown)")
        prompts = load_prompts(a.prompts)
        passages = (gold_passages(tasks, a.corpus, a.top_k) if a.gold_passages
                    else shown_passages(tasks, a.run, a.run_queries, a.corpus, a.top_k))
    examples, report = sft_examples(tasks, a.role, prompts, passages_by_task=passages, strategy=a.strategy,
                                    max_history_turns=a.max_history_turns, citations=a.citations)
    train_sft(examples, base_model=a.base_model, registry_path=a.registry, out_dir=a.out, lora=a.lora,
              epochs=a.epochs, max_steps=a.max_steps, lr=a.lr, batch_size=a.batch_size, max_length=a.max_length,
              seed=a.seed, gradient_checkpointing=not a.no_gradient_checkpointing, role=a.role,
              examples_report=report, method=a.method)
    if a.name:
        write_sft_registry(a.registry, a.base_model, a.name, a.out)
    if a.report:
        write_json(a.report, report)


def add_sft_cli(sub) -> None:
    """Register ``sft`` on the ``convrag coral`` subparsers."""
    from convrag.cliargs import json_arg
    from convrag.llm.registry import DEFAULT_REGISTRY

    s = sub.add_parser("sft", help="LoRA-fine-tune a rewriter or a generator on the golden rewrites / cited "
                                   "responses (the paper's -SFT rows), merged into one model folder")
    s.set_defaults(fn=cmd_sft)
    s.add_argument("--tasks", required=True, help="TurnTasks JSONL (the training split)")
    s.add_argument("--role", required=True, choices=ROLES)
    s.add_argument("--base-model", required=True, help="registry model to fine-tune (transformers loading)")
    s.add_argument("--out", required=True, help="folder: model/ (merged, safetensors) and training.json")
    s.add_argument("--registry", default=DEFAULT_REGISTRY)
    s.add_argument("--prompts", default=None, help="prompt file (default: rag/rewrite.yaml for rewrite, "
                                                   "coral/generate.yaml for generate)")
    s.add_argument("--run", default=None, help="generate: TREC run whose top-k passages are shown")
    s.add_argument("--run-queries", default=None, help="generate: the run's queries JSONL")
    s.add_argument("--corpus", default=None, help="generate: passages JSONL")
    s.add_argument("--top-k", type=int, default=5)
    s.add_argument("--gold-passages", action="store_true", help="generate: show each task's golden passages "
                                                                 "(a training split has no retrieval run)")
    s.add_argument("--strategy", default="raw_context", help=f"generate: one of {', '.join(SFT_STRATEGIES)}")
    s.add_argument("--max-history-turns", type=int, default=None)
    s.add_argument("--citations", choices=CITATION_MODES, default="index",
                   help="generate: golden citations renumbered to the shown passages (index) or none")
    s.add_argument("--method", choices=METHODS, default="lora", help="lora (an adapter, merged) or full (every weight)")
    s.add_argument("--lora", type=json_arg, default={}, help='JSON {"r", "alpha", "dropout", "target_modules"}')
    s.add_argument("--name", default=None, help="write out/registry.yaml: --registry plus the fine-tuned model "
                                                "under this name")
    s.add_argument("--epochs", type=float, default=1.0)
    s.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    s.add_argument("--lr", type=float, default=1e-5)
    s.add_argument("--batch-size", type=int, default=1)
    s.add_argument("--max-length", type=int, default=4096, help="tokens per example (prompt + completion)")
    s.add_argument("--no-gradient-checkpointing", action="store_true")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--report", default=None, help="JSON: the examples report (counts, skipped tasks)")
    s.add_argument("--threads", type=int, default=None)
