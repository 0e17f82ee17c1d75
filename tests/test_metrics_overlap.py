"""Judge-free copy detector: hand-worked containment / Jaccard, short texts, exact thresholds."""

import math

import pytest

from convrag.errors import ConfigError, DataError
from convrag.metrics.overlap import (
    CopyMatch,
    char_ngram_jaccard,
    is_copy,
    normalize,
    word_ngram_containment,
)


def _words(prefix: str, n: int) -> list[str]:
    """n distinct words (no repeated 8-gram), e.g. alpha0 ... alpha39."""
    return [f"{prefix}{i}" for i in range(n)]


def test_normalize_case_punctuation_whitespace():
    assert normalize("  The  E-mail,\tdon't!\n(Version_2)  ") == "the e mail don t version 2"
    assert normalize("Café ＡＢＣ") == "café abc"  # NFKC folds full-width letters
    with pytest.raises(DataError, match="expected a document text"):
        normalize(None)


def test_identical_and_punctuation_only_differences():
    text = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris, France."
    m = is_copy(text, [text])
    assert m == CopyMatch(True, 0, 1.0, 1.0)
    ok, gold, cont, jac = is_copy(text.upper().replace(",", "").replace("'", " "), {"doc-7": text})
    assert (ok, gold, cont, jac) == (True, "doc-7", 1.0, 1.0)


def test_copy_with_a_few_words_changed():
    # 40 distinct words -> 33 word 8-grams (starts 0..32). Changing word 0 breaks only the
    # 8-gram starting at 0; changing word 39 only the one starting at 32: 31/33 survive.
    gold = _words("w", 40)
    cand = ["changed"] + gold[1:39] + ["edited"]
    cont = word_ngram_containment(" ".join(cand), " ".join(gold))
    assert cont == pytest.approx(31 / 33)
    assert is_copy(" ".join(cand), [" ".join(gold)]).is_copy
    # a change in the middle (word 20) breaks the 8 grams starting at 13..20: 25/33 < 0.8
    mid = gold[:20] + ["changed"] + gold[21:]
    assert word_ngram_containment(" ".join(mid), " ".join(gold)) == pytest.approx(25 / 33)


def test_different_text_is_not_a_copy():
    a = "Photosynthesis converts light energy into chemical energy stored in glucose molecules."
    b = "The stock market closed higher on Friday after strong quarterly earnings reports."
    m = is_copy(a, [b])
    assert m.is_copy is False and m.gold == 0 and m.containment == 0.0 and m.jaccard < 0.1


def test_containment_exactly_at_threshold():
    # candidate: 17 words -> 10 word 8-grams. The gold holds the first 15 words (8-grams
    # starting at 0..7: 8 of 10 -> 0.8) plus 200 other words, so the char Jaccard stays low.
    cand = _words("c", 17)
    gold_at = cand[:15] + _words("g", 200)
    m = is_copy(" ".join(cand), [" ".join(gold_at)])
    assert m.containment == 0.8 and m.jaccard < 0.7 and m.is_copy
    gold_below = cand[:14] + _words("g", 200)  # 7 of 10 -> 0.7
    m = is_copy(" ".join(cand), [" ".join(gold_below)])
    assert m.containment == pytest.approx(0.7) and not m.is_copy


def test_jaccard_exactly_at_threshold_and_short_text():
    # one word -> no 8-gram: containment undefined, Jaccard decides.
    # "abcdefghijklmn": 10 char 5-grams; "abcdefghijk": 7 of them -> Jaccard 7/10.
    m = is_copy("abcdefghijklmn", ["abcdefghijk"])
    assert math.isnan(m.containment) and m.jaccard == pytest.approx(0.7) and m.is_copy
    m = is_copy("abcdefghijklmn", ["abcdefghij"])  # 6/10
    assert m.jaccard == pytest.approx(0.6) and not m.is_copy
    assert char_ngram_jaccard("abcdefghijklmn", "abcdefghijk") == pytest.approx(0.7)


def test_short_texts():
    short = "Paris is the capital"  # 4 words: containment NaN
    assert math.isnan(word_ngram_containment(short, "Paris is the capital of France"))
    m = is_copy(short, ["paris is the capital!"])
    assert m.is_copy and math.isnan(m.containment) and m.jaccard == 1.0
    # a long candidate against a short gold: no gold 8-gram, containment 0
    assert word_ngram_containment(" ".join(_words("x", 10)), "x0 x1 x2") == 0.0
    # under 5 characters: no 5-gram; both empty -> NaN, never a copy
    m = is_copy("abc", ["abc"])
    assert math.isnan(m.jaccard) and math.isnan(m.containment) and not m.is_copy
    assert char_ngram_jaccard("abc", "abcdefg") == 0.0
    assert is_copy("", ["some gold text"]).is_copy is False


def test_best_gold_is_reported():
    gold_far = "completely unrelated words about cooking pasta with tomatoes and basil leaves"
    text = " ".join(_words("t", 20))
    m = is_copy(text, {"far": gold_far, "near": text + " trailing words", "none": "x"})
    assert m.is_copy and m.gold == "near" and m.containment == 1.0
    empty = is_copy(text, [])
    assert empty.is_copy is False and empty.gold is None
    assert math.isnan(empty.containment) and math.isnan(empty.jaccard)


def test_bad_arguments():
    with pytest.raises(DataError, match="got one string"):
        is_copy("a b c", "a b c")
    with pytest.raises(ConfigError, match="jaccard_threshold"):
        is_copy("a", ["a"], jaccard_threshold=0)
