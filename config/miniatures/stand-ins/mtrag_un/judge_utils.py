# A STAND-IN for scripts/evaluation/judge_utils.py of IBM/mt-rag-benchmark, served by the mtrag_un
# miniature's download mirror at that file's URL (config/miniatures/mtrag_un.yaml names its own
# sha256). It is NOT IBM's file and holds none of IBM's prompt text: the two prompts below are this
# project's own judge wording (resources/prompts/mtrag_un/idk.yaml and rb_llm.yaml), written in the
# layout convrag.judges.official reads from the official file (an f-string assigned to the named
# variable inside the named function), so that rule mtrag_un_official_prompt downloads, checks and
# adapts a file of that format. Never imported or run.


def format_idk_judge(inquiry, response):
    prompt_template = f"""You check replies of an assistant that answers questions from reference documents.
The conversation below ends with the question being answered; then comes the reply to it.
Decide whether the reply says that the information needed to answer is missing.
- yes: the whole reply says it cannot answer.
- partial: the reply says one part cannot be answered but answers another part.
- no: the reply answers the question.

Conversation:
{inquiry}

Reply:
{response}

Answer with exactly one word: yes, partial or no."""
    return prompt_template


def format_conversation_radbench(row, document_txt):
    formatted_conversation = f"""You judge a reply of a question-answering assistant on faithfulness to the documents,
appropriateness to the current question and completeness, comparing it with a reference answer.
Explain briefly, then give a score from 1 to 10 on a last line of its own, written as Rating: [[n]].

Earlier turns:
{row['previous_conversation']}

Current question:
{row['current_question']}

Reference answer:
{row['reference_answer']}

Assistant's reply:
{row['response']}

Documents:
{document_txt}"""
    return formatted_conversation
