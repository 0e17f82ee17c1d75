"""The built-in corpus loaders (registered on import)."""

from __future__ import annotations

from convrag.data import register_corpus_loader
from convrag.errors import ConfigError


@register_corpus_loader("miniworld")
def _miniworld(name: str, spec: dict, files: dict):
    from convrag.data.miniworld import generate_world

    return generate_world({**(spec.get("spec") or {}), "name": name}, spec.get("seed", 13))


@register_corpus_loader("hipporag")
def _hipporag(name: str, spec: dict, files: dict):
    from convrag.data.empty_passages import EmptyPassages
    from convrag.data.hipporag import load_hipporag

    empty = EmptyPassages(spec.get("empty_passages"), f"corpora.{name}.empty_passages")
    questions, passages = load_hipporag(files["questions"], files["corpus"], name, format=spec["format"], empty=empty)
    return questions, passages, empty.report()


# ---- benchmarks of conversation turns --------------------------------------------------

from convrag.data.benchmarks import BenchmarkLoader, register_benchmark_loader  # noqa: E402


@register_benchmark_loader("miniworld_mtrag")
class MiniworldMtrag(BenchmarkLoader):
    """The mini world rendered as an MTRAG-UN-like benchmark (convrag.data.miniworld_turns):
    ``domains: {<name>: {seed, spec, conversations}}``, each domain its own world."""

    def check(self, name, spec, source):
        if not isinstance(spec.get("domains"), dict) or not spec["domains"]:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.domains': a mapping of domain name "
                              "-> {seed, spec, conversations}")
        for d, v in spec["domains"].items():
            unknown = set(v or {}) - {"seed", "spec", "conversations"}
            if unknown:
                raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.domains.{d}.{sorted(unknown)[0]}': "
                                  "unknown key (known: seed, spec, conversations)")

    def tasks(self, name, spec, files):
        from collections import Counter

        from convrag.data.miniworld_turns import render_mtrag

        tasks, _ = render_mtrag(spec["domains"], name)
        report = {"tasks": len(tasks), "conversations": len({t.conversation_id for t in tasks}),
                  **{f"{k}": dict(Counter(str(t.labels[k]) for t in tasks))
                     for k in ("answerability", "multi_turn", "standalone", "domain")}}
        return tasks, report

    def corpus(self, name, spec, domain, files):
        from convrag.data.miniworld_turns import render_mtrag

        _, passages = render_mtrag({domain: spec["domains"][domain]}, name)
        return passages


@register_benchmark_loader("miniworld_recor")
class MiniworldRecor(BenchmarkLoader):
    """The mini world rendered as a RECOR-like benchmark with incomplete qrels by construction
    (convrag.data.miniworld_recor): ``domains: {<name>: {seed, spec, dialogues, turns}}``, each
    domain its own world; ``spec`` holds the world sizes and the plant shares."""

    def check(self, name, spec, source):
        from convrag.data.miniworld_recor import check_domain

        unknown = sorted(set(spec) - {"kind", "domains"})
        if unknown:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.{unknown[0]}': unknown key "
                              "(known: kind, domains)")
        if not isinstance(spec.get("domains"), dict) or not spec["domains"]:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.domains': a mapping of domain name "
                              "-> {seed, spec, dialogues, turns}")
        for d, v in spec["domains"].items():
            try:
                check_domain(d, v)
            except ConfigError as e:
                key = ".".join(x for x in (f"benchmarks.{name}.domains.{d}", getattr(e, "key", "")) if x)
                raise ConfigError(f"{source}: invalid config key '{key}': {getattr(e, 'why', e)}") from None

    def tasks(self, name, spec, files):
        from convrag.data.miniworld_recor import render_recor

        tasks, _, report = render_recor(spec["domains"], name)
        return tasks, report

    def corpus(self, name, spec, domain, files):
        from convrag.data.miniworld_recor import render_recor

        _, passages, _ = render_recor({domain: spec["domains"][domain]}, name)
        return passages


