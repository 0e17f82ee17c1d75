"""Helpers shared by the vLLM lane tests (imported by name; no vllm import here)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_MODEL_LEN = 2048


def lane_out() -> Path:
    out = Path(os.environ.get("CONVRAG_VLLM_LANE_OUT") or REPO / "results" / "vllm_lane")
    out.mkdir(parents=True, exist_ok=True)
    return out


def shutdown_vllm(engine) -> None:
    """Stop the EngineCore/worker processes of an Engine's vLLM backend (frees the cores)."""
    be = getattr(engine, "_backend", None)
    if be is not None and hasattr(be, "close"):
        be.close()
    engine._backend = None
