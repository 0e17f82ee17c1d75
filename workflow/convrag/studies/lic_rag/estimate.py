"""lic_rag's side of ``convrag estimate``: measure a run's accounting, plan the target config's
jobs, and hand back ``convrag.cost.Work`` (the generic cost model adds it up; docs/scaling.md).

Measured run (``measured["results"]``, its config ``measured["config"]``): each simulate job
file (``paths.job_accounting``) gives per cell its conversations and what they asked of the
assistant and the user simulator, and per job the totals of the retriever's LLM, the classifier
and the judge. Pooled over jobs as ratios of sums:

- assistant, user simulator: per conversation of each cell key (condition, policy, open/closed);
- retriever LLM: per conversation of each cell, per retriever kind: the kind's tokens per
  assistant request (one retrieval per turn) x its own assistant requests per conversation;
- classifier: per labelled assistant turn (every turn of a written file: a RECAP file repeats
  its SHARDED twin's turns); judge: per conversation;
- sharding per question; knowledge graph and LLM index builds (RAPTOR) per passage.

Cold cache: a role's backend calls and tokens are its asked-for figures times the job's
``unique_requests / requests``: duplicates inside a job are answered once, as in any run, but
answers an earlier run left in the cache count as work.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from convrag.retrieval import retriever_kind, retriever_llm
from convrag.cost import SCENARIOS, Tokens, Work, WorkList, reply_delta
from convrag.errors import ConfigError, DataError
from convrag.layout import Layout
from convrag.retrieval import capabilities
from convrag.studies.lic_rag import paths
from convrag.studies.lic_rag.plan import CONDITIONS, job_settings, role_model, simulate_jobs

KEY = paths.KEY
CELL_ROLES = ("assistant", "user_simulator")


@dataclass
class Pool:
    """Measured tokens and the units of work they cover (conversations, turns, passages ...)."""

    units: float = 0.0
    tokens: Tokens = field(default_factory=Tokens)

    def add(self, units: float, tokens: Tokens) -> None:
        self.units += units
        self.tokens.add(tokens)

    def per_unit(self) -> Tokens | None:
        return self.tokens.scaled(1.0 / self.units) if self.units else None


@dataclass
class Measured:
    """What a measured run gives, pooled over its jobs (see the module doc)."""

    top_k: int  # passages the measured run showed per assistant call
    cells: dict = field(default_factory=dict)  # (condition, policy, open|closed) -> {role: Pool}
    retriever: dict = field(default_factory=lambda: defaultdict(Pool))  # kind -> per assistant request
    turns: dict = field(default_factory=lambda: defaultdict(Pool))  # (kind, cond, policy) -> assistant requests
    build: dict = field(default_factory=lambda: defaultdict(Pool))  # kind -> per passage
    classifier: Pool = field(default_factory=Pool)
    judge: Pool = field(default_factory=Pool)
    sharding: Pool = field(default_factory=Pool)
    graph: Pool = field(default_factory=Pool)
    jobs: int = 0
    warm: int = 0
    notes: list = field(default_factory=list)


def _read_json(path, what: str = "accounting"):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read {what}: {e}") from e


def _count_lines(path) -> int:
    with open(path, encoding="utf-8") as fh:
        return sum(1 for line in fh if line.strip())


def _note(notes: list, msg: str) -> None:
    if msg not in notes:
        notes.append(msg)


def _tokens(path, key: str, d, share: float | None = None) -> Tokens:
    """One role's asked-for counters with cold-cache backend figures: times ``share`` (the
    job's distinct / asked requests of that role), by default its own. Errors name the key."""
    if not isinstance(d, dict):
        raise DataError(f"{path}: key '{key}' is missing or not a mapping")
    for f in ("requests", "prompt_tokens", "completion_tokens") + (() if share is not None else ("unique_requests",)):
        if not isinstance(d.get(f), (int, float)):
            raise DataError(f"{path}: key '{key + '.' if key else ''}{f}' is missing or not a number")
    if share is None:
        share = d["unique_requests"] / d["requests"] if d["requests"] else 1.0
    r, p, c = float(d["requests"]), float(d["prompt_tokens"]), float(d["completion_tokens"])
    return Tokens(r, r * share, p, c, p * share, c * share)