@register_benchmark_loader("mtrag_un")
class MtragUn(BenchmarkLoader):
    """IBM's MTRAG-UN (convrag.data.mtrag): the generation tasks (one representative turn per
    conversation), per-domain BEIR qrels and the MTRAG passage-level corpora, downloaded from
    the repository at ``revision`` (sha256 pinned where the files could be checked; the
    download records every file's sha256 beside it). ``files`` overrides any raw file with
    ``{local: path}`` or ``{url, sha256}`` (e.g. the real-data samples for tests)."""

    REPO = "IBM/mt-rag-benchmark"  # checksums of its files per commit: resources/sources.yaml
    DOMAINS = ("clapnq", "cloud", "fiqa", "govt")

    KEYS = ("kind", "domains", "revision", "files", "empty_passages")
    EMPTY_PASSAGES = True
    FILES_WHY = ""  # what check_files_given adds about the raw files (MtragConversations says more)

    def check(self, name, spec, source):
        unknown = set(spec) - set(self.KEYS)
        if unknown:
            raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.{sorted(unknown)[0]}': unknown key "
                              f"(known: {', '.join(self.KEYS)})")
        for i, d in enumerate(self.domains(spec)):
            if d not in self.DOMAINS:
                raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.domains[{i}]': unknown domain "
                                  f"'{d}' (released: {', '.join(self.DOMAINS)})")
        self.check_files_given(name, spec, source, self.REPO, self.FILES_WHY)

    def domains(self, spec):
        return list(spec.get("domains", self.DOMAINS))

    def raw_names(self, spec):
        return ["reference.jsonl", *(f"qrels_{d}.tsv" for d in self.domains(spec)),
                *(f"corpus_{d}.jsonl.zip" for d in self.domains(spec))]

    WHERE = {"reference.jsonl": "mtragun-human/generation_tasks/reference.jsonl",
             **{f"qrels_{d}.tsv": f"mtragun-human/retrieval_tasks/qrels/{d}.tsv" for d in DOMAINS},
             **{f"corpus_{d}.jsonl.zip": f"corpora/passage_level/{d}.jsonl.zip" for d in DOMAINS}}

    def raw_files(self, spec):
        from convrag.sources import github_file

        out = {n: github_file(self.REPO, spec.get("revision", ""), self.WHERE[n]) for n in self.raw_names(spec)}
        out.update(spec.get("files", {}))
        return out

    def task_inputs(self, spec):
        return ["reference.jsonl", *(f"qrels_{d}.tsv" for d in self.domains(spec))]

    def corpus_inputs(self, spec, domain):
        return [f"corpus_{domain}.jsonl.zip"]

    def tasks(self, name, spec, files):
        from convrag.data.mtrag import attach_qrels, load_generation_tasks

        tasks, report = load_generation_tasks(files["reference.jsonl"], name, variant="mtrag_un")
        tasks, qreport = attach_qrels(tasks, {d: files[f"qrels_{d}.tsv"] for d in self.domains(spec)})
        return tasks, {**report, "qrels": qreport}

    def corpus(self, name, spec, domain, files):
        return self.corpus_with_counts(name, spec, domain, files)[0]

    def corpus_with_counts(self, name, spec, domain, files):
        from convrag.data.mtrag import benchmark_passages

        return benchmark_passages(files[f"corpus_{domain}.jsonl.zip"], domain, name, spec)


@register_benchmark_loader("mtrag_conversations")
class MtragConversations(MtragUn):
    """IBM's MTRAG (the earlier benchmark): one task per user turn of its 110 annotated
    conversations (``load_conversations``: history, the agent's reply as the reference answer,
    the passages the annotators judged relevant as qrels and reference contexts, the
    enrichments as labels), with the same passage-level corpora. Its conversations carry the
    CONVERSATIONAL class instead of UNDERSPECIFIED. ``files`` as for ``mtrag_un``; a corpus
    may be a ``.jsonl`` or ``.jsonl.zip`` (the real-data sample ships JSONL)."""

    # conversations.json has no conversation ids: they come from the retrieval tasks' questions
    # files of the selected domains (convrag.data.mtrag.conversation_ids_from_queries: a
    # conversation takes its id from its own domain's file only, so the other domains' files are
    # not needed), or from a conversation_index_to_id.tsv given under `files` (a file of a fork;
    # IBM ships none)
    FILES_WHY = ("; <domain>_questions.jsonl (one per domain in 'domains') gives the conversations of "
                 "conversations.json their ids, which that file lacks (or give a conversation_index_to_id.tsv "
                 "instead)")
    WHERE = {"conversations.json": "mtrag-human/conversations/conversations.json",
             **{f"{d}_questions.jsonl": f"mtrag-human/retrieval_tasks/{d}/{d}_questions.jsonl" for d in MtragUn.DOMAINS},
             **{f"corpus_{d}.jsonl.zip": f"corpora/passage_level/{d}.jsonl.zip" for d in MtragUn.DOMAINS}}

    def raw_names(self, spec):
        ids = (["conversation_index_to_id.tsv"] if "conversation_index_to_id.tsv" in spec.get("files", {})
               else [f"{d}_questions.jsonl" for d in self.domains(spec)])
        return ["conversations.json", *ids, *(f"corpus_{d}.jsonl.zip" for d in self.domains(spec))]

    def raw_files(self, spec):
        from convrag.sources import github_file

        out = {n: github_file(self.REPO, spec.get("revision", ""), self.WHERE[n])
               for n in self.raw_names(spec) if n in self.WHERE}
        out.update(spec.get("files", {}))
        return out

    def task_inputs(self, spec):
        return [n for n in self.raw_names(spec) if not n.startswith("corpus_")]

    def tasks(self, name, spec, files):
        from convrag.data.mtrag import load_conversations

        qs = {d: files[f"{d}_questions.jsonl"] for d in self.domains(spec) if f"{d}_questions.jsonl" in files}
        return load_conversations(files["conversations.json"], files.get("conversation_index_to_id.tsv"),
                                  benchmark=name, questions=qs or None, domains=self.domains(spec))
