"""`convrag list`: what the repository can run, read from the study registry and the configs
(never a hand-kept list): every study with its targets, and for every config the studies it
activates and which of their targets it builds."""

from __future__ import annotations

from pathlib import Path

from convrag.config import REPO_ROOT, load_config
from convrag.layout import layout
from convrag.studies import active_studies, all_studies


def default_configs() -> list[Path]:
    """The embedded default and the paper / sample configs."""
    return [REPO_ROOT / "config" / "config.yaml", *sorted((REPO_ROOT / "config" / "studies").glob("*.yaml"))]


def _shown(path: Path) -> str:
    p = path.resolve()
    return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else str(path)


def catalogue(configs: list[Path] | None = None) -> dict:
    """``{"studies": {key: {title, cli, targets: {name: kind}}}, "configs": {path: {study:
    [built target names]}}}``; a config's plug-in studies are listed too."""
    configs = default_configs() if configs is None else configs
    built: dict[str, dict[str, list[str]]] = {}
    plugins: list[str] = []
    for path in configs:
        config = load_config(path)
        plugins += list(config.get("study_plugins", ()))
        lay = layout(config)
        built[_shown(path)] = {s.key: s.built_targets(config, lay) for s in active_studies(config)}
    studies = {key: {"title": s.title, "cli": f"convrag {s.cli_name}",
                     "targets": {name: t.kind for name, t in s.all_targets().items()}}
               for key, s in sorted(all_studies(plugins).items())}
    return {"studies": studies, "configs": built}


def format_catalogue(cat: dict) -> str:
    lines = [f"{len(cat['studies'])} studies (targets: results/<study>/tables|figures/<name>):"]
    for key, s in cat["studies"].items():
        lines += ["", f"{key}: {s['title']}", f"  stages: {s['cli']} --help"]
        in_configs = {path: set(by_study[key]) for path, by_study in cat["configs"].items() if key in by_study}
        lines.append(f"  in configs: {', '.join(in_configs) or 'none of those listed'}")
        width = max(map(len, s["targets"]), default=0)
        for name, kind in s["targets"].items():
            skipped = [p for p, names in in_configs.items() if name not in names]
            note = f"  (not built by {', '.join(skipped)})" if skipped else ""
            lines.append(f"  {name:<{width}}  {kind}{note}")
    lines += ["", f"{len(cat['configs'])} configs:"]
    for path, by_study in cat["configs"].items():
        parts = [f"{k} ({len(v)} of {len(cat['studies'][k]['targets'])} targets)" for k, v in by_study.items()]
        lines.append(f"  {path}: {', '.join(parts)}")
    return "\n".join(lines)
