# A STAND-IN for scripts/evaluation/underspecified_eval.py of IBM/mt-rag-benchmark, served by the
# mtrag_un miniature's download mirror at that file's URL (config/miniatures/mtrag_un.yaml names
# its own sha256). It is NOT IBM's file and holds none of IBM's prompt text: the prompt below is
# this project's own clarification-judge wording (resources/prompts/mtrag_un/clarification.yaml),
# written in a layout convrag.judges.official reads (a module-level string with a Jinja field), so
# that rule mtrag_un_official_prompt downloads, checks and adapts a file of that format. Never
# imported or run.

UNDERSPECIFIED_PROMPT = """Decide whether the reply below is a clarification request: a reply whose main purpose is to
get from the user the information needed to resolve something ambiguous or underspecified in the
user's message (a direct question to pin down what they mean, or a request to supply the missing detail).
A reply that only says it cannot answer, notes missing information without asking for it, changes
the subject or simply answers is not a clarification request.
Answer with one JSON object and nothing else: {"decision": "yes" or "no", "explanation": "one short sentence"}.

Reply to judge:
{{ response }}"""
