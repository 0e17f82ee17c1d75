"""The LLM judges two or more studies share: the content-sufficiency judge (``content.py``), the
answer-correctness judge (``correctness.py``) and the prompt checks and context renderers of
judges and readers (``prompts.py``). The judge machinery (one batched engine call per judge,
unreadable replies recorded as ``parsed: false``, never guessed) is ``convrag.llm.judge``; a
study's own judges live in the study (lic_rag's response categories, worse_labels' audit).
Each judging stage writes its verdicts beside its scores.
"""