def _add_job(m: Measured, path: Path, kind: str) -> None:
    """Add one simulate job's accounting file to the pools (errors name the file and key)."""
    acc = _read_json(path)
    if not isinstance(acc, dict) or not isinstance(acc.get("cells"), dict) or not acc["cells"]:
        raise DataError(f"{path}: key 'cells' is missing or empty (not a simulate job accounting file)")
    roles = [r for r in ("assistant", "user_simulator", "classifier", "judge", "retriever") if r in acc]
    if "assistant" not in roles:
        raise DataError(f"{path}: key 'assistant' is missing")
    share = {}
    for r in roles:
        t = _tokens(path, r, acc[r])
        share[r] = t.calls / t.requests if t.requests else 1.0
    m.jobs += 1
    m.warm += any(acc[r].get("cache_hits") for r in roles)
    requests, conversations = {}, 0
    for name, c in acc["cells"].items():
        cond, _, pol = name.partition("_")
        if cond not in CONDITIONS or not pol:
            raise DataError(f"{path}: key 'cells.{name}': not <CONDITION>_<policy> ({', '.join(CONDITIONS)})")
        n = c.get("conversations") if isinstance(c, dict) else None
        if not isinstance(n, int):
            raise DataError(f"{path}: key 'cells.{name}.conversations' is missing or not an integer")
        key = (cond, pol, "closed" if capabilities(kind).closed_book else "open")
        pools = m.cells.setdefault(key, {r: Pool() for r in CELL_ROLES})
        for role in CELL_ROLES:
            if role in c and role not in share:
                raise DataError(f"{path}: key 'cells.{name}.{role}': the job has no '{role}' accounting")
            t = _tokens(path, f"cells.{name}.{role}", c.get(role), share[role]) \
                if role in c or role == "assistant" else Tokens()
            pools[role].add(n, t)
            if role == "assistant":
                requests[(cond, pol)] = t.requests
                m.turns[(kind, cond, pol)].add(n, Tokens(requests=t.requests))
        conversations += n
    labelled = sum(requests.values()) + sum(requests.get(("SHARDED", p), 0.0) for c, p in requests if c == "RECAP")
    for role, pool, units in (("classifier", m.classifier, labelled), ("judge", m.judge, conversations)):
        if role in acc:
            pool.add(units, _tokens(path, role, acc[role], share[role]))
    if capabilities(kind).llm_at_query and "retriever" in acc:
        m.retriever[kind].add(sum(requests.values()), _tokens(path, "retriever", acc["retriever"], share["retriever"]))


def measure(results, config: dict) -> Measured:
    """Read what a run under ``results`` measured, finding its files from its ``config``."""
    if KEY not in config.get("studies", []):
        raise ConfigError(f"estimate: the measured run's config does not run {KEY}")
    L, lic = Layout(str(results)), config[KEY]
    m, missing = Measured(top_k=lic["top_k"]), 0
    for job in simulate_jobs(config):
        path = Path(paths.job_accounting(L, job["dataset"], job["model"], job["retriever"], job["chunk"]))
        if not path.exists():
            missing += 1
            continue
        _add_job(m, path, retriever_kind(config, job["retriever"]))
    if not m.jobs:
        raise DataError(f"{L.study(KEY)}: none of the measured config's {missing} simulate jobs has an accounting "
                        "file (run it first, or pass --measured / --measured-config)")
    if missing:
        m.notes.append(f"measured on {m.jobs} of the measured config's {m.jobs + missing} simulate jobs (the run is "
                       "incomplete)")
    if m.warm:
        m.notes.append(f"{m.warm} measured job(s) found answers in the LLM cache: their backend work is re-estimated "
                       "for a cold cache")
    for d in lic["datasets"]:
        acc = Path(paths.shards(L, d, "accounting.json"))
        if acc.exists():
            if not Path(L.questions(d)).exists():
                raise DataError(f"{acc}: {L.questions(d)} (the questions it sharded) is missing")
            m.sharding.add(_count_lines(L.questions(d)), _tokens(acc, "", _read_json(acc)))
    corpora = dict.fromkeys(config["datasets"][d]["corpus"] for d in lic["datasets"])
    for c in corpora:
        acc = Path(L.graph_accounting(c))
        if acc.exists():
            man = _read_json(L.graph_manifest(c), "manifest")
            if not isinstance(man.get("n_docs"), int):
                raise DataError(f"{L.graph_manifest(c)}: key 'n_docs' is missing or not an integer")
            m.graph.add(man["n_docs"], _tokens(acc, "", _read_json(acc)))
        for r in lic["retrievers"]:
            kind, man_path = retriever_kind(config, r), Path(L.index_manifest(c, r))
            if capabilities(kind).llm_at_build and man_path.exists():
                man = _read_json(man_path, "manifest")
                b = man.get("build") if isinstance(man.get("build"), dict) else {}
                for k, v in (("n_docs", man.get("n_docs")), ("build.llm_calls", b.get("llm_calls"))):
                    if not isinstance(v, int):
                        raise DataError(f"{man_path}: key '{k}' is missing or not an integer")
                # the build record counts every call, cached or not (the method's cost): all backend work
                n, p, q = b["llm_calls"], float(b.get("prompt_tokens", 0)), float(b.get("completion_tokens", 0))
                m.build[kind].add(man["n_docs"], Tokens(n, n, p, q, p, q))
    return m


