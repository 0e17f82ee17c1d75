"""Argument types every stage's command line shares (``convrag <stage>`` and each study's
``convrag <study> <stage>``): a study's CLI imports these, never ``convrag.cli``, which imports
every shared stage."""

from __future__ import annotations

import argparse
import json
import os


def json_arg(s: str):
    """A JSON command-line value (the rules pass config blocks as one JSON argument)."""
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e


def set_threads(n: int | None) -> None:
    """A job's thread budget for the libraries it loads (read by convrag.llm and the retrievers)."""
    if n:
        os.environ["CONVRAG_THREADS"] = str(n)
