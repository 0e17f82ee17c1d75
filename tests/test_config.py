import copy

import pytest
import yaml

from convrag.config import REPO_ROOT, load_config, validate_config
from convrag.studies.lic_rag.plan import cells, simulate_cells, simulate_jobs
from convrag.errors import ConfigError

DEFAULT = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
REGISTRY = {"smollm2-135m": {}, "other-model": {}}


def _cfg():
    return copy.deepcopy(DEFAULT)


def test_default_config_validates_and_fills_defaults():
    cfg = validate_config(_cfg(), registry=REGISTRY)
    assert cfg["lic_rag"]["bootstrap"] == {"n_resamples": 1000, "seed": 0}
    assert cfg["datasets"]["miniworld"]["hops"] == []  # default filled in
    assert cfg["retrievers"]["closed_book"]["params"] == {}


def test_unknown_key_is_rejected_with_its_name():
    cfg = _cfg()
    cfg["lic_rag"]["chunksize"] = 10
    with pytest.raises(ConfigError, match=r"'lic_rag\.chunksize'.*unknown key"):
        validate_config(cfg, registry=REGISTRY)


def test_wrong_type_is_rejected_with_its_name():
    cfg = _cfg()
    cfg["lic_rag"]["runs"] = "five"
    with pytest.raises(ConfigError, match=r"'lic_rag\.runs'"):
        validate_config(cfg, registry=REGISTRY)


def test_unknown_model_retriever_dataset_names():
    cfg = _cfg()
    cfg["lic_rag"]["models"] = ["smollm2-135m", "gpt-9"]
    with pytest.raises(ConfigError, match=r"'lic_rag\.models\[1\]'.*unknown name 'gpt-9'"):
        validate_config(cfg, registry=REGISTRY)
    cfg = _cfg()
    cfg["lic_rag"]["retrievers"] = ["bm25", "colbert"]
    with pytest.raises(ConfigError, match=r"'lic_rag\.retrievers\[1\]'.*'colbert'"):
        validate_config(cfg, registry=REGISTRY)
    cfg = _cfg()
    cfg["lic_rag"]["datasets"] = ["nq"]
    with pytest.raises(ConfigError, match=r"'lic_rag\.datasets\[0\]'.*'nq'"):
        validate_config(cfg, registry=REGISTRY)
    cfg = _cfg()
    cfg["retrievers"]["bm25"]["kind"] = "splade"
    with pytest.raises(ConfigError, match=r"'retrievers\.bm25\.kind'"):
        validate_config(cfg, registry=REGISTRY)


def test_config_file_with_a_typo_names_file_and_key(tmp_path):
    cfg = _cfg()
    cfg["lic_rag"]["polices"] = ["history"]
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*'lic_rag\.polices'"):
        load_config(p, registry=REGISTRY)


def test_grid_cells_and_jobs():
    cfg = validate_config(_cfg(), registry=REGISTRY)
    assert cells(cfg["lic_rag"]) == [("FULL", "none"), ("CONCAT", "none"), ("SHARDED", "history"), ("SHARDED", "current"),
                          ("RECAP", "history"), ("RECAP", "current"), ("SNOWBALL", "history"), ("SNOWBALL", "current")]
    assert cells(cfg["lic_rag"], closed=True) == [("FULL", "none"), ("CONCAT", "none"), ("SHARDED", "none"),
                                       ("RECAP", "none"), ("SNOWBALL", "none")]
    jobs = simulate_jobs(cfg)
    # one job per retriever (one chunk of 4 questions): all of its cells in lockstep
    assert len(jobs) == len(cfg["lic_rag"]["retrievers"]) == 6
    by = {j["retriever"]: j for j in jobs}
    assert len(by["closed_book"]["cells"]) == 5 and len(by["bm25"]["cells"]) == 8
    assert len(simulate_cells(cfg)) == 5 + 5 * 8