def _lookup(m: Measured, key: tuple, notes: list) -> dict:
    """The measured pools of a cell key, else the nearest of the same condition (noted)."""
    cond, pol, ret = key
    for alt in [key] + [(cond, p, o) for o in (ret, "open", "closed") for p in ("history", "current", "none")]:
        if alt in m.cells:
            if alt != key:
                _note(notes, f"cell {'/'.join(key)} was not measured: using {'/'.join(alt)}")
            return m.cells[alt]
    raise ConfigError(f"estimate: condition {cond} was not measured (measured cells: "
                      f"{', '.join(sorted('/'.join(k) for k in m.cells))})")


def _profile(m: Measured, key: tuple, lic: dict, passage_delta: float, notes: list) -> dict:
    """Per-conversation tokens of a cell in each scenario. Replies of another length change
    every later prompt that holds them: the k-th assistant call of a conversation holds k-1
    earlier replies, the j-th user-simulator call j, the RECAP call its SHARDED twin's, and a
    classifier call the reply it labels (from mean calls per conversation: their spread over
    conversations, and longer user messages in later prompts, are not modelled)."""
    pools = _lookup(m, key, notes)
    a, u = pools["assistant"].per_unit(), pools["user_simulator"].per_unit()
    r, s = a.requests, u.requests
    twin = _lookup(m, ("SHARDED",) + key[1:], notes)["assistant"].per_unit() if key[0] == "RECAP" else None
    cls, judge = m.classifier.per_unit(), m.judge.per_unit()
    out = {}
    for sc in SCENARIOS:
        da = reply_delta(a, lic["assistant"]["max_tokens"], sc)
        # growth of the earlier replies each conversation's assistant prompts hold, and of the
        # replies the classifier labels (a RECAP file repeats its twin's turns)
        held = da * r * (r - 1) / 2 if twin is None else \
            reply_delta(twin, lic["assistant"]["max_tokens"], sc) * twin.requests
        labelled = da * r + (0.0 if twin is None else held)
        prof = {"requests": r,
                "assistant": a.grown(held + passage_delta * r, da * r),
                "user_simulator": u.grown(da * s * (s + 1) / 2,
                                          reply_delta(u, lic["user_simulator"]["max_tokens"], sc) * s)}
        if cls is not None:
            c = cls.scaled(r + (0.0 if twin is None else twin.requests))
            prof["classifier"] = c.grown(labelled * cls.requests,
                                         reply_delta(c, lic["classifier"]["max_tokens"], sc) * c.requests)
        if judge is not None:
            prof["judge"] = judge.grown(0.0, reply_delta(judge, lic["judge"]["max_tokens"], sc) * judge.requests)
        out[sc] = prof
    return out


