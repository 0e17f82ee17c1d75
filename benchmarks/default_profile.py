"""Where a workflow run spends its time: per study, job and model role, from the run's own
records (Snakemake's job metadata in ``.snakemake/metadata`` for start/end times, inputs and
outputs; the ``*.accounting.json`` files every model-calling job writes).

Prints, as Markdown:
  1. per study: jobs, job-seconds, share of all job-seconds;
  2. per study and rule: jobs and their wall seconds (row "(job)"), then per model role: backend
     seconds, prompt tokens requested
     and actually computed (prefix reuse skips the rest), completion tokens, prefill and
     decode tokens per second;
  3. the run's critical path (the longest chain of dependent jobs, by wall time), against
     the makespan and the job-seconds divided by the cores.

    python benchmarks/default_profile.py --directory . --cores 2
    # keep it for the README (benchmarks/readme_figures.py): the wall time as `time` measured it
    python benchmarks/default_profile.py --directory . --cores 2 --wall-clock 16:51 \
        --save benchmarks/profiles/default_2026-12-05 --host "2-core VM, quiet" --note "fresh clone"
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import io
import json
import re
import sys
from collections import defaultdict
from pathlib import Path


def load_jobs(workdir: Path) -> list[dict]:
    """One record per job: rule, outputs, inputs, start, end (from the metadata of its outputs)."""
    meta = workdir / ".snakemake" / "metadata"
    if not meta.is_dir():
        raise SystemExit(f"{meta}: no Snakemake metadata (run the workflow in --directory first)")
    jobs: dict[tuple, dict] = {}
    for f in meta.iterdir():
        try:
            out = base64.b64decode(f.name.replace("@", "/")).decode()
            rec = json.loads(f.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise SystemExit(f"{f}: unreadable Snakemake metadata record: {e}") from e
        if rec.get("incomplete") or rec.get("starttime") is None or rec.get("endtime") is None:
            continue
        # one job = one (rule, job hash, end time): the outputs of a job share its end time, while
        # their recorded start times differ by microseconds
        key = (rec["rule"], rec.get("job_hash"), rec["endtime"])
        job = jobs.setdefault(key, {"rule": rec["rule"], "outputs": [], "inputs": set(rec.get("input") or []),
                                    "start": rec["starttime"], "end": rec["endtime"]})
        job["start"] = min(job["start"], rec["starttime"])
        job["outputs"].append(out)
    return sorted(jobs.values(), key=lambda j: j["start"])


def study_of(job: dict) -> str:
    """results/<study>/... names the study; corpora, indexes, graphs and datasets are shared."""
    for out in job["outputs"]:
        parts = Path(out).parts
        if len(parts) > 2 and parts[0] == "results" and parts[1] not in (
                "corpora", "indexes", "graphs", "datasets", "benchmarks", "cache"):
            return parts[1]
    return "shared"


def roles(workdir: Path, job: dict) -> dict[str, dict]:
    """Engine accounting per model role from the job's ``*accounting.json`` outputs."""
    out: dict[str, dict] = {}
    for o in job["outputs"]:
        if not o.endswith("accounting.json") or not (workdir / o).exists():
            continue
        rec = json.loads((workdir / o).read_text())
        if "backend_seconds" in rec:
            out[rec.get("model", "model")] = rec
        else:
            out.update({k: v for k, v in rec.items() if isinstance(v, dict) and "backend_seconds" in v})
    return out


def critical_path(jobs: list[dict]) -> tuple[float, list[dict]]:
    """Longest chain of dependent jobs by wall time (a job depends on the jobs making its inputs)."""
    producer = {o: i for i, j in enumerate(jobs) for o in j["outputs"]}
    best: list[tuple[float, int | None]] = []
    for i, j in enumerate(jobs):  # sorted by start: producers come first
        deps = {producer[x] for x in j["inputs"] if x in producer and producer[x] < i}
        prev = max(deps, key=lambda d: best[d][0], default=None)
        best.append(((best[prev][0] if prev is not None else 0.0) + j["end"] - j["start"], prev))
    if not best:
        return 0.0, []
    i = max(range(len(jobs)), key=lambda k: best[k][0])
    total, chain = best[i][0], []
    while i is not None:
        chain.append(jobs[i])
        i = best[i][1]
    return total, chain[::-1]


