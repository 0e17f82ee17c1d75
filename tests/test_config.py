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
    # 5 datasets x 10 models x 9 retrieval settings x 3 chunks of 50 questions
    assert len(jobs) == 5 * 10 * 9 * 3
    # cells: closed book 5 conditions; the 8 others FULL, CONCAT + 3 multi-turn x 2 policies
    assert len(simulate_cells(cfg)) == 5 * 10 * 3 * (5 + 8 * 8)
