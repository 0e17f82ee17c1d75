"""convrag.registry: one registry class behind every named kind (retrievers, benchmarks, corpus
loaders, query policies, answer metrics, judges, studies)."""

import sys

import pytest

from convrag.errors import ConfigError
from convrag.registry import Registry, did_you_mean


def test_registered_and_lazy_entries_and_the_did_you_mean_error(tmp_path, monkeypatch):
    (tmp_path / "reg_probe_mod.py").write_text("LOADED = True\nTHING = 'the thing'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("widget", lazy={"probe": "reg_probe_mod:THING", "probe_module": "reg_probe_mod"})
    reg.register("spanner")(len)
    assert reg.names() == ["probe", "probe_module", "spanner"] and "probe" in reg and len(reg) == 3
    assert "reg_probe_mod" not in sys.modules  # listing a module does not import it
    assert reg.get("probe") == "the thing" and sys.modules["reg_probe_mod"].LOADED
    assert reg.get("probe_module") is sys.modules["reg_probe_mod"]
    assert reg["spanner"] is len
    with pytest.raises(ConfigError) as e:
        reg.get("spaner", where="config.yaml: invalid config key 'tools[0]'")
    assert str(e.value) == ("config.yaml: invalid config key 'tools[0]': unknown widget 'spaner' "
                            "(known: probe, probe_module, spanner); did you mean 'spanner'?")
    with pytest.raises(ConfigError, match=r"^unknown widget 'zzz' \(known: probe, probe_module, spanner\)$"):
        reg.get("zzz")  # nothing close: no suggestion
    with pytest.raises(ConfigError, match="widget 'spanner' is registered twice"):
        reg.add("spanner", max)
    reg.add("spanner", len)  # the same entry again is fine
    reg.remove("spanner")
    assert "spanner" not in reg
    sys.modules.pop("reg_probe_mod", None)


def test_a_check_rejects_what_is_not_an_entry():
    def check(name, entry):
        if not callable(entry):
            raise ConfigError(f"widget '{name}' is not callable")

    reg = Registry("widget", check=check)
    reg.add("ok", len)
    with pytest.raises(ConfigError, match="widget 'bad' is not callable"):
        reg.add("bad", 3)
    assert did_you_mean("bm52", ["bm25", "dense"]) == "; did you mean 'bm25'?"
    assert did_you_mean("colbert", ["bm25", "dense"]) == ""


@pytest.mark.parametrize("lookup, name, nearest", [
    ("convrag.retrieval:capabilities", "bm52", "bm25"),
    ("convrag.data.benchmarks:benchmark_loader", "mtrag_uhn", "mtrag_un"),
    ("convrag.data:corpus_loader", "minworld", "miniworld"),
    ("convrag.rag.policies:get_policy", "curent", "current"),
    ("convrag.metrics.registry:answer_metric", "f11", "f1"),
    ("convrag.studies:get_study", "lic_ragg", "lic_rag"),
])
def test_every_registry_names_the_nearest_known_name(lookup, name, nearest):
    import importlib

    module, _, fn = lookup.partition(":")
    with pytest.raises(ConfigError, match=rf"unknown .*'{name}' \(known: .*\); did you mean '{nearest}'\?"):
        getattr(importlib.import_module(module), fn)(name)


def test_judges_are_one_registry():
    import convrag.judges.content  # noqa: F401  (registers the shared content judge)
    from convrag.llm.judge import JUDGES

    assert isinstance(JUDGES, Registry) and JUDGES.get("worse_labels_content").unit == "turn"
    with pytest.raises(ConfigError, match="unknown judge 'worse_labels_contnt'.*did you mean 'worse_labels_content'"):
        JUDGES.get("worse_labels_contnt")
