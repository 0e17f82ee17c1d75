"""CORAL's generation metrics (convrag.metrics.citation): ALCE citation recall / precision on
hand-worked items with a scripted, call-recording NLI; the citation pattern's edge cases;
BLEU-1 and ROUGE-L on hand-worked examples; the LLM entailment judge with a scripted engine;
TRUE-T5's input format with a fake model; one end-to-end run with the real tiny model."""

import math
import sys
import types

import pytest
import yaml

from convrag.config import REPO_ROOT
from convrag.llm.judge import JUDGES
from convrag.llm.types import Response
from convrag.metrics.citation import (
    NLI_JUDGE,
    bleu1,
    citation_scores,
    citation_summary,
    corpus_bleu1,
    format_passage,
    llm_entail,
    load_nli_prompts,
    parse_citations,
    parse_yes_no,
    prepare_response,
    sentence_splitter,
    split_statements,
    strip_citations,
    t5_entail,
    true_nli_input,
)
from convrag.metrics.registry import answer_metric
from convrag.metrics.text import rouge_l

# ---- passages and claims shared by the hand-worked items ------------------------------------

PASSAGES = [
    {"title": "Harl", "text": "The Harl lighthouse was finished in 1881."},
    {"title": "Marsh", "text": "Tove Marsh was an engineer."},
    {"title": "Tamby", "text": "Tamby is a village."},
]
F1, F2, F3 = (format_passage(p) for p in PASSAGES)  # "Title: {title}\n{text}"
C1 = "The Harl lighthouse was finished in 1881."
CM = "Tove Marsh was an engineer."
CH = "Hesk is a port."


class ScriptedNLI:
    """``entail`` from a dict (premise, hypothesis) -> bool; records every call; an unexpected
    pair is a KeyError, so the test also pins exactly which NLI checks are asked."""

    def __init__(self, table):
        self.table, self.calls = table, []

    def __call__(self, premises, hypotheses):
        pairs = list(zip(premises, hypotheses))
        self.calls.append(pairs)
        return [self.table[p] for p in pairs]


TABLE = {
    (F1 + "\n" + F2, C1): True,
    (F1, C1): True,
    (F2, C1): False,
    (F2, CM): True,
    (F1, CM): False,
    (F3 + "\n" + F1 + "\n" + F2, C1): True,
    (F3, C1): False,
    (F3 + "\n" + F2, C1): False,  # asked speculatively, never decides anything
    (F3 + "\n" + F1, C1): True,
    (F2 + "\n" + F3, CH): False,
    (F2, CH): False,
    (F3, CH): False,
}

ITEMS = [
    {  # item A: 3 statements (the second line is cut off, as ALCE does)
        "item_id": "A",
        "response": "  The Harl lighthouse was finished in 1881 [1][2]. Tove Marsh was an engineer. "
                    "Hesk is a port [5].\nTove Marsh was an engineer [2].",
        "passages": PASSAGES,
    },
    {  # item B: 4 statements
        "item_id": "B",
        "response": "Tove Marsh was an engineer [2]. Tove Marsh was an engineer [1]. "
                    "The Harl lighthouse was finished in 1881 [3][1][2][3]. Hesk is a port [2][3].",
        "passages": PASSAGES,
    },
    {"item_id": "C", "response": "   \n", "passages": PASSAGES},  # no statement: skipped
    {"item_id": "D", "response": None, "passages": []},  # no response: skipped
]