def profile(wd: Path, cores: int) -> dict | None:
    """Print the profile (Markdown); return its summary (what the README's generated section
    shows), or None when no job finished."""
    jobs = load_jobs(wd)
    if not jobs:
        print("no finished jobs recorded")
        return None
    total = sum(j["end"] - j["start"] for j in jobs)
    makespan = max(j["end"] for j in jobs) - min(j["start"] for j in jobs)

    by_study: dict[str, list] = defaultdict(list)
    for j in jobs:
        by_study[study_of(j)].append(j)
        j["roles"] = roles(wd, j)  # each job's accounting files read once
    # "outside the model": the job's wall time minus its backend time (process start, imports,
    # model loading, retrieval, scoring, writing)
    print("| study | jobs | job-seconds | share | in the model s | outside the model s | prompt tok computed "
          "| completion tok |\n|---|---|---|---|---|---|---|---|")
    for s, js in sorted(by_study.items(), key=lambda kv: -sum(j["end"] - j["start"] for j in kv[1])):
        secs = sum(j["end"] - j["start"] for j in js)
        accs = [a for j in js for a in j["roles"].values()]
        inside = sum(a.get("backend_seconds", 0.0) for a in accs)
        computed = sum(a.get("backend_computed_prompt_tokens", a.get("backend_prompt_tokens", 0)) for a in accs)
        completion = sum(a.get("backend_completion_tokens", 0) for a in accs)
        print(f"| {s} | {len(js)} | {secs:.0f} | {secs / total:.0%} | {inside:.0f} | {secs - inside:.0f} "
              f"| {computed} | {completion} |")

    print("\n| study | rule | role | jobs | wall s | backend s | prompt tok requested | computed | completion tok "
          "| prefill tok/s | decode tok/s |\n|---|---|---|---|---|---|---|---|---|---|---|")
    rows: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    for j in jobs:
        acc = j["roles"]
        r = rows[(study_of(j), j["rule"], "(job)")]  # the job's own wall time, once per job
        r["jobs"] += 1
        r["wall"] += j["end"] - j["start"]
        for role, a in acc.items():  # model time per role: a job's roles share its wall time
            r = rows[(study_of(j), j["rule"], role)]
            r["jobs"] += 1
            r["backend"] += a.get("backend_seconds", 0.0)
            r["prefill"] += a.get("backend_prefill_seconds", 0.0)
            r["requested"] += a.get("backend_prompt_tokens", 0)
            r["computed"] += a.get("backend_computed_prompt_tokens", a.get("backend_prompt_tokens", 0))
            r["completion"] += a.get("backend_completion_tokens", 0)
    rule_wall = {(s, rule): r["wall"] for (s, rule, role), r in rows.items() if role == "(job)"}
    order = sorted(rows.items(), key=lambda kv: (-rule_wall[kv[0][:2]], kv[0][2] != "(job)", -kv[1]["backend"]))
    for (s, rule, role), r in order:
        pre = f"{r['computed'] / r['prefill']:.0f}" if r["prefill"] > 0 else "-"
        dec_s = r["backend"] - r["prefill"]
        dec = f"{r['completion'] / dec_s:.0f}" if r["prefill"] > 0 and dec_s > 0 else "-"
        wall = f"{r['wall']:.0f}" if role == "(job)" else "-"
        print(f"| {s} | {rule} | {role} | {r['jobs']:.0f} | {wall} | {r['backend']:.0f} | {r['requested']:.0f} "
              f"| {r['computed']:.0f} | {r['completion']:.0f} | {pre} | {dec} |")

    length, chain = critical_path(jobs)
    print(f"\nmakespan {makespan:.0f} s; job-seconds {total:.0f} s (/{cores} cores = {total / cores:.0f} s); "
          f"critical path {length:.0f} s:")
    for j in chain:
        print(f"- {j['rule']} ({study_of(j)}): {j['end'] - j['start']:.0f} s, {j['outputs'][0]}")
    return {"jobs": len(jobs), "cores": cores, "makespan_s": round(makespan, 1), "job_seconds": round(total, 1),
            "critical_path_s": round(length, 1), "critical_path": [j["rule"] for j in chain],
            "studies": {s: {"jobs": len(js), "job_seconds": round(sum(j["end"] - j["start"] for j in js), 1)}
                        for s, js in sorted(by_study.items())}}


def wall_seconds(text: str) -> float:
    """``1011``, ``16:51``, ``1:02:05`` or ``16 min 51 s`` as seconds."""
    t = text.strip()
    m = re.fullmatch(r"(?:(\d+)\s*h\s*)?(?:(\d+)\s*min\s*)?(?:(\d+(?:\.\d+)?)\s*s)?", t)
    if t and m and any(m.groups()):
        h, mi, s = m.groups()
        return int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)
    try:
        parts = [float(x) for x in t.split(":")]
    except ValueError:
        raise SystemExit(f"--wall-clock {text!r}: give seconds, M:SS, H:MM:SS or '16 min 51 s'") from None
    return sum(x * 60 ** i for i, x in enumerate(reversed(parts)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--directory", default=".", help="the workflow's working directory")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--save", default=None, metavar="STEM",
                    help="also write STEM.md (this profile) and STEM.json (its summary, which "
                         "benchmarks/readme_figures.py puts into the README), e.g. benchmarks/profiles/default_2026-12-05")
    ap.add_argument("--wall-clock", default=None,
                    help="the run's measured wall time (e.g. `time snakemake --cores 2`: 16:51 or 1011), with --save")
    ap.add_argument("--date", default=None, help="the run's date (default: the last job's end, UTC)")
    ap.add_argument("--host", default="", help="where it ran, e.g. '2-core VM, quiet'")
    ap.add_argument("--config", default="embedded default", help="what ran (default: the embedded default)")
    ap.add_argument("--note", default="", help="one line of context (fresh clone, other work on the host...)")
    args = ap.parse_args()
    wd = Path(args.directory)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        summary = profile(wd, args.cores)
    print(buf.getvalue(), end="")
    if summary is None:
        return 1
    if args.save:
        ends = [j["end"] for j in load_jobs(wd)]
        date = args.date or datetime.datetime.fromtimestamp(max(ends), datetime.timezone.utc).strftime("%Y-%m-%d")
        summary = {"date": date, "config": args.config, "host": args.host, "note": args.note,
                   "wall_clock_s": wall_seconds(args.wall_clock) if args.wall_clock else None,
                   "profile": Path(args.save).name + ".md", **summary}
        Path(args.save + ".md").write_text(buf.getvalue())
        Path(args.save + ".json").write_text(json.dumps(summary, indent=2) + "\n")
        print(f"wrote {args.save}.md and {args.save}.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