def _retriever(m: Measured, kind: str, notes: list) -> Tokens | None:
    """A kind's LLM work per assistant request, else that of the measured kinds of its cost class."""
    if kind in m.retriever:
        return m.retriever[kind].per_unit()
    cls = capabilities(kind).cost_class
    same = [k for k in m.retriever if capabilities(k).cost_class == cls]
    msg = f"retriever kind {kind} was not measured: "
    if not same:
        _note(notes, msg + f"its query-time LLM work is left out (no measured kind of cost class {cls})")
        return None
    pool = Pool()
    for k in same:
        pool.add(m.retriever[k].units, m.retriever[k].tokens)
    _note(notes, msg + f"using the pooled {cls} kinds ({', '.join(sorted(same))})")
    return pool.per_unit()


def _passage_delta(m: Measured, lic: dict, passage_tokens: float | None, notes: list) -> tuple[float, str]:
    """Prompt tokens to add to every open-retrieval assistant call: the target's top_k passages
    minus the measured passage block (per-call prompt of an open single-turn cell minus its
    closed-book twin, over the measured top_k; the few-shot passages and headers count in)."""
    for cond in ("FULL", "CONCAT"):
        o, c = m.cells.get((cond, "none", "open")), m.cells.get((cond, "none", "closed"))
        if o and c and o["assistant"].tokens.requests and c["assistant"].tokens.requests:
            block = (o["assistant"].tokens.prompt_tokens / o["assistant"].tokens.requests
                     - c["assistant"].tokens.prompt_tokens / c["assistant"].tokens.requests)
            per = block / m.top_k
            target = per if passage_tokens is None else float(passage_tokens)
            delta = lic["top_k"] * target - block
            return delta, (f"top_k {lic['top_k']} x {target:.0f} tokens (measured {m.top_k} x {per:.0f}): "
                           f"{delta:+.0f} prompt tokens per open-retrieval assistant call")
    notes.append("passage length not measurable (no FULL or CONCAT cell with and without retrieval): retrieval "
                 "prompts kept as measured")
    return 0.0, "as measured"


