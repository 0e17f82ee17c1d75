"""SQuAD v1.1 EM / F1; expected values worked out by hand in the comments."""

import pytest

from convrag.metrics.qa import exact_match, f1_score, normalize_answer


def test_normalize_answer():
    # lower -> drop punctuation -> drop articles -> collapse whitespace
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("  An apple, a day ") == "apple day"
    # articles only as whole words: "theatre" and "another" survive
    assert normalize_answer("the theatre another") == "theatre another"


def test_article_only_difference_is_exact():
    # "the eiffel tower" -> "eiffel tower" == "eiffel tower"
    assert exact_match("the Eiffel Tower", ["Eiffel Tower"]) == 1.0
    assert f1_score("the Eiffel Tower", "Eiffel Tower") == 1.0


def test_partial_overlap_f1():
    # pred tokens [paris, france], gold [paris]; common = 1
    # precision = 1/2, recall = 1/1, F1 = 2*(1/2*1)/(1/2+1) = 1/1.5 = 0.6667
    assert f1_score("Paris France", ["Paris"]) == pytest.approx(2 / 3)
    assert exact_match("Paris France", ["Paris"]) == 0.0


def test_counter_intersection_counts_multiplicity():
    # pred [new, new, york], gold [new, york]; common = min(2,1)+min(1,1) = 2
    # precision = 2/3, recall = 2/2 = 1, F1 = 2*(2/3)/(2/3+1) = (4/3)/(5/3) = 0.8
    assert f1_score("new new york", "New York") == pytest.approx(0.8)


def test_max_over_aliases():
    golds = ["United States of America", "USA", "US"]
    # vs "usa": exact -> EM 1, F1 1
    assert exact_match("U.S.A.", golds) == 1.0  # punctuation removed: "usa"
    assert f1_score("U.S.A.", golds) == 1.0
    # "america" vs "united states of america": common 1, P = 1/1, R = 1/4,
    # F1 = 2*(1*1/4)/(1+1/4) = 0.5/1.25 = 0.4; other aliases give 0 -> max 0.4
    assert f1_score("America", golds) == pytest.approx(0.4)
    assert exact_match("America", golds) == 0.0


def test_punctuation_and_case():
    assert exact_match("  PARIS. ", "paris") == 1.0
    assert exact_match("rock 'n' roll", "rock n roll") == 1.0  # apostrophes dropped


def test_numbers():
    # "1,000" -> "1000" (comma is punctuation) so it matches "1000"
    assert exact_match("1,000", "1000") == 1.0
    # "3.5" -> "35" vs "3" -> no token overlap
    assert f1_score("3.5", "3") == 0.0
    # pred [1990, and, 1991], gold [1990]: P = 1/3, R = 1, F1 = 2*(1/3)/(4/3) = 0.5
    assert f1_score("1990 and 1991", "1990") == pytest.approx(0.5)


def test_none_prediction_scores_zero():
    assert exact_match(None, ["Paris"]) == 0.0
    assert f1_score(None, ["Paris"]) == 0.0


def test_empty_cases_follow_official_v11_script():
    # official v1.1: EM compares normalised strings ("" == "" -> 1); F1 is 0 whenever
    # there is no common token, including both sides empty.
    assert exact_match("", [""]) == 1.0
    assert f1_score("", [""]) == 0.0
    assert exact_match("the", "a") == 1.0  # both normalise to ""
    assert f1_score("", ["Paris"]) == 0.0
    assert exact_match("", ["Paris"]) == 0.0


def test_no_golds_is_an_error():
    with pytest.raises(ValueError, match="no gold answers"):
        f1_score("Paris", [])
    with pytest.raises(ValueError):
        exact_match("Paris", ())


def test_single_string_gold_is_not_iterated_as_characters():
    # if "Paris" were treated as the list ['P','a',...], EM would be 0 for "paris"
    assert exact_match("paris", "Paris") == 1.0
