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


def test_reasoning_block_is_not_the_reply():
    """A thinking model's draft Answer line inside <think> is never taken; a reply cut off
    while thinking has no answer; text without a think block is unchanged."""
    from convrag.rag.answers import visible_reply

    thought = "<think>\nMaybe Paris?\nAnswer: Paris\n</think>\n\nIt is Lyon.\nAnswer: Lyon"
    assert extract_answer(thought) == "Lyon"
    assert visible_reply(thought) == "It is Lyon.\nAnswer: Lyon"
    assert extract_answer("<think>\nAnswer: Paris\nstill thinking") is None
    assert visible_reply("<think>cut off") == ""
    assert visible_reply("Plain reply.\nAnswer: X") == "Plain reply.\nAnswer: X"
    assert extract_answer("<think>\n</think>\nI need more details. Which person?") is None
