"""The paper's construction, step 1 (no model): pages -> title trees -> conversation flows.

Every sampler draws from its own seeded generator (``seed``, sampler index), so adding
conversations of one sampler never changes another's. Pages are tried in a seeded order,
each at most once per sampler (the paper's samplers also never reuse a page; across samplers
the small generated world reuses pages, which the paper's 8,000 pages did not need). A page
that cannot hold the drawn turn count, or (DTRW) has no related page, is skipped and counted;
a sampler that runs out of pages builds fewer conversations than asked, and the report says
how many (the embedded world has a few dozen pages).
"""

from __future__ import annotations

import numpy as np

from convrag.studies.coral.pages import (SAMPLERS, FlowTooShortError, NoRelatedTreeError, RootTitleIndex, TitleTree,
                                      draw_turn_range, parse_html_page, sample_flow)


def read_trees(pages: list[dict]) -> dict[str, TitleTree]:
    """Title trees of the rendered pages (``{page_id, html, ...}`` records), by page id."""
    return {p["page_id"]: parse_html_page(p["html"], p["page_id"]) for p in pages}


def sample_flows(trees: dict[str, TitleTree], samplers: dict[str, int], turns: dict[str, list[int]] | None = None,
                 long_share: float = 0.2, seed: int = 0) -> tuple[list[dict], dict]:
    """(flow records, report): ``samplers[kind]`` conversations of each kind. A flow record:
    ``conversation_id`` (``<kind>-<i>``), ``flow`` (upper-case sampler), ``node_ids``, ``page_ids``,
    ``second_page_id`` (DTRW), ``turn_range`` (the drawn [min, max])."""
    turns = turns or {}
    ordered = list(trees.values())
    index = RootTitleIndex(ordered)
    flows: list[dict] = []
    report: dict = {"pages": len(trees), "samplers": {}}
    for k, kind in enumerate(SAMPLERS):
        want = int(samplers.get(kind, 0))
        rng = np.random.default_rng([seed, k])
        order = rng.permutation(len(ordered))
        made, skipped = 0, {"too_short": 0, "no_related_page": 0}
        for i in order:
            if made >= want:
                break
            tree = ordered[int(i)]
            rng_turns = tuple(turns[kind]) if kind in turns else draw_turn_range(kind, rng, long_share)
            try:
                f = sample_flow(kind, tree, rng, rng_turns, others=index)
            except FlowTooShortError:
                skipped["too_short"] += 1
                continue
            except NoRelatedTreeError:
                skipped["no_related_page"] += 1
                continue
            flows.append({"conversation_id": f"{kind}-{made}", "flow": kind.upper(), "node_ids": list(f.node_ids),
                          "page_ids": list(f.page_ids), "second_page_id": f.second_page_id,
                          "turn_range": list(rng_turns)})
            made += 1
        report["samplers"][kind] = {"requested": want, "built": made, "skipped": skipped,
                                    "turns": sum(len(x["node_ids"]) for x in flows if x["flow"] == kind.upper())}
    report["conversations"] = len(flows)
    report["shortfall"] = {k: v["requested"] - v["built"] for k, v in report["samplers"].items()
                           if v["built"] < v["requested"]}
    return flows, report
