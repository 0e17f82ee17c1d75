"""Official prompts as data (convrag.judges.official): a scorer's prompt is read from its Python
source and mapped onto the project's placeholders. The sources here are written for the test in
the shape of IBM's scorer (an f-string built per row inside a function; a module-level Jinja
template with a JSON example); no official text is in the repository."""

from __future__ import annotations

import pytest
import yaml

from convrag.errors import ConfigError
from convrag.judges.official import OfficialPrompt, adapt, extract_template

SOURCE = '''
from jinja2 import Template

CHECK_PROMPT = """
    Decide if the reply asks back.
    Output {"decision": "yes/no"}
    Reply: {{ response }}
"""

def format_idk_judge(df):
    out = []
    for index, row in df.iterrows():
        inquiry, response = row['inquiry'], row['response']
        prompt_template = f"""Does it say it cannot answer? {{braces}} stay.
[Inquiry]
{inquiry}
[Response]
{response}
[Output]
"""
        out.append(prompt_template)
    return out

def format_conversation_radbench(df):
    for index, row in df.iterrows():
        document_txt = "\\n\\n".join(row['document'])
        formatted_conversation = f"""Rate it.
{row['previous_conversation']}|{row['current_question']}|{row['reference_answer']}|{row['response']}|{document_txt}
"""
'''


def test_fstring_in_a_function_becomes_our_template():
    spec = OfficialPrompt("f.py", "prompt_template", {"inquiry": "conversation", "response": "response"},
                          function="format_idk_judge")
    t = extract_template(SOURCE, spec)
    # the f-string's own doubled braces are literal braces: escaped again for str.format
    assert t.format(conversation="user: hi", response="no idea") == (
        "Does it say it cannot answer? {braces} stay.\n[Inquiry]\nuser: hi\n[Response]\nno idea\n[Output]\n")


def test_jinja_constant_keeps_its_json_braces():
    spec = OfficialPrompt("f.py", "CHECK_PROMPT", {"response": "response"})
    assert extract_template(SOURCE, spec).format(response="Which one?") == (
        '\n    Decide if the reply asks back.\n    Output {"decision": "yes/no"}\n    Reply: Which one?\n')


def test_row_expressions_map_to_placeholders():
    spec = OfficialPrompt("f.py", "formatted_conversation",
                          {"row['previous_conversation']": "previous", "row['current_question']": "question",
                           "row['reference_answer']": "reference", "row['response']": "response",
                           "document_txt": "documents"}, function="format_conversation_radbench")
    t = extract_template(SOURCE, spec)
    assert t.format(previous="p", question="q", reference="r", response="a", documents="d") == "Rate it.\np|q|r|a|d\n"


@pytest.mark.parametrize("spec, message", [
    (OfficialPrompt("f.py", "prompt_template", {"inquiry": "conversation"}, function="format_idk_judge"),
     r"field 'response' of 'prompt_template' has no placeholder"),
    (OfficialPrompt("f.py", "prompt_template", {"inquiry": "a", "response": "b", "x": "c"}, function="format_idk_judge"),
     r"no field for c"),
    (OfficialPrompt("f.py", "prompt_template", {}, function="nope"), r"no function 'nope'"),
    (OfficialPrompt("f.py", "MISSING", {}), r"no assignment to 'MISSING'"),
    (OfficialPrompt("f.py", "CHECK_PROMPT", {}), r"field 'response' of 'CHECK_PROMPT' has no placeholder"),
])
def test_a_field_the_map_does_not_name_fails_naming_it(spec, message):
    with pytest.raises(ConfigError, match=message):
        extract_template(SOURCE, spec, where="f.py")


def test_mtrag_judges_run_an_adapted_official_prompt(tmp_path):
    """The mtrag_un judges' official specs on files of the scorer's shape: one user message, no
    system, no examples; RB_llm shows an empty previous conversation as empty (as the scorer)."""
    from convrag.studies.mtrag_un.judges import OFFICIAL, idk_messages, rb_llm_messages

    src = tmp_path / "judge_utils.py"
    src.write_text(SOURCE)
    idk = adapt(src, OFFICIAL["idk"], source="test")
    assert idk["system"] == "" and idk["examples"] == [] and idk["official"]["function"] == "format_idk_judge"
    msgs = idk_messages(idk, {"conversation": "user: Who?", "response": "I cannot say."})
    assert [m["role"] for m in msgs] == ["user"] and "user: Who?\n[Response]\nI cannot say." in msgs[0]["content"]
    rb = adapt(src, OFFICIAL["rb_llm"])
    msgs = rb_llm_messages(rb, {"conversation": "user: Who?", "response": "A.", "reference": "B.", "documents": "D"})
    assert msgs == [{"role": "user", "content": "Rate it.\n|Who?|B.|A.|D"}]


def test_official_prompt_stage_writes_the_adapted_file(tmp_path):
    from convrag.cli import main

    src = tmp_path / "underspecified_eval.py"
    src.write_text(SOURCE.replace("CHECK_PROMPT", "UNDERSPECIFIED_PROMPT"))
    out = tmp_path / "official_clarification.yaml"
    main(["mtrag-un", "official-prompt", "--judge", "clarification", "--revision", "c" * 40, "--source", str(src),
          "--out", str(out)])
    p = yaml.safe_load(out.read_text())
    assert p["user"].format(response="Which?").endswith("Reply: Which?")
    assert p["official"]["source"].endswith(f"{'c' * 40}/scripts/evaluation/underspecified_eval.py")


