"""The built-in corpus loaders (registered on import)."""

from __future__ import annotations

from convrag.data import register_corpus_loader


@register_corpus_loader("miniworld")
def _miniworld(name: str, spec: dict, files: dict):
    from convrag.data.miniworld import generate_world

    return generate_world({**(spec.get("spec") or {}), "name": name}, spec.get("seed", 13))


@register_corpus_loader("hipporag")
def _hipporag(name: str, spec: dict, files: dict):
    from convrag.data.hipporag import load_hipporag

    return load_hipporag(files["questions"], files["corpus"], name, format=spec["format"])
