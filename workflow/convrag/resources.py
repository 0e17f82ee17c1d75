"""The project's own files (prompts, schemas, the sources list) and how they are read: the one
module that knows where the repository is, below every package that reads a prompt file, so no
shared package reaches for the repository root itself."""

from __future__ import annotations

from pathlib import Path

from convrag.errors import ConfigError
from convrag.io import read_yaml as io_read_yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
PROMPTS_DIR = REPO_ROOT / "resources" / "prompts"  # the default prompts folder (config: prompts_dir)


def read_yaml(path: Path) -> dict:
    """A YAML file (a config, a prompt file) read strictly (``convrag.io.read_yaml``: a duplicate
    key or bytes that are not UTF-8 is a ConfigError naming the file and line); empty -> {}."""
    return io_read_yaml(path, error=ConfigError) or {}


def read_prompt_file(path: str | Path, check=None, what: str = "prompts") -> dict:
    """A prompt YAML file, checked by ``check(prompts, where)`` so that a missing key fails
    before any model call."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: {what} not found")
    prompts = read_yaml(p)
    if not isinstance(prompts, dict):
        raise ConfigError(f"{p}: expected a mapping of prompts")
    if check is not None:
        check(prompts, str(p))
    return prompts
