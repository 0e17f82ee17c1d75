"""Gold and qrels integrity: every gold document id of a benchmark's turns is looked up in the
corpus its retrieval is scored on.

Why: a gold id that is not in the corpus can never be retrieved, so it lowers recall and nDCG
without any error; a partial or wrong corpus download turns a whole table into near-zeros. The
workflow checks each benchmark domain when its corpus is written (rule ``benchmark_corpus``):
a missing id fails the job, naming the benchmark, the domain, the first ids and their count,
unless the config says the corpus is a sample (``benchmarks.<name>.allow_missing_gold: true``);
then the ids are counted per domain (``results/benchmarks/<name>/gold/<domain>.json``) and
every retrieval table built on that domain says so in its caption (``caption_note``).
"""

from __future__ import annotations

from typing import Any, Iterable

from convrag.errors import DataError

SHOWN = 5  # missing ids named in an error or report


def check_gold(tasks: Iterable, passage_ids: Iterable[str], *, benchmark: str, domain: str,
               allow_missing: bool, corpus: str = "corpus") -> dict[str, Any]:
    """Look every gold doc id of ``tasks`` (TurnTasks of ``domain``) up in ``passage_ids``.

    Returns the counted report (gold ids and qrels rows checked, missing ones, turns left with no
    gold in the corpus). Missing ids raise a DataError unless ``allow_missing``."""
    known = set(passage_ids)
    tasks = [t for t in tasks if t.labels.get("domain") == domain]
    ids: dict[str, str] = {}  # gold doc id -> first task naming it
    rows = missing_rows = 0
    turns_all_missing = turns_some_missing = 0
    for t in tasks:
        gold = list(t.gold_docs)
        miss = [d for d in gold if d not in known]
        rows += len(gold)
        missing_rows += len(miss)
        turns_some_missing += bool(miss)
        turns_all_missing += bool(gold) and len(miss) == len(gold)
        for d in gold:
            ids.setdefault(d, t.task_id)
    missing = sorted(d for d in ids if d not in known)
    report = {
        "benchmark": benchmark, "domain": domain, "corpus": corpus, "passages": len(known),
        "turns": len(tasks), "turns_with_gold": sum(bool(t.gold_docs) for t in tasks),
        "gold_ids": len(ids), "qrels_rows": rows,
        "missing_ids": len(missing), "missing_rows": missing_rows,
        "turns_with_missing_gold": turns_some_missing, "turns_with_no_gold_in_corpus": turns_all_missing,
        "first_missing": [{"doc_id": d, "task_id": ids[d]} for d in missing[:SHOWN]],
        "allow_missing_gold": bool(allow_missing),
    }
    if missing and not allow_missing:
        first = ", ".join(f"'{d}' (task '{ids[d]}')" for d in missing[:SHOWN])
        raise DataError(
            f"benchmark '{benchmark}', domain '{domain}': {len(missing)} of {len(ids)} gold/qrels document ids are "
            f"not in its corpus ({corpus}, {len(known)} passages): {first}"
            f"{' ...' if len(missing) > SHOWN else ''}. A partial or wrong corpus download gives near-zero "
            f"retrieval scores; if the corpus is a sample, set benchmarks.{benchmark}.allow_missing_gold: true "
            "to count them instead")
    return report


def caption_note(reports: Iterable[dict]) -> str:
    """The caption sentences of a retrieval table: the gold ids missing from the corpus per
    benchmark domain, and the empty passages left out of it (``empty_passages: drop``; only
    where there are some: empty when every gold id is in its corpus and nothing was dropped)."""
    from convrag.data.empty_passages import caption_part

    reports = list(reports)
    parts = [f"{r['benchmark']} {r['domain']} {r['missing_ids']:,} of {r['gold_ids']:,} ids "
             f"({r['turns_with_no_gold_in_corpus']:,} of {r['turns_with_gold']:,} turns with no gold left)"
             for r in reports if r.get("missing_ids")]
    dropped = [d for d in map(caption_part, reports) if d]
    notes = []
    if parts:
        notes.append("Gold not in the corpus (allow_missing_gold: the corpus is a sample; a missing gold passage can "
                     "never be retrieved, so recall and nDCG are lower bounds): " + "; ".join(parts) + ".")
    if dropped:
        notes.append("Passages with empty text left out of the corpus (empty_passages: drop): " + "; ".join(dropped)
                     + ".")
    return " ".join(notes)


def gold_files(config: dict, layout, benchmark: str, domains: Iterable[str] | None = None) -> list[str]:
    """The gold-check reports of a benchmark's domain corpora (all its domains, or ``domains``):
    the ``gold`` artifact of a study whose retrieval tables are scored on that benchmark's qrels.
    A name that is not a benchmark (a multi-hop dataset) has none."""
    from convrag.data.benchmarks import benchmark_loader, corpus_id

    spec = config.get("benchmarks", {}).get(benchmark)
    if spec is None:
        return []
    ds = list(domains) if domains is not None else benchmark_loader(spec["kind"]).domains(spec)
    return [layout.corpus_gold(corpus_id(benchmark, d)) for d in ds]