def test_citation_scores_hand_worked_one_batched_call():
    nli = ScriptedNLI(TABLE)
    rows = citation_scores(ITEMS, nli)
    a, b, c, d = rows

    # Item A.
    # S1 "... 1881 [1][2]."  cites 1, 2: joint F1+F2 entails -> recall 1. Precision (joint
    #    entailed, 2 citations): [1] alone entails -> precise; [2] alone does not, and the
    #    rest ([1]) still entails -> over-citation (0).
    # S2 "Tove Marsh was an engineer."  no citation -> recall 0, no citation counted.
    # S3 "Hesk is a port [5]."  5 > 3 passages -> recall 0, its citation NOT counted.
    # recall = 1/3; precision = precise 1 / counted citations 2 = 1/2.
    assert [s["sentence"] for s in a["statements"]] == [
        "The Harl lighthouse was finished in 1881 [1][2].", "Tove Marsh was an engineer.", "Hesk is a port [5]."]
    assert [s["status"] for s in a["statements"]] == ["checked", "no_citation", "out_of_range"]
    assert [s["recall"] for s in a["statements"]] == [1, 0, 0]
    assert a["statements"][0]["precise"] == [1, 0]
    assert a["statements"][0]["claim"] == C1
    assert a["recall"] == pytest.approx(1 / 3) and a["precision"] == pytest.approx(1 / 2)
    assert (a["n_statements"], a["n_entailed"], a["n_citations"], a["n_precise"]) == (3, 1, 2, 1)
    assert (a["n_multi_cited"], a["n_multi_supported"], a["n_overcite"]) == (1, 1, 1)
    assert a["skipped"] is False and a["item_id"] == "A"

    # Item B.
    # S1 "[2]" single citation, F2 entails -> recall 1, precise += 1, 1 citation.
    # S2 "[1]" single citation, F1 does not -> recall 0, precise += 0, 1 citation.
    # S3 "[3][1][2][3]": at most 3 count -> [3][1][2]; joint F3+F1+F2 entails -> recall 1.
    #    [3]: alone no, rest [1][2] entails -> over-citation; [1]: alone yes -> precise;
    #    [2]: alone no, rest [3][1] entails -> over-citation. precise 1 of 3 citations.
    # S4 "[2][3]": joint F2+F3 does not entail -> recall 0, precise += 0, 2 citations.
    # recall = 2/4 = 1/2; precision = (1 + 0 + 1 + 0) / (1 + 1 + 3 + 2) = 2/7.
    assert [s["recall"] for s in b["statements"]] == [1, 0, 1, 0]
    assert b["statements"][2]["citations"] == ["3", "1", "2", "3"] and b["statements"][2]["used"] == ["3", "1", "2"]
    assert b["statements"][2]["precise"] == [0, 1, 0]
    assert [s["precise"] for s in (b["statements"][0], b["statements"][1], b["statements"][3])] == [None] * 3
    assert b["recall"] == pytest.approx(1 / 2) and b["precision"] == pytest.approx(2 / 7)
    assert (b["n_statements"], b["n_entailed"], b["n_citations"], b["n_precise"]) == (4, 2, 7, 2)
    assert (b["n_multi_cited"], b["n_multi_supported"], b["n_overcite"]) == (2, 1, 2)

    # Items C, D: no statement -> skipped, not scored 0.
    for r in (c, d):
        assert r["skipped"] is True and r["recall"] is None and r["precision"] is None and r["statements"] == []

    # ONE batched NLI call; 19 checks planned, duplicates asked once -> the 12 table pairs.
    assert len(nli.calls) == 1
    asked = nli.calls[0]
    assert len(asked) == len(set(asked)) == len(TABLE) and set(asked) == set(TABLE)
    assert asked[:3] == [(F1 + "\n" + F2, C1), (F1, C1), (F2, C1)]  # first-seen order

    # Corpus (ALCE): 100 x mean over the 2 scored items.
    # recall = 100 * (1/3 + 1/2) / 2 = 41.667; precision = 100 * (1/2 + 2/7) / 2 = 39.286.
    s = citation_summary(rows)
    assert s["citation_rec"] == pytest.approx(100 * 5 / 12) and s["citation_prec"] == pytest.approx(100 * 11 / 28)
    assert (s["items"], s["items_scored"], s["items_skipped"], s["statements"], s["citations"]) == (4, 2, 2, 7, 9)
    # ALCE's printed shares: 3 of 7 sentences multi-cited, 2 of those 3 jointly supported,
    # 3 over-citations per those 2 sentences (ALCE's ratio can exceed 100).
    assert s["multi_cited_pct"] == pytest.approx(300 / 7) and s["multi_supported_pct"] == pytest.approx(200 / 3)
    assert s["overcite_pct"] == pytest.approx(150.0)
    assert s["splitter"] == [sentence_splitter()[1]]


def test_two_call_mode_asks_fewer_pairs_with_the_same_scores():
    one = citation_scores(ITEMS, ScriptedNLI(TABLE))
    nli = ScriptedNLI(TABLE)
    two = citation_scores(ITEMS, nli, one_call=False)
    assert [(r["recall"], r["precision"]) for r in two] == [(r["recall"], r["precision"]) for r in one]
    assert len(nli.calls) == 2
    # round 1: the 5 joint checks; round 2: the precision checks of the 2 jointly entailed
    # multi-citation sentences not known yet (S4's speculative single checks never asked)
    assert len(nli.calls[0]) == 5 and len(nli.calls[1]) == 5
    assert (F2, CH) not in nli.calls[0] + nli.calls[1]