def estimate(config: dict, measured: dict, throughput=None) -> WorkList:
    """``Study.estimate`` of lic_rag: the Work of every simulate, shard, knowledge-graph and
    LLM index-build job of ``config``. ``measured``: ``results`` (folder), ``config`` (the
    measured run's, validated: ``convrag estimate`` loads it), ``passage_tokens`` (target passage length).
    ``throughput`` is not needed here: time is the generic model's (``cost.summarize``)."""
    mcfg = measured["config"]
    m = measure(measured.get("results", "results"), mcfg)
    lic, L = config[KEY], Layout(config["results_dir"])
    out = WorkList(notes=m.notes)
    notes = out.notes
    delta, passages = _passage_delta(m, lic, measured.get("passage_tokens"), notes)
    for role, pool in (("classifier", m.classifier), ("judge", m.judge)):
        if not pool.units:
            notes.append(f"no measured job has a '{role}' accounting: its calls are left out")
    profiles: dict[tuple, dict] = {}
    user, cls_model, judge_model = (role_model(lic, r) for r in ("user_simulator", "classifier", "judge"))
    jobs, conversations = simulate_jobs(config), 0
    for job in jobs:
        d, model, r = job["dataset"], job["model"], job["retriever"]
        kind = retriever_kind(config, r)
        caps = capabilities(kind)
        questions = min(lic["chunk_size"], config["datasets"][d]["n_questions"] - job["chunk"] * lic["chunk_size"])
        n = questions * lic["runs"]
        r_llm = retriever_llm(config, r) if caps.llm_at_query else None
        r_per = _retriever(m, kind, notes) if r_llm else None
        cells = [tuple(c) for c in job["cells"]]
        twins = [("SHARDED", p) for c, p in cells if c == "RECAP" and ("SHARDED", p) not in cells]
        if twins:
            _note(notes, "a RECAP cell without its SHARDED twin: the twin is simulated (charged) but not written")
        work = defaultdict(Tokens)
        # the model's own answer cap (assistant_by_model) grows its replies and every prompt holding them
        lic_m = {**lic, "assistant": job_settings(lic, model)["assistant"]}
        for cond, pol in cells + twins:
            key = (cond, pol, "closed" if caps.closed_book else "open")
            pkey = key + (lic_m["assistant"]["max_tokens"],)
            if pkey not in profiles:
                profiles[pkey] = _profile(m, key, lic_m, 0.0 if caps.closed_book else delta, notes)
            written = (cond, pol) in cells
            conversations += n if written else 0
            for sc, p in profiles[pkey].items():
                work[(model, "assistant", sc)].add(p["assistant"], n)
                if p["user_simulator"].requests:
                    work[(user, "user_simulator", sc)].add(p["user_simulator"], n)
                if r_per is not None:  # per request x the kind's own requests per conversation of the cell
                    turns = m.turns[(kind, cond, pol)].per_unit() if (kind, cond, pol) in m.turns else None
                    work[(r_llm, "retriever", sc)].add(r_per, n * (p["requests"] if turns is None else turns.requests))
                for role, rm in (("classifier", cls_model), ("judge", judge_model)):
                    if written and role in p:
                        work[(rm, role, sc)].add(p[role], n)
        job_id = f"{d}/{model}/{r}/chunk{job['chunk']}"
        out += [Work(KEY, "simulate", job_id, mm, role, sc, t, questions, f"{d}/{model}/{r}")
                for (mm, role, sc), t in work.items()]

    def one_time(kind, job, model, role, per: Tokens | None, units: float, cap: float | None, what: str):
        if per is None:
            notes.append(f"{what}: no measured accounting: its LLM work is left out")
            return
        for sc in SCENARIOS:
            t = per.scaled(units)
            if cap is not None:
                t = t.grown(0.0, reply_delta(per, cap, sc) * t.requests)
            out.append(Work(KEY, kind, job, model, role, sc, t))

    for d in lic["datasets"]:
        one_time("shard", f"shards/{d}", lic["sharding"]["model"], "sharding", m.sharding.per_unit(),
                 config["datasets"][d]["n_questions"], lic["sharding"]["max_tokens"], f"sharding of {d}")
    kinds = {r: retriever_kind(config, r) for r in lic["retrievers"]}
    for c in dict.fromkeys(config["datasets"][d]["corpus"] for d in lic["datasets"]):
        builds = [(None, "graph")] if any(capabilities(k).needs_graph for k in kinds.values()) else []
        builds += [(r, "index") for r, k in kinds.items() if capabilities(k).llm_at_build]
        if builds and not Path(L.corpus(c)).exists():
            notes.append(f"corpus {c}: {L.corpus(c)} is not prepared (its passage count is unknown): its "
                         "knowledge-graph and LLM index builds are left out")
            continue
        n = _count_lines(L.corpus(c)) if builds else 0
        for r, kind in builds:
            if r is None:
                one_time("graph", f"graphs/{c}", config["knowledge_graph"]["model"], "knowledge_graph",
                         m.graph.per_unit(), n, config["knowledge_graph"]["max_tokens"], f"knowledge graph of {c}")
            else:  # summaries keep their measured lengths (their budget is a retriever param)
                one_time("index", f"indexes/{c}/{r}", retriever_llm(config, r), "index_build",
                         m.build[kinds[r]].per_unit() if kinds[r] in m.build else None, n, None, f"index {r} of {c}")
    out.chunk_keys["simulate"] = ("lic_rag_simulate", "lic_rag.chunk_size", "units")
    n_q = sum(config["datasets"][d]["n_questions"] for d in lic["datasets"])
    out.facts.update({
        "grid": f"{len(lic['datasets'])} datasets ({n_q:,} questions) x {len(lic['models'])} models x "
                f"{len(lic['retrievers'])} retrievers, {lic['runs']} runs: {len(jobs):,} simulate jobs, "
                f"{conversations:,} conversations (every question assumed to pass sharding)",
        "units": f"questions per simulate job (lic_rag.chunk_size, now {lic['chunk_size']})",
        "measured": f"{m.jobs} simulate job files; per-unit pools: classifier {m.classifier.units:.0f} turns, judge "
                    f"{m.judge.units:.0f} conversations, sharding {m.sharding.units:.0f} questions, graph "
                    f"{m.graph.units:.0f} passages",
        "passages": passages})
    return out