def test_the_paper_config_runs_the_official_judges_and_says_so():
    """mtrag_un's paper config: IBM's IDK, RB_llm and underspecified judges (fetched and adapted),
    the project's own generation and rewrite wording; the reproduction context says which."""
    from convrag.config import REPO_ROOT, load_config
    from convrag.layout import Layout
    from convrag.studies import get_study
    from convrag.studies.mtrag_un import wiring as W

    cfg = load_config(REPO_ROOT / "config" / "studies" / "mtrag_un.yaml")
    run = get_study("mtrag_un").context(cfg)["reproduction"]
    assert run["prompts"] == {"generation": "own", "rewrite": "own", "idk": "official", "rb_llm": "official",
                              "clarification": "official"}
    files = W.judge_prompt_files(cfg, Layout("res"))
    assert files == {j: f"res/mtrag_un/prompts/official_{j}.yaml" for j in ("idk", "rb_llm", "clarification")}
    assert "--prompt-files" in W.evaluate_args(cfg, "reg", "cache", "P", Layout("res"))
    default = load_config(REPO_ROOT / "config" / "config.yaml")
    assert W.judge_prompt_files(default, Layout("res")) == {}
    assert "--prompt-files" not in W.evaluate_args(default, "reg", "cache", "P", Layout("res"))


def test_the_published_entries_claim_the_prompts_the_paper_config_uses():
    """The RW rows of Table 2 depend on the rewrite prompt: on the paper config (own rewrite wording)
    they say "own prompt wording (rewrite)", the LT rows do not; a rewrite prompt file the user
    supplies lifts it."""
    from convrag.config import REPO_ROOT, load_config
    from convrag.report.reproduction import load_published, published_path, requirement_failures
    from convrag.studies import get_study

    cfg = load_config(REPO_ROOT / "config" / "studies" / "mtrag_un.yaml")
    run = get_study("mtrag_un").context(cfg)["reproduction"]
    pub = load_published(published_path("mtrag_un"), "mtrag_un")
    by_id = {e.id: requirement_failures(e.requires, run, pub.unreleased) for e in pub.entries}
    rw = [i for i in by_id if i.startswith("table2.") and ".RW." in i]
    assert len(rw) == 16 and all("own prompt wording (rewrite)" in by_id[i] for i in rw)
    assert not any("own prompt" in r for i, rs in by_id.items() if ".LT." in i for r in rs)
    supplied = {**run, "prompts": {**run["prompts"], "rewrite": "my/rewrite.yaml"}}
    lifted = {e.id: requirement_failures(e.requires, supplied) for e in pub.entries}
    assert not any("own prompt wording (rewrite)" in r for rs in lifted.values() for r in rs)
    # Table 4's generation rows still name the generation prompt (the project's own wording: the
    # paper prints none), and only that one
    t4 = [e.id for e in pub.entries if e.id.startswith("table4.") and e.ours is not None]
    assert len(t4) == 78 and all("own prompt wording (generation)" in lifted[i] for i in t4)
    assert not any("own prompt" in r for i, rs in lifted.items() if not i.startswith("table4.") for r in rs)


@pytest.mark.tinymodel
def test_official_shaped_prompts_run_through_the_judges_with_the_real_tiny_model(tmp_path):
    """The evaluate stage's judges on adapted prompts (files of the scorer's shape, written for the
    test) with SmolLM2-135M: one user message per request (no system, no examples), every verdict
    recorded and read by the official parsers."""
    from convrag.config import REPO_ROOT
    from convrag.judges.official import adapt
    from convrag.llm.engine import EnginePool
    from convrag.studies.mtrag_un.judges import ALLOWED, OFFICIAL, judge_all

    src = tmp_path / "judge_utils.py"
    src.write_text(SOURCE.replace("CHECK_PROMPT", "UNDERSPECIFIED_PROMPT"))
    files = {}
    for j in ("idk", "rb_llm", "clarification"):
        files[j] = tmp_path / f"{j}.yaml"
        files[j].write_text(yaml.safe_dump(adapt(src, OFFICIAL[j])))

    class Spy:
        def __init__(self, engine):
            self.engine, self.requests = engine, []

        def generate(self, reqs, desc=None):
            self.requests += list(reqs)
            return self.engine.generate(reqs)

    eng = Spy(EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m"))
    turns = [{"speaker": "user", "text": "When was the Harl lighthouse finished?"}]
    items = [{"item_id": "t0", "conversation_turns": turns, "response": "In 1881.", "targets": ["In 1881."],
              "contexts": ["The Harl lighthouse was finished in 1881."], "answerability": "ANSWERABLE"},
             {"item_id": "t1", "conversation_turns": turns, "response": "Which lighthouse?", "targets": ["In 1881."],
              "contexts": ["The Harl lighthouse was finished in 1881."], "answerability": "UNDERSPECIFIED"}]
    res = judge_all(items, eng, REPO_ROOT / "resources" / "prompts", max_tokens={"idk": 4, "rb_llm": 16,
                    "clarification": 16}, which=("idk", "rb_llm", "clarification"),
                    prompt_files={j: str(p) for j, p in files.items()})
    assert all(len(r.messages) == 1 and r.messages[0]["role"] == "user" for r in eng.requests)
    assert any("[Inquiry]\nuser: When was the Harl lighthouse finished?" in r.messages[0]["content"]
               for r in eng.requests)
    assert [v["method"] for v in res["clarification"]] == ["skipped", "llm"]
    assert all(v["value"] in ALLOWED["idk"] or v["value"] is None for v in res["idk"])
    assert all(v["value"] is None or 0.1 <= v["value"] <= 1 for v in res["rb_llm"])
    assert all(v["value"] in ALLOWED["clarification"] or v["value"] is None for v in res["clarification"])