def test_no_nli_call_when_nothing_to_check_and_precision_zero_without_citations():
    nli = ScriptedNLI({})
    rows = citation_scores([{"response": "No citation here. None here either [9].", "passages": PASSAGES}], nli)
    assert nli.calls == []
    assert rows[0]["recall"] == 0 and rows[0]["precision"] == 0 and rows[0]["n_citations"] == 0
    assert citation_summary([])["citation_rec"] != citation_summary([])["citation_rec"]  # NaN


def test_id_modes_and_out_of_range_rules():
    shown = [{"id": "12", **PASSAGES[0]}, {"id": "7", **PASSAGES[1]}]
    resp = "The Harl lighthouse was finished in 1881 [12][7]. Tove Marsh was an engineer [3]."
    table = {(F1 + "\n" + F2, C1): True, (F1, C1): True, (F2, C1): False}
    by_id = citation_scores([{"response": resp, "passages": shown}], ScriptedNLI(table), id_mode="id")[0]
    # [12][7] -> passages "12", "7": recall 1, [7] over-cited; [3] is no passage id -> 0
    assert [s["status"] for s in by_id["statements"]] == ["checked", "out_of_range"]
    assert by_id["recall"] == 0.5 and by_id["precision"] == 0.5
    # index mode on the same response: [12] is beyond the 2 shown passages; [3] too
    by_index = citation_scores([{"response": resp, "passages": shown}], ScriptedNLI({}))[0]
    assert [s["status"] for s in by_index["statements"]] == ["out_of_range", "out_of_range"]
    # [0] is out of range (ALCE would index -1: the LAST passage; a stated deviation);
    # a 4th citation out of range rejects the sentence even though only 3 count (ALCE
    # checks every citation before capping)
    rows = citation_scores([{"response": "Tove Marsh was an engineer [0]. Tove Marsh was an engineer [2][2][2][9].",
                             "passages": PASSAGES}], ScriptedNLI({}))
    assert [s["status"] for s in rows[0]["statements"]] == ["out_of_range", "out_of_range"]
    assert rows[0]["n_multi_cited"] == 1  # ALCE's sent_mcite counts the uncapped list here
    # id mode needs ids
    from convrag.errors import ConfigError, DataError

    with pytest.raises(DataError, match="has no 'id'"):
        citation_scores([{"response": "A [1].", "passages": PASSAGES}], ScriptedNLI({}), id_mode="id")
    with pytest.raises(ConfigError, match="id_mode"):
        citation_scores([], ScriptedNLI({}), id_mode="ids")


def test_entail_must_answer_every_pair_with_a_boolean():
    with pytest.raises(ValueError, match="1 verdicts for 3 pairs"):
        citation_scores(ITEMS[:1], lambda p, h: [True])
    with pytest.raises(TypeError, match="booleans"):
        citation_scores(ITEMS[:1], lambda p, h: [None] * len(p))


# ---- citation pattern, stripping, statements ------------------------------------------------


def test_citation_pattern_edge_cases():
    assert parse_citations("A [1][2].") == ["1", "2"]
    assert parse_citations("A [1, 2].") == ["1"]  # ALCE's "\[\d+" sees only the first id
    assert parse_citations("A [12] b[3] [x] [ 4] [1][1].") == ["12", "3", "1", "1"]
    assert parse_citations("No citation.") == []
    # a custom syntax for real ids: the first group is the id
    assert parse_citations("A [doc-7][d2].", pattern=r"\[([\w-]+)\]") == ["doc-7", "d2"]
    # ALCE's remove_citations: " [n" and "[n" deleted, then " |" and every "]"
    assert strip_citations("Paris is big [1][2].") == "Paris is big."
    assert strip_citations("Paris is big [1, 2].") == "Paris is big, 2."
    assert strip_citations("A [1] | B [2] x] y.") == "A B x y."