def test_recall_k_below_top_k_and_unknown_role_models():
    cfg = _cfg()
    cfg["lic_rag"]["recall_k"] = cfg["lic_rag"]["top_k"] - 1
    with pytest.raises(ConfigError, match=r"'lic_rag\.recall_k'.*below top_k"):
        validate_config(cfg, registry=REGISTRY)
    for key in ("classifier", "judge"):
        cfg = _cfg()
        cfg["lic_rag"][key] = {"model": "gpt-9"}
        with pytest.raises(ConfigError, match=rf"'lic_rag\.{key}\.model'.*unknown name 'gpt-9'"):
            validate_config(cfg, registry=REGISTRY)
    cfg = _cfg()
    cfg["retrievers"]["hipporag"]["params"] = {"llm": "gpt-9"}
    with pytest.raises(ConfigError, match=r"'retrievers\.hipporag\.params\.llm'"):
        validate_config(cfg, registry=REGISTRY)
    cfg = _cfg()
    cfg["lic_rag"]["sharding"]["reviews"] = {"nope": "r.yaml"}
    with pytest.raises(ConfigError, match=r"'lic_rag\.sharding\.reviews\.nope'"):
        validate_config(cfg, registry=REGISTRY)


def test_study_config_validates_against_the_real_registry():
    cfg = load_config(REPO_ROOT / "config" / "studies" / "lic_rag.yaml")
    assert len(cfg["lic_rag"]["models"]) == 10
    assert {d["n_questions"] for d in cfg["datasets"].values()} == {150}
    jobs = simulate_jobs(cfg)
    # 5 datasets x 4 chunks of at most 38 questions (lic_rag.chunk_size, sized by `convrag estimate`:
    # issue 47) x (8 retrieval settings x 10 LLMs + PoG x its 8 open-weight LLMs)
    assert len(jobs) == 5 * 4 * (8 * 10 + 8)
    # cells: closed book 5 conditions; the 8 others FULL, CONCAT + 3 multi-turn x 2 policies
    assert len(simulate_cells(cfg)) == 5 * 4 * (10 * (5 + 7 * 8) + 8 * 8)


# ---- what a config file means (Snakefile: the embedded default applies only without --configfile)


def _dry_run(*args, cwd=REPO_ROOT):
    import subprocess
    import sys
    from pathlib import Path

    env = {**__import__("os").environ, "PATH": f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO_ROOT / "Snakefile"),
                           "--directory", str(cwd), *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def _job_counts(out: str) -> dict[str, int]:
    import re

    table = out[out.index("Job stats:"):]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def test_a_derived_config_plans_only_what_it_names(tmp_path):
    """A config derived from the worse_labels paper config with two BM25 rungs and no MTRAG slice
    plans those two rungs' retrieval jobs only: nothing of the embedded default (its fusion,
    dense and hybrid rungs, its mini_mtrag slice, its other studies) is merged in."""
    import re

    cfg = yaml.safe_load((REPO_ROOT / "config" / "studies" / "worse_labels.yaml").read_text())
    wl = cfg["worse_labels"]
    wl["slices"] = {"recor": {"benchmark": "recor_dev",
                              "ladder": {k: wl["slices"]["recor"]["ladder"][k] for k in ("bm25_turn", "bm25_hist")}}}
    wl["replication"] = None
    cfg["results_dir"] = str(tmp_path / "out")
    (tmp_path / "two_rungs.yaml").write_text(yaml.safe_dump(cfg))
    out = _dry_run("--configfile", str(tmp_path / "two_rungs.yaml"), cwd=tmp_path)
    jobs = _job_counts(out)
    assert jobs["worse_labels_retrieve"] == 2 * 11  # two rungs x RECOR's 11 domains
    assert not {"worse_labels_expand", "worse_labels_fit", "worse_labels_fuse", "lic_rag_simulate", "mtrag_un_retrieve",
                "coral_retrieve", "cross_answer"} & set(jobs), jobs
    assert set(re.findall(r"/runs/recor/\w+/(\w+)/", out)) == {"bm25_turn", "bm25_hist"}
    assert "mini_mtrag" not in out and "mini_recor" not in out and "/runs/mtrag/" not in out
    # every output, log and Snakemake benchmark file under the config's results_dir
    logs = re.findall(r"^\s+log: (\S+)", out, re.MULTILINE)
    assert logs and all(p.startswith(str(tmp_path / "out") + "/logs/") for p in logs), logs[:3]


