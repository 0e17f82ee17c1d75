"""GGUF -> safetensors, once per weights file.

Why: dequantising a GGUF on every load costs 10-40 s per job on a laptop (every simulate
job loads the model), and vLLM cannot read these GGUFs at all. The dequantised float32
weights and the tokenizer are saved once as a plain HF folder in a local model cache and
loaded from there afterwards (about a second). The weights are the same tensors, so the
outputs and the cache keys (which name the GGUF) do not change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from convrag.io import public_tree, temp_dir

MARKER = "convrag-converted.txt"


def model_cache_dir() -> Path:
    return Path(os.environ.get("CONVRAG_MODEL_CACHE") or Path.home() / ".cache" / "convrag" / "models")


def _fingerprint(gguf_path: Path) -> str:
    st = gguf_path.stat()
    return hashlib.sha256(f"{gguf_path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


def convert_gguf(folder: str, gguf_file: str, out_dir: str | Path | None = None, dtype: str = "float32") -> Path:
    """Return a safetensors HF folder for ``folder/gguf_file``, converting it on first use.

    The folder is built in a temporary sibling and renamed into place, so two jobs that
    convert at the same time never see a half-written model.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(folder) / gguf_file
    if out_dir is None:
        out_dir = model_cache_dir() / f"{src.stem}-{_fingerprint(src)}"
    out = Path(out_dir)
    if (out / MARKER).exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(out.parent, prefix=f".{out.name}.")  # mkdir()'s mode under the umask
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=getattr(torch, dtype))
        # transformers marks GGUF-loaded models as "quantized" and refuses to save them, but
        # the tensors are already dequantised: drop the marker and save plain weights.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / MARKER).write_text(f"converted from {src} ({dtype})\n")
        public_tree(tmp)  # save_pretrained's safetensors are 0600: give them the umask's mode
        try:
            os.replace(tmp, out)
        except OSError:  # another process finished first
            if not (out / MARKER).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