def test_more_than_three_citations_keep_the_first_three():
    rows = citation_scores([{"response": "Tove Marsh was an engineer [2][1][3][1].", "passages": PASSAGES}],
                           ScriptedNLI({(F2 + "\n" + F1 + "\n" + F3, CM): False, (F2, CM): True, (F1, CM): False,
                                        (F3, CM): False, (F1 + "\n" + F3, CM): False, (F2 + "\n" + F3, CM): True,
                                        (F2 + "\n" + F1, CM): True}))
    st = rows[0]["statements"][0]
    assert st["used"] == ["2", "1", "3"] and rows[0]["n_citations"] == 3
    assert rows[0]["precision"] == 0.0  # not jointly entailed: 0 precise of 3
    # no cap: all 4 count (never jointly entailed here: 0 precise of 4)
    rows = citation_scores([{"response": "Tove Marsh was an engineer [2][1][3][1].", "passages": PASSAGES}],
                           lambda p, h: [False] * len(p), at_most_citations=None)
    assert rows[0]["statements"][0]["used"] == ["2", "1", "3", "1"] and rows[0]["n_citations"] == 4


def test_response_preparation_and_sentence_splitting():
    assert prepare_response("  A [1].\nB [2].") == "A [1]."
    assert prepare_response("  A [1].\nB [2].<|im_end|>", first_line=False) == "A [1].\nB [2]."
    assert prepare_response(None) == ""
    split, name = sentence_splitter()
    assert name == "punkt_tab/english"
    assert split_statements("Dr. Smith built it in 1881 [1]. It has 2.5 floors [2][3]! Was it red? Yes.") == [
        "Dr. Smith built it in 1881 [1].", "It has 2.5 floors [2][3]!", "Was it red?", "Yes."]
    assert split_statements("") == []
    # the whole response when asked (not ALCE's default)
    nli = ScriptedNLI({(F2, CM): True, (F1, C1): True})
    resp = "Tove Marsh was an engineer [2].\nThe Harl lighthouse was finished in 1881 [1]."
    rows = citation_scores([{"response": resp, "passages": PASSAGES}], nli, first_line=False)
    assert rows[0]["recall"] == 1.0 and rows[0]["n_statements"] == 2


# where NLTK's untrained Punkt splits differently from the trained English parameters (ALCE's
# sent_tokenize); expected splits written by hand from punkt_tab/english's abbreviation list
# ("mt" is not in it: "Mt. Everest" splits, as with NLTK's own sent_tokenize)
TRAINED_SPLITS = {
    "Dr. Smith went to Washington. He arrived on Jan. 5.":
        ["Dr. Smith went to Washington.", "He arrived on Jan. 5."],
    "The U.S. team won the gold medal. It was their third.":
        ["The U.S. team won the gold medal.", "It was their third."],
    "Prof. Lee and Mr. Brown met at St. Mary's church.": ["Prof. Lee and Mr. Brown met at St. Mary's church."],
    "She holds a Ph.D. in physics from the U.K. and works in Calif. now.":
        ["She holds a Ph.D. in physics from the U.K. and works in Calif. now."],
    "It was 5 p.m. when Gen. Grant arrived in Ala. with the troops.":
        ["It was 5 p.m. when Gen. Grant arrived in Ala. with the troops."],
    "Mt. Everest is tall. Col. Sanders sold chicken.": ["Mt.", "Everest is tall.", "Col. Sanders sold chicken."],
}


def test_sentence_splitter_is_trained_punkt_as_nltk_sent_tokenize(tmp_path, monkeypatch):
    """Parity: the splitter equals nltk.sent_tokenize reading the same parameters as a
    punkt_tab folder (NLTK's own loader and tokenizer), and differs from untrained Punkt."""
    import nltk.data
    import nltk.tokenize
    import punkt
    from nltk.tabdata import TabEncoder
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    model = punkt.load_model("english")
    assert model.metadata.source == "punkt_tab:english"
    assert (len(model.abbrev_types), len(model.collocations), len(model.sent_starters)) == (156, 37, 39)
    assert {"dr", "u.s", "ph.d", "calif", "p.m"} <= model.abbrev_types and "mt" not in model.abbrev_types
    params = PunktParameters()
    params.abbrev_types, params.collocations = set(model.abbrev_types), set(model.collocations)
    params.sent_starters, params.ortho_context = set(model.sent_starters), dict(model.ortho_context)
    folder = tmp_path / "tokenizers" / "punkt_tab" / "english"  # written as save_punkt_params writes it
    folder.mkdir(parents=True)
    enc = TabEncoder()
    for name, text in (("collocations.tab", enc.tups2tab(params.collocations)),
                       ("sent_starters.txt", enc.set2txt(params.sent_starters)),
                       ("abbrev_types.txt", enc.set2txt(params.abbrev_types)),
                       ("ortho_context.tab", enc.ivdict2tab(params.ortho_context))):
        (folder / name).write_text(text, encoding="utf-8", newline="")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    try:
        untrained = PunktSentenceTokenizer().tokenize
        split = sentence_splitter()[0]
        for text, expected in TRAINED_SPLITS.items():
            assert untrained(text) != expected, text
            assert nltk.tokenize.sent_tokenize(text) == expected, text
            assert split(text) == expected == split_statements(text), text
    finally:
        nltk.tokenize._get_punkt_tokenizer.cache_clear()


