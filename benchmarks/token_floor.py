"""A workflow run's job-seconds against its token floor (issue 47, item 4).

The token floor is the time the run's model work would take at this host's best rates: every
prompt token the backends computed at the prefill rate of one full, unpadded forward pass, and
every completion token at the decode rate of a 64-row batch:

    floor = computed prompt tokens / prefill rate + completion tokens / decode rate

Both rates are measured here (``--measure``) with the packaged SmolLM2-135M on one thread, as the
default's jobs run (config ``threads``), or given (``--prefill-rate``, ``--decode-rate``). The
ratio of a run's job-seconds to its floor says how much of the run is not token work: padding,
small decode batches, process start, retrieval, scoring. From the accounting files of a run
(``*accounting.json``, read as benchmarks/default_profile.py reads them) it also prints the share of
computed prompt positions that were left padding and the mean rows per decode step, where the
accounting has them (``backend_prefill_positions``, ``backend_decode_steps``/``_rows``).

    python benchmarks/token_floor.py --measure
    python benchmarks/token_floor.py --directory /path/to/run --prefill-rate 540 --decode-rate 201
    python benchmarks/token_floor.py --directory /path/to/run --measure
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from default_profile import load_jobs, roles  # noqa: E402  (a sibling script)


def measure(model: str = "smollm2-135m", threads: int = 1, rows: int = 64) -> tuple[float, float]:
    """(prefill tok/s, decode tok/s) on this host: the best of three unpadded passes of 4 x 512
    prompt tokens, and of three runs of 16 greedy steps over ``rows`` rows of 256-token prompts."""
    os.environ["CONVRAG_THREADS"] = str(threads)
    from convrag.config import REPO_ROOT
    from convrag.llm.backends.transformers_backend import TransformersBackend
    from convrag.llm.registry import get_spec, load_registry

    backend = TransformersBackend(get_spec(load_registry(REPO_ROOT / "config" / "models.yaml"), model))
    backend.set_prefix_reuse(False)
    torch = backend.torch
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    ids = backend.tok(text, add_special_tokens=False)["input_ids"]
    if len(ids) < 4 * 512 + rows * 256:
        raise SystemExit(f"README.md has {len(ids)} tokens: too few for the measurement")
    with torch.inference_mode():
        backend._prefill([ids[:64]])  # warm-up
        best_prefill = 0.0
        for _ in range(3):
            seqs = [ids[i * 512:(i + 1) * 512] for i in range(4)]
            t0 = time.perf_counter()
            backend._prefill(seqs)
            best_prefill = max(best_prefill, 4 * 512 / (time.perf_counter() - t0))
        best_decode = 0.0
        seqs = [ids[i * 256:(i + 1) * 256] for i in range(rows)]
        for _ in range(3):
            cache, mask, logits = backend._prefill(seqs, room=16)
            nxt = logits[:, -1, :].argmax(-1)
            t0 = time.perf_counter()
            for _ in range(16):
                mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype)], dim=1)
                logits = backend.model(input_ids=nxt.unsqueeze(1), attention_mask=mask,
                                       position_ids=mask.sum(-1, keepdim=True) - 1, use_cache=True,
                                       **{backend.cache_kw: cache}).logits
                nxt = logits[:, -1, :].argmax(-1)
            best_decode = max(best_decode, rows * 16 / (time.perf_counter() - t0))
    return best_prefill, best_decode


def run_totals(workdir: Path) -> dict:
    """Job-seconds (all jobs, and the jobs with model work) and the accounting totals of a run."""
    jobs = load_jobs(workdir)
    t = {"jobs": len(jobs), "job_seconds": 0.0, "model_jobs": 0, "model_job_seconds": 0.0, "backend_seconds": 0.0,
         "computed": 0, "completion": 0, "positions": 0, "positions_known": 0, "steps": 0, "rows": 0}
    for j in jobs:
        secs = j["end"] - j["start"]
        t["job_seconds"] += secs
        accs = [a for a in roles(workdir, j).values() if a.get("backend_seconds", 0) > 0]
        if accs:
            t["model_jobs"] += 1
            t["model_job_seconds"] += secs
        for a in accs:
            t["backend_seconds"] += a["backend_seconds"]
            computed = a.get("backend_computed_prompt_tokens", a.get("backend_prompt_tokens", 0))
            t["computed"] += computed
            t["completion"] += a.get("backend_completion_tokens", 0)
            if "backend_prefill_positions" in a:
                t["positions"] += a["backend_prefill_positions"]
                t["positions_known"] += computed
            t["steps"] += a.get("backend_decode_steps", 0)
            t["rows"] += a.get("backend_decode_rows", 0)
    return t


def report(t: dict, prefill: float, decode: float) -> str:
    floor = t["computed"] / prefill + t["completion"] / decode
    lines = [
        f"rates: prefill {prefill:.0f} tok/s, decode {decode:.0f} tok/s (64 rows)",
        f"tokens: {t['computed']:,} prompt tokens computed, {t['completion']:,} completion tokens",
        f"token floor: {floor:.0f} s",
        f"job-seconds: {t['job_seconds']:.0f} ({t['jobs']} jobs) = {t['job_seconds'] / floor:.2f}x the floor",
        f"job-seconds of the {t['model_jobs']} jobs with model work: {t['model_job_seconds']:.0f} "
        f"= {t['model_job_seconds'] / floor:.2f}x",
        f"backend seconds: {t['backend_seconds']:.0f} = {t['backend_seconds'] / floor:.2f}x",
    ]
    if t["positions"]:
        pad = t["positions"] - t["positions_known"]
        lines.append(f"left padding: {pad:,} of {t['positions']:,} computed prompt positions "
                     f"({pad / t['positions']:.1%})")
    if t["steps"]:
        lines.append(f"decode: {t['steps']:,} steps, {t['rows'] / t['steps']:.1f} rows per step")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--directory", type=Path, help="a workflow run's working directory")
    ap.add_argument("--measure", action="store_true", help="measure this host's prefill and decode rates")
    ap.add_argument("--prefill-rate", type=float, help="prompt tokens per second (instead of --measure)")
    ap.add_argument("--decode-rate", type=float, help="completion tokens per second at 64 rows (instead of --measure)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for --measure (the default's jobs: 1)")
    args = ap.parse_args()
    prefill, decode = args.prefill_rate, args.decode_rate
    if args.measure:
        prefill, decode = measure(threads=args.threads)
        print(f"measured on {args.threads} thread(s): prefill {prefill:.0f} tok/s, decode {decode:.0f} tok/s")
    if args.directory is None:
        return 0
    if not (prefill and decode):
        ap.error("--directory needs --measure or both --prefill-rate and --decode-rate")
    print(report(run_totals(args.directory), prefill, decode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
