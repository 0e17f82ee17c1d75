"""The named tables and figures of coral (captions in ``workflow/report/coral/``), named after
the paper's numbers (``../shared/reference/published/coral.yaml``)."""

from __future__ import annotations

from convrag.studies.base import Target
from convrag.studies.coral import analyses as A


def _tasks(inputs):
    from convrag.records import TurnTask, read_records

    return read_records(inputs["tasks"], TurnTask)


def _scores(inputs):
    import pandas as pd

    return pd.read_parquet(inputs["retrieval"])


def _generation(inputs, ctx):
    import pandas as pd

    from convrag.studies.coral.evaluate import table3

    files = inputs["generation"]
    return table3(pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)) if files else pd.DataFrame()


TARGETS = {t.name: t for t in [
    Target("table4_structure", "table", lambda i, c: A.structure_table(_tasks(i)), inputs=("tasks",)),
    Target("table2_retrieval", "table", lambda i, c: A.retrieval_table(_scores(i)), inputs=("retrieval",)),
    Target("table3_generation", "table", _generation, inputs=("generation",)),
]}