def test_config_values_on_the_command_line_are_typed():
    from convrag.config import apply_overrides, typed_overrides

    # what Snakemake's parser gives for --config "lic_rag={runs: 1, top_k: 2.5, x: null}" flag=true name=yes
    cli = {"lic_rag": {"runs": "1", "top_k": "2.5", "x": "null", "policies": ["history"]}, "flag": "true",
           "name": "yes", "warm_start": False}
    assert typed_overrides(cli) == {"lic_rag": {"runs": 1, "top_k": 2.5, "x": None, "policies": ["history"]},
                                    "flag": True, "name": "yes", "warm_start": False}
    cfg = {"lic_rag": {"runs": "1", "models": ["m"]}}
    assert apply_overrides(cfg, {"lic_rag": {"runs": "1"}}) == {"lic_rag": {"runs": 1, "models": ["m"]}}
    out = _dry_run("--config", "lic_rag={runs: 1}", "--quiet", "rules")
    assert "lic_rag_simulate" in out


def test_paper_and_sample_configs_write_under_their_own_results_dir():
    dirs = {}
    for p in sorted((REPO_ROOT / "config").glob("*/*.yaml")):
        d = yaml.safe_load(p.read_text()).get("results_dir")
        assert d and d.rstrip("/") != "results", f"{p}: results_dir must be its own folder, not the default's"
        assert d not in dirs, f"{p} and {dirs.get(d)} share results_dir {d}"
        dirs[d] = p


def test_a_retriever_can_run_with_some_of_the_models_only():
    """§B.2: PoG runs with the paper's eight open-weight LLMs, not the two API models; the paper
    config says so (lic_rag.retriever_models) and the plan follows it."""
    from convrag.studies.lic_rag.plan import simulate_jobs

    cfg = load_config(REPO_ROOT / "config" / "studies" / "lic_rag.yaml")
    jobs = simulate_jobs(cfg)
    pog = {j["model"] for j in jobs if j["retriever"] == "pog"}
    assert pog == set(cfg["lic_rag"]["models"]) - {"luna-5.6", "gpt-4o-mini"} and len(pog) == 8
    assert {j["model"] for j in jobs if j["retriever"] == "bm25"} == set(cfg["lic_rag"]["models"])
    assert len(jobs) == 5 * 4 * (8 * 10 + 8)  # datasets x chunks (of 38) x (8 retrievers x 10 LLMs + PoG x 8)
    bad = copy.deepcopy(cfg)
    bad["lic_rag"]["retriever_models"] = {"pog": ["gpt-9"]}
    with pytest.raises(ConfigError, match=r"'lic_rag\.retriever_models\.pog\[0\]'.*unknown name 'gpt-9'"):
        validate_config(bad)


def test_the_paper_config_pools_the_papers_complete_coverage_pairs():
    """§B.4's 225,000 eligible pairs = 750 questions x 5 runs x 10 LLMs x 6 retrievers: the paper
    config names those six (not RAPTOR, not PoG), and Table 9 / Figure 9 pool only them."""
    import pandas as pd

    from convrag.studies.lic_rag.targets import _coverage_cells

    cfg = load_config(REPO_ROOT / "config" / "studies" / "lic_rag.yaml")
    lic = cfg["lic_rag"]
    questions = sum(cfg["datasets"][d]["n_questions"] for d in lic["datasets"])
    keep = lic["analysis"]["coverage_retrievers"]
    assert questions * lic["runs"] * len(lic["models"]) * len(keep) == 225_000
    assert not {"raptor", "pog", "closed_book"} & set(keep)
    s = pd.DataFrame({"retriever": ["bm25", "raptor", "pog", "dense"]})
    assert _coverage_cells(s, {"analysis": lic["analysis"]}).retriever.tolist() == ["bm25", "dense"]
    assert len(_coverage_cells(s, {"analysis": {"coverage_retrievers": None}})) == 4
