"""The SLURM layout of every paper config (issue 47, item 1): `convrag estimate` of each
config/studies/*.yaml, measured on the default run's results/, kept whole under
benchmarks/slurm_tables/<config>.txt, and one summary table: each config's fullest job in the
'long' scenario (every reply at its max_tokens) against the time limit.

    python benchmarks/slurm_tables.py [--measured results] [--out benchmarks/slurm_tables]

Exits 1 when a config's estimate fails (a job over its limit: the estimate names the rule, its
minutes, the limit and the config key to change) or when a job takes more than half its limit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def estimate(config: Path, measured: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convrag.cli", "estimate", "--config", str(config), "--measured",
                           measured, *extra], cwd=REPO, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--measured", default="results", help="the measured run's results folder (default results)")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "slurm_tables"))
    p.add_argument("--job-minutes", type=float, default=240.0)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, bad = [], []
    for cfg in sorted((REPO / "config" / "studies").glob("*.yaml")):
        text = estimate(cfg, a.measured, "--job-minutes", f"{a.job_minutes:g}")
        (out / f"{cfg.stem}.txt").write_text(f"$ convrag estimate --config config/studies/{cfg.name} --measured "
                                             f"{a.measured} --job-minutes {a.job_minutes:g}\n"
                                             f"(exit {text.returncode})\n\n{text.stdout}{text.stderr}",
                                             encoding="utf-8")
        js = estimate(cfg, a.measured, "--job-minutes", f"{a.job_minutes:g}", "--json")
        if js.returncode != 0:
            bad.append(f"{cfg.name}: estimate exit {js.returncode}: {js.stderr.strip()[-1500:]}")
            rows.append((cfg.stem, "-", "-", "-", "-", f"FAILS (exit {js.returncode})"))
            continue
        s = json.loads(js.stdout)
        timed = [r for r in s["layout"]["rows"] if r["max_minutes"]["long"] is not None]
        if not timed:
            rows.append((cfg.stem, sum(r["jobs"] for r in s["layout"]["rows"]), "-", "no local GPU job", "-", "ok"))
            continue
        top = max(timed, key=lambda r: r["max_minutes"]["long"])
        share = top["max_minutes"]["long"] / a.job_minutes
        if share > 0.5:
            bad.append(f"{cfg.name}: {top['study']} {top['kind']} on {top['models']}: "
                       f"{top['max_minutes']['long']:.1f} of {a.job_minutes:g} minutes ({share:.0%})")
        rows.append((cfg.stem, sum(r["jobs"] for r in s["layout"]["rows"]),
                     f"{top['study']} {top['kind']} ({top['models']}, {top['jobs']:,} jobs)",
                     f"{top['max_minutes']['long']:.1f}", f"{share:.0%}", "ok" if share <= 0.5 else "OVER HALF"))
    lines = ["# SLURM layout of every paper config ('long' scenario)", "",
             f"`python benchmarks/slurm_tables.py --measured {a.measured}`: `convrag estimate` of each "
             f"config/studies/*.yaml against a {a.job_minutes:g}-minute limit (every GPU rule's runtime: "
             "workflow/rules/common.smk model_job, cross.smk's scoring; profiles/slurm only raises lic_rag's "
             "simulate rules to 480/720). The whole report of each config is in <config>.txt beside this file.", "",
             "| config | jobs sized | fullest job (long) | minutes (long) | of the limit | |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {' | '.join(str(c) for c in r)} |" for r in rows]
    if bad:
        lines += ["", "Problems:"] + [f"- {b}" for b in bad]
    (out / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
