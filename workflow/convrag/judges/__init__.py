"""LLM judges: the response-category classifier of assistant turns and the answer-correctness
judge. Both are batched over every item of a job (one engine call), cached, and record every
output they could not read (``parsed: false``) instead of guessing."""
