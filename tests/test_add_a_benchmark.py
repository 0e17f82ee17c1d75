"""Adding a benchmark kind is one module: a loader written into a temporary folder (named in the
config's ``benchmark_plugins``) reads its own two files, the shared rules turn them into tasks and
a corpus, and mtrag_un's Table 2 is built over it through Snakemake; no file of the repository
changes (docs/adding_a_benchmark.md)."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from convrag.config import validate_config
from convrag.errors import ConfigError
from plugin_run import git_status, plan_and_build

KIND = '''
"""FAQ chats: conversations of questions, each with the passage that answers it (a benchmark
kind written by a test). Config: ``{kind: faq_chats, conversations: <jsonl>, passages: <jsonl>}``;
one domain, ``faq``."""

from convrag.data.benchmarks import BenchmarkLoader, register_benchmark_loader
from convrag.errors import ConfigError
from convrag.io import iter_jsonl
from convrag.records import Passage, TurnTask

FILES = {"conversations": "conversations.jsonl", "passages": "passages.jsonl"}


@register_benchmark_loader("faq_chats")
class FaqChats(BenchmarkLoader):
    KEYS = ("kind", *FILES)

    def check(self, name, spec, source):
        self.check_keys(name, spec, source)
        for key in FILES:
            if not isinstance(spec.get(key), str):
                raise ConfigError(f"{source}: invalid config key 'benchmarks.{name}.{key}': a file path, required")

    def domains(self, spec):
        return ["faq"]

    def raw_files(self, spec):
        return {raw: {"local": spec[key]} for key, raw in FILES.items()}

    def task_inputs(self, spec):
        return [FILES["conversations"]]

    def corpus_inputs(self, spec, domain):
        return [FILES["passages"]]

    def tasks(self, name, spec, files):
        tasks = []
        for _, conv in iter_jsonl(files[FILES["conversations"]]):
            history = []
            for i, turn in enumerate(conv["turns"], 1):
                tasks.append(TurnTask(f"{conv['id']}<::>{i}", name, conv["id"], i, list(history), turn["question"],
                                      [turn["answer"]], {turn["gold"]: 1}, labels={"domain": "faq"}))
                history += [{"role": "user", "text": turn["question"]}, {"role": "assistant", "text": turn["answer"]}]
        return tasks, {"tasks": len(tasks), "conversations": len({t.conversation_id for t in tasks})}

    def corpus(self, name, spec, domain, files):
        return [Passage(p["id"], p["title"], p["text"]) for _, p in iter_jsonl(files[FILES["passages"]])]
'''

PASSAGES = [
    {"id": "p1", "title": "Sourdough", "text": "Sourdough bread rises with a starter of wild yeast and flour."},
    {"id": "p2", "title": "Espresso", "text": "Espresso is brewed by forcing hot water through finely ground coffee."},
    {"id": "p3", "title": "Kombucha", "text": "Kombucha is tea fermented by a culture of bacteria and yeast."},
]
CONVERSATIONS = [
    {"id": "c1", "turns": [{"question": "How does sourdough bread rise?", "answer": "With a starter.", "gold": "p1"},
                           {"question": "And how is espresso brewed?", "answer": "Hot water, ground coffee.",
                            "gold": "p2"}]},
    {"id": "c2", "turns": [{"question": "What ferments kombucha tea?", "answer": "Bacteria and yeast.",
                            "gold": "p3"}]},
]



def _write(tmp_path: Path) -> tuple[Path, dict]:
    home, data = tmp_path / "kinds", tmp_path / "data"
    home.mkdir()
    data.mkdir()
    (home / "faq_chats.py").write_text(KIND.lstrip())
    for name, rows in (("conversations", CONVERSATIONS), ("passages", PASSAGES)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"kind": "faq_chats", "conversations": str(data / "conversations.jsonl"),
            "passages": str(data / "passages.jsonl")}
    return home, spec


def _config(home: Path, spec: dict) -> dict:
    return {"studies": ["mtrag_un"], "benchmark_plugins": [str(home)], "warm_start": False,
            "benchmarks": {"faq": spec},
            "retrievers": {"bm25": {"kind": "bm25", "params": {"backend": "bm25s"}}},
            "mtrag_un": {"benchmark": "faq", "retrievers": ["bm25"], "policies": ["current"], "retrieval_k": 5,
                         "generation": {"models": []}}}


def test_a_plug_in_kind_checks_its_own_keys(tmp_path):
    home, spec = _write(tmp_path)
    assert validate_config(_config(home, spec))["benchmark_plugins"] == [str(home)]
    with pytest.raises(ConfigError, match=r"'benchmarks\.faq\.passage': unknown key \(known: kind, conversations, "
                                          r"passages\)"):
        validate_config(_config(home, {**spec, "passage": "x"}))
    with pytest.raises(ConfigError, match=r"'benchmarks\.faq\.kind': unknown benchmark kind 'faq_chat' "
                                          r"\(known: .*faq_chats\); did you mean 'faq_chats'"):
        validate_config(_config(home, {**spec, "kind": "faq_chat"}))


@pytest.mark.workflow
def test_a_benchmark_kind_in_a_temporary_folder_plans_and_builds_a_table(tmp_path):
    before = git_status()
    home, spec = _write(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(_config(home, spec)))
    table = "results/mtrag_un/tables/table2_retrieval.csv"
    planned = plan_and_build(tmp_path, table, unset_env="CONVRAG_BENCHMARK_PATH")  # the config alone names the folder
    assert {"benchmark_tasks", "benchmark_corpus", "build_index", "study_table"} <= planned, planned

    tasks = [json.loads(x) for x in (tmp_path / "results/benchmarks/faq/tasks.jsonl").read_text().splitlines()]
    assert [(t["task_id"], len(t["history"]), t["gold_docs"]) for t in tasks] == [
        ("c1<::>1", 0, {"p1": 1}), ("c1<::>2", 2, {"p2": 1}), ("c2<::>1", 0, {"p3": 1})]
    lines = (tmp_path / "results/corpora/faq.faq/corpus.jsonl").read_text().splitlines()
    assert [json.loads(x)["doc_id"] for x in lines] == ["p1", "p2", "p3"]
    # each question shares its words with its own passage only: BM25 ranks the gold first
    rows = pd.read_csv(tmp_path / table)
    assert sorted(rows.domain) == sorted(["faq", "macro", "all (weighted)"]) and set(rows.tasks) == {3}, rows
    assert (rows[["R@5", "R@10", "nDCG@5", "nDCG@10"]] == 1.0).all().all(), rows.to_string()
    assert git_status() == before  # no file of the repository was edited or added
