"""Hostile inputs at the long-table interchange boundary: ``RoutingData.to_long``,
``write_long`` and reading the written file back (``load_generic``)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.datasets.generic import load_generic, write_long

NAN = np.nan


def test_query_columns_named_like_record_columns_are_renamed_not_overwriting(tmp_path, caplog):
    # query columns 'score', 'model', 'cost' and the alias 'llm' next to the record columns
    q = pd.DataFrame({"query_id": ["q1", "q2"], "score": [0.5, 0.25], "model": ["judge", "judge"],
                      "llm": ["x", "y"], "query_score": [7, 8]})
    d = RoutingData(q, ["a", "b"], [[1, 0], [NAN, 1]], [[2, 3], [NAN, 4]])
    with caplog.at_level(logging.WARNING, logger="recsys_router.long_table"):
        long = d.to_long()
    # a column that does not clash keeps its name; a clashing one takes the next free name
    assert long.columns.tolist() == ["query_id", "model", "score", "cost", "query_query_score",
                                     "query_model", "query_llm", "query_score"]
    # the record columns hold the matrix, written by hand from the three observed cells
    assert long[["query_id", "model"]].values.tolist() == [["q1", "a"], ["q1", "b"], ["q2", "b"]]
    assert long["score"].tolist() == [1.0, 0.0, 1.0] and long["cost"].tolist() == [2.0, 3.0, 4.0]
    assert long["query_query_score"].tolist() == [0.5, 0.5, 0.25]
    assert long["query_score"].tolist() == [7, 7, 8]
    assert "'score'" in caplog.text and "'query_query_score'" in caplog.text
    back = load_generic(write_long(d, tmp_path / "d.csv"))
    np.testing.assert_array_equal(back.scores, d.scores)
    np.testing.assert_array_equal(back.costs, d.costs)
    assert back.llm_names == ["a", "b"]
    assert back.queries["query_model"].tolist() == ["judge", "judge"]