def test_format_passage():
    assert format_passage({"title": "T", "text": "x"}) == "Title: T\nx"
    assert format_passage({"text": "x"}) == "x" and format_passage("x") == "x"


# ---- BLEU-1 and ROUGE-L -------------------------------------------------------------------


def test_bleu1_hand_worked():
    # pred "the the the cat" (c = 4), ref "the cat is on the mat" (r = 6):
    # clipped unigrams: the min(3, 2) = 2, cat 1 -> p1 = 3/4; BP = exp(1 - 6/4) = exp(-0.5)
    assert bleu1("the the the cat", "the cat is on the mat") == pytest.approx(0.75 * math.exp(-0.5))
    # pred "The cat sat on the mat." -> The cat sat on the mat . (c = 7); ref "The cat sat."
    # -> The cat sat . (r = 4): case-sensitive, "." split off: matches The cat sat . = 4 ->
    # p1 = 4/7; c > r -> BP = 1
    assert bleu1("The cat sat on the mat.", "The cat sat.") == pytest.approx(4 / 7)
    # two references: clip by the max count in any reference (a b c d all match: 4/4);
    # closest reference length to c = 4 is 5 -> BP = exp(1 - 5/4)
    assert bleu1("a b c d", ["a b", "c d e f g"]) == pytest.approx(math.exp(-0.25))
    assert bleu1("dog", "the cat") == 0.0 and bleu1("", "the cat") == 0.0
    assert bleu1("the cat", "the cat") == 1.0
    # corpus level: matches 3 + 4 = 7 over 4 + 7 = 11 tokens; c = 11 > r = 6 + 4 -> BP 1
    assert corpus_bleu1(["the the the cat", "The cat sat on the mat."],
                        ["the cat is on the mat", "The cat sat."]) == pytest.approx(7 / 11)
    m = answer_metric("bleu1")
    assert m("the the the cat", ["the cat is on the mat"]) == pytest.approx(0.75 * math.exp(-0.5))
    assert m(None, ["x"]) == 0.0
    with pytest.raises(ValueError, match="no reference"):
        m("x", [])


def test_rouge_l_hand_worked_and_registered():
    # the cat sat on the mat / the cat is on the mat: LCS "the cat on the mat" = 5 of 6 both ways
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # lower-cased, punctuation dropped: [the, cat] vs [cat, the]: LCS 1 -> P = R = 1/2
    assert rouge_l("The cat.", "cat the") == pytest.approx(0.5)
    assert answer_metric("rougeL")("the cat sat on the mat", ["the cat is on the mat", "x"]) == pytest.approx(5 / 6)


# ---- the LLM entailment judge ---------------------------------------------------------------


class ScriptedEngine:
    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def generate(self, reqs, desc=None):
        reqs = list(reqs)
        self.calls.append(reqs)
        return [Response(text=self.reply(r), prompt_tokens=5, completion_tokens=1, finish_reason="stop") for r in reqs]


def _claim(req) -> str:
    return req.messages[-1]["content"].split("Claim: ")[1].split("\n")[0]


def test_nli_judge_registered_and_prompt_file():
    assert JUDGES["nli_entailment"] is NLI_JUDGE and NLI_JUDGE.prompt == "coral/nli.yaml"
    d = yaml.safe_load((REPO_ROOT / "resources" / "prompts" / NLI_JUDGE.prompt).read_text())
    assert {"system", "user", "examples"} <= set(d) and {ex["verdict"] for ex in d["examples"]} == {"yes", "no"}
    assert load_nli_prompts() == d


def test_parse_yes_no():
    assert parse_yes_no("Yes.") is True and parse_yes_no(" no, it is not") is False
    assert parse_yes_no("NO") is False and parse_yes_no("Answer: yes") is True
    for bad in ("maybe", "nope", "Not stated", "", None):
        assert parse_yes_no(bad) is None


