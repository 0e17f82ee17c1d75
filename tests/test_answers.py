"""extract_answer: take the last `Answer:` line, tolerate decoration, else None."""

import pytest

from convrag.rag.answers import extract_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The tower is in Paris.\nAnswer: Paris", "Paris"),
        ("Reasoning...\nanswer: Paris", "Paris"),  # case-insensitive
        ("Reasoning...\n   ANSWER:   Paris  ", "Paris"),  # leading spaces
        ("x\n**Answer:** Paris", "Paris"),  # markdown bold label
        ("x\n**Answer**: Paris", "Paris"),
        ("x\nAnswer: **Paris**", "Paris"),  # bold value
        ("x\nAnswer: Paris.", "Paris"),  # trailing period
        ("x\nAnswer: Washington, D.C.", "Washington, D.C"),  # one trailing period only
        ("Answer: Lyon\nWait, let me check.\nAnswer: Paris", "Paris"),  # last one wins
        ("Answer: 1,000 km\r\n", "1,000 km"),  # CRLF
    ],
)
def test_extracts(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The Eiffel Tower is in Paris.",  # no Answer line
        "",
        None,
        "Reasoning\nAnswer:",  # empty answer
        "Reasoning\n**Answer:**  ",  # empty after decoration
        "Answer: Paris\nAnswer: ",  # the LAST line is empty -> None, no fall back
        "My answer: Paris",  # the line must start with Answer:
        "Answers: Paris",
    ],
)
def test_none(text):
    assert extract_answer(text) is None
