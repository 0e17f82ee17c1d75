"""The run's own settings in words, appended to every caption of a study.

A caption's fixed text describes the method (and the paper's settings, named as the paper's);
what this run used (top-k, passages shown, models and their sizes, data source, substitutions)
comes from the config through ``Study.run_settings``, so a caption cannot state settings the
run did not use. Models under ``TINY_B`` billion parameters are named as tiny stand-ins.
"""

from __future__ import annotations

TINY_B = 1.0  # below this many billion parameters a model is a laptop stand-in, not a paper model


_SIZES: dict[str, dict] = {}  # registry path -> {model: params_b}: read once per process (every caption asks)


def model_sizes(config: dict, names) -> dict[str, float | None]:
    """Billions of parameters per model name (None: not in the registry or undisclosed)."""
    from convrag.schema import config_registry

    key = str(config["models_registry"])
    if key not in _SIZES:
        _SIZES[key] = {n: spec.params_b for n, spec in config_registry(config).items()}
    sizes = _SIZES[key]
    return {n: sizes.get(n) for n in names}


def tiny_models(config: dict, names) -> list[str]:
    """The models among ``names`` smaller than TINY_B billion parameters."""
    return [n for n, b in model_sizes(config, names).items() if b is not None and b < TINY_B]


def _is_model_key(key: str) -> bool:
    return key.endswith(("model", "models", "_reader", "readers", "judges", "labeller")) or key in ("panel", "auditor")


def _value(v) -> str | None:
    if v is None or v == [] or v == "" or isinstance(v, dict):
        return None
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def run_models(settings: dict) -> list[str]:
    """The model names a study's run settings give (keys ending in model, reader, judges ...),
    in order, each once."""
    models = []
    for key, v in settings.items():
        if _is_model_key(key) and _value(v) is not None:
            models += [str(m) for m in (v if isinstance(v, (list, tuple)) else [v]) if m is not None]
    return list(dict.fromkeys(models))


def run_tiny_models(settings: dict, config: dict) -> dict[str, float]:
    """The run's models under TINY_B billion parameters, with their size: the stand-ins whose
    numbers every figure of the study says it comes from (convrag.report.figures.stand_in_warning)."""
    sizes = model_sizes(config, run_models(settings))
    return {m: sizes[m] for m in tiny_models(config, sizes)}


def run_note(settings: dict, config: dict) -> str:
    """``This run: k: v; ... Substitutions: ...`` from a study's run settings (label -> value;
    lists joined, empty values and nested dicts left out). Models are given with their size;
    tiny models and generated data are named as substitutions."""
    parts, generated = [], []
    for key, v in settings.items():
        text = _value(v)
        if text is None:
            continue
        parts.append(f"{key.replace('_', ' ')}: {text}")
        vals = v if isinstance(v, (list, tuple)) else [v]
        generated += [str(d) for d in vals if isinstance(d, str) and d.startswith("generated:")]
    if not parts:
        return ""
    models = run_models(settings)
    sizes = model_sizes(config, models)
    sized = [f"{m} {sizes[m]:g}B" for m in models if sizes.get(m) is not None]
    note = "This run: " + "; ".join(parts) + "."
    if sized:
        note += f" Model sizes (billions of parameters): {', '.join(sized)}."
    subs = []
    tiny = tiny_models(config, models)
    if tiny:
        one = len(tiny) == 1
        subs.append(f"{', '.join(tiny)} (under {TINY_B:g}B parameters) {'stands' if one else 'stand'} in for the "
                    f"paper's models, so {'its' if one else 'their'} numbers show that the pipeline runs, not the "
                    f"paper's effects")
    generated = list(dict.fromkeys(generated))
    if generated:
        subs.append(f"{', '.join(g.removeprefix('generated:') for g in generated)} "
                    f"{'is' if len(generated) == 1 else 'are'} generated data standing in for the paper's benchmarks")
    if subs:
        note += " Substitutions: " + "; ".join(subs) + "."
    return note