def test_llm_entail_one_batched_call_unparsed_counted():
    replies = {"A.": "Yes.", "B.": "no", "C.": "I cannot tell."}
    eng = ScriptedEngine(lambda r: replies[_claim(r)])
    ent = llm_entail(eng)
    out = ent(["P", "P", "Q", "P"], ["A.", "B.", "C.", "A."])
    assert out == [True, False, False, True]  # unparsed -> not entailed
    assert len(eng.calls) == 1 and len(eng.calls[0]) == 3  # identical prompts asked once
    assert ent.summary() == {"calls": 1, "asked": 4, "unparsed": 1}
    assert [v["parsed"] for v in ent.verdicts] == [True, True, False, True]
    msgs = eng.calls[0][0].messages
    assert msgs[0]["role"] == "system" and msgs[-1]["content"].startswith("Passages:\nP\n\nClaim: A.")
    assert len(msgs) == 2 + 2 * len(load_nli_prompts()["examples"])
    assert ent([], []) == [] and len(eng.calls) == 1


def test_citation_scores_over_the_llm_judge_is_one_engine_call():
    eng = ScriptedEngine(lambda r: "yes" if _claim(r) == C1 else "no")
    ent = llm_entail(eng)
    rows = citation_scores(ITEMS, ent)
    assert len(eng.calls) == 1 and len(eng.calls[0]) == len(TABLE) and ent.unparsed == 0
    assert rows[0]["recall"] == pytest.approx(1 / 3)


# ---- TRUE-T5 (no weights offline: a fake model checks the input format and the "1" rule) -----


def test_t5_entail_input_format_and_decoding(monkeypatch):
    import torch

    seen = {}

    class Enc(dict):
        def to(self, device):
            return self

    class Tok:
        def __call__(self, texts, return_tensors=None, padding=None):
            seen.setdefault("batches", []).append(list(texts))
            return Enc(input_ids=torch.zeros((len(texts), 1), dtype=torch.long))

        def decode(self, ids, skip_special_tokens=False):
            return ids

    class Model:
        device = "cpu"

        def to(self, device):
            seen["device"] = device
            return self

        def eval(self):
            return self

        def generate(self, input_ids=None, max_new_tokens=None):
            seen["max_new_tokens"] = max_new_tokens
            return ["1" if "good" in t else "0" if "bad" in t else " 1" for t in seen["batches"][-1]]

    fake = types.SimpleNamespace(
        AutoTokenizer=types.SimpleNamespace(from_pretrained=lambda name, use_fast=None, revision=None: seen.update(
            tok=(name, use_fast, revision)) or Tok()),
        AutoModelForSeq2SeqLM=types.SimpleNamespace(from_pretrained=lambda name, dtype=None, revision=None: seen.update(
            model=(name, dtype, revision)) or Model()),
    )
    monkeypatch.setitem(sys.modules, "transformers", fake)
    ent = t5_entail(device="cpu", batch_size=2)
    out = ent(["P1", "P2 long premise", "P3"], ["good", "bad", "other"])
    assert out == [True, False, False]  # exactly "1" only
    pin = "aa6cfe1dd4257853bfdd772992045f41bfc14988"  # resources/sources.yaml: never the default branch
    assert seen["tok"] == ("google/t5_xxl_true_nli_mixture", False, pin)
    assert seen["model"] == ("google/t5_xxl_true_nli_mixture", torch.bfloat16, pin) and seen["max_new_tokens"] == 10
    assert seen["batches"][0][0] == "premise: P2 long premise hypothesis: bad"  # longest first
    assert sorted(t for b in seen["batches"] for t in b) == sorted(
        true_nli_input(p, h) for p, h in [("P1", "good"), ("P2 long premise", "bad"), ("P3", "other")])
    assert [len(b) for b in seen["batches"]] == [2, 1]


# ---- the real tiny model ------------------------------------------------------------------


@pytest.mark.tinymodel
def test_llm_entail_with_real_tiny_model(tmp_path):
    from convrag.llm.engine import EnginePool

    eng = EnginePool(REPO_ROOT / "config" / "models.yaml", tmp_path / "c.sqlite").engine("smollm2-135m")
    ent = llm_entail(eng)
    out = ent([F1, F1], [C1, "The Harl lighthouse is made of glass."])
    assert len(out) == 2 and all(isinstance(v, bool) for v in out)
    assert ent.calls == 1 and ent.asked == 2
    assert ent.unparsed == sum(1 for v in ent.verdicts if not v["parsed"]) <= 2
    assert all(v["parsed"] == (v["value"] is not None) for v in ent.verdicts)
    assert eng.accounting.calls == 2
