"""LLM judges behind one registry (``registry.py``): the response-category classifier of
assistant turns (``categories.py``) and the answer-correctness judge (``correctness.py``), and
any judge a study registers. Every judge is batched over all its items (one engine call),
cached, and records every output it could not read (``parsed: false``) instead of guessing.
``convrag judge`` runs any registered judge as its own stage over an items file.
"""
