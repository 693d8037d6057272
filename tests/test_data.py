"""Tests of RoutingData (recsys_router.data): construction, validation, views, operations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError

NAN = np.nan


def _small(costs=True) -> RoutingData:
    q = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["one", "two", "three"],
                      "task": ["t1", "t2", "t1"]})
    llms = pd.DataFrame({"name": ["a", "b"], "input_price": [1.0, 2.0], "size": [7, 70]})
    s = [[1, 0.5], [0, NAN], [1, 0.3]]
    c = [[1, 2], [3, NAN], [5, 4]] if costs else None
    return RoutingData(q, llms, s, c, name="small", source="mem")


# ---------------------------------------------------------------- construction
def test_construction_defaults_and_dtypes():
    d = _small()
    assert d.shape == (3, 2) and len(d) == 3 and d.n_queries == 3 and d.n_llms == 2
    assert d.scores.dtype == np.float32 and d.costs.dtype == np.float32
    assert d.query_ids == ["q1", "q2", "q3"] and d.llm_names == ["a", "b"]
    assert d.texts == ["one", "two", "three"] and d.has_text
    assert list(d.queries.columns[:4]) == ["query_id", "text", "task", "split"]
    assert d.queries["split"].isna().all()
    assert np.isnan(d.llms["output_price"]).all() and d.llms["size"].tolist() == [7.0, 70.0]
    assert d.observed.sum() == 5 and d.density == pytest.approx(5 / 6)
    assert not d.is_binary
    np.testing.assert_array_equal(d.llm_index(["b", "a"]), [1, 0])
    with pytest.raises(KeyError, match="unknown LLM"):
        d.llm_index(["zz"])
    ids_only = RoutingData([1, 2], ["x"], [[1], [0]])
    assert ids_only.query_ids == ["1", "2"] and ids_only.is_binary and not ids_only.has_text
    assert "queries=2" in repr(ids_only)


# ---------------------------------------------------------------- validation
def test_non_finite_score_named():
    with pytest.raises(DataValidationError, match="non-finite score inf for query 'q2' and LLM 'b'"):
        RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, np.inf]], source="f.csv")
    with pytest.raises(DataValidationError, match="f.csv, row 1, column 'b'"):
        RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, -np.inf]], source="f.csv")


@pytest.mark.parametrize("bad", [-0.5, np.inf])
def test_bad_cost_named(bad):
    with pytest.raises(DataValidationError, match=r"invalid cost .* query 'q1' and LLM 'b'.*>= 0"):
        RoutingData(["q1"], ["a", "b"], [[1, 0]], [[0.1, bad]])


def test_bad_values_in_long_table_named():
    df = pd.DataFrame({"query_id": ["a", "b", "c"], "model": ["x", "x", "x"],
                       "score": [1.0, "oops", 0.0]})
    with pytest.raises(DataValidationError, match=r"row 2, column 'score': score 'oops' is not a"):
        RoutingData.from_long(df, row_offset=1)
    df = pd.DataFrame({"query_id": ["a", "b"], "model": ["x", "x"], "score": [1.0, np.nan]})
    with pytest.raises(DataValidationError, match="row 1, column 'score'"):
        RoutingData.from_long(df)
    for cost in (-1.0, np.inf, "free"):
        df = pd.DataFrame({"query_id": ["a", "b"], "model": ["x", "x"], "score": [1.0, 0.0],
                           "cost": [0.5, cost]})
        with pytest.raises(DataValidationError, match=r"row 1, column 'cost': cost .* >= 0"):
            RoutingData.from_long(df)
    df = pd.DataFrame({"query_id": ["a", None], "model": ["x", "x"], "score": [1.0, 0.0]})
    with pytest.raises(DataValidationError, match=r"row 1, column 'query_id': empty query_id"):
        RoutingData.from_long(df)


def _dups():
    return pd.DataFrame({
        "query_id": ["a", "a", "a", "b", "b", "b", "b"],
        "model":    ["x", "x", "y", "x", "y", "y", "y"],
        "score":    [1.0, 0.0, 0.5, 0.25, 0.2, 0.4, 0.9],
        "cost":     [0.1, 0.3, 0.2, NAN, 1.0, NAN, 3.0]})


def test_duplicate_records_error_names_rows():
    with pytest.raises(DataValidationError, match=r"row 1: duplicate record for query 'a' and LLM "
                                                  r"'x' \(also at row 0\).*\(3 duplicate records\)"):
        RoutingData.from_long(_dups(), source="long.csv")


@pytest.mark.parametrize("mode,scores,costs", [
    # (a,x): 1.0/0.0 costs .1/.3 ; (b,y): .2/.4/.9 costs 1/NaN/3 ; (a,y) .5/.2 ; (b,x) .25/NaN
    ("mean", [[0.5, 0.5], [0.25, 0.5]], [[0.2, 0.2], [NAN, 2.0]]),
    ("first", [[1.0, 0.5], [0.25, 0.2]], [[0.1, 0.2], [NAN, 1.0]]),
    ("last", [[0.0, 0.5], [0.25, 0.9]], [[0.3, 0.2], [NAN, 3.0]]),
])
def test_duplicate_merging(mode, scores, costs):
    d = RoutingData.from_long(_dups(), duplicates=mode)
    assert d.query_ids == ["a", "b"] and d.llm_names == ["x", "y"]
    np.testing.assert_allclose(d.scores, scores, rtol=1e-6)
    np.testing.assert_allclose(d.costs, costs, rtol=1e-6)
    assert d.meta["merged_duplicates"] == 3
    with pytest.raises(ValueError, match="duplicates must be one of"):
        RoutingData.from_long(_dups(), duplicates="max")


def test_require_observed_names_query_and_llm():
    s = [[1, NAN], [NAN, NAN]]
    with pytest.raises(DataValidationError, match=r"query 'q2' has no observed score \(1 such"):
        RoutingData(["q1", "q2"], ["a", "b"], s, require_observed=True)
    with pytest.raises(DataValidationError, match=r"LLM 'b' has no observed score \(1 such LLMs\)"):
        RoutingData(["q1", "q2"], ["a", "b"], [[1, NAN], [0, NAN]], require_observed=True)
    assert RoutingData(["q1", "q2"], ["a", "b"], s).observed.sum() == 1  # allowed by default


def test_shape_errors():
    with pytest.raises(DataValidationError, match=r"scores has shape \(2, 3\), expected \(2, 2\)"):
        RoutingData(["q1", "q2"], ["a", "b"], np.zeros((2, 3)))
    with pytest.raises(DataValidationError, match="scores must be a 2-D"):
        RoutingData(["q1", "q2"], ["a"], [1.0, 0.0])
    with pytest.raises(DataValidationError, match=r"costs has shape \(1, 2\), expected \(2, 2\)"):
        RoutingData(["q1", "q2"], ["a", "b"], np.zeros((2, 2)), np.zeros((1, 2)))
    with pytest.raises(DataValidationError, match="scores.*ragged"):
        RoutingData(["q1", "q2"], ["a", "b"], [[1.0, 0.0], [1.0]])


def test_empty_inputs():
    with pytest.raises(DataValidationError, match="no queries"):
        RoutingData([], ["a"], np.zeros((0, 1)))
    with pytest.raises(DataValidationError, match="no LLMs"):
        RoutingData(["q"], [], np.zeros((1, 0)))
    with pytest.raises(DataValidationError, match="no records"):
        RoutingData.from_long(pd.DataFrame({"query_id": [], "model": [], "score": []}))


def test_duplicate_and_missing_ids():
    with pytest.raises(DataValidationError, match=r"row 2, column 'query_id': duplicate query_id 'q1'"):
        RoutingData(["q1", "q2", "q1"], ["a"], [[1], [1], [1]])
    with pytest.raises(DataValidationError, match=r"row 1, column 'name': duplicate LLM name 'a'"):
        RoutingData(["q1"], ["a", "a"], [[1, 1]])
    with pytest.raises(DataValidationError, match=r"row 1, column 'query_id': missing query_id"):
        RoutingData(pd.DataFrame({"query_id": ["q1", None]}), ["a"], [[1], [1]])
    with pytest.raises(DataValidationError, match=r"row 0, column 'query_id': missing query_id"):
        RoutingData(["", "q2"], ["a"], [[1], [1]])
    with pytest.raises(DataValidationError, match=r"row 1, column 'name': missing LLM name"):
        RoutingData(["q1"], pd.DataFrame({"name": ["a", None]}), [[1, 1]])
    with pytest.raises(DataValidationError, match="negative input_price -1.0 for LLM 'b'"):
        RoutingData(["q1"], pd.DataFrame({"name": ["a", "b"], "input_price": [1, -1]}), [[1, 1]])


def test_missing_columns():
    with pytest.raises(DataValidationError, match="missing required column 'score'"):
        RoutingData.from_long(pd.DataFrame({"query_id": ["a"], "model": ["x"]}))
    with pytest.raises(DataValidationError, match="no 'query_id' column"):
        RoutingData(pd.DataFrame({"id": ["a"]}), ["x"], [[1]])
    with pytest.raises(DataValidationError, match="LLM table has no 'name' column"):
        RoutingData(["a"], pd.DataFrame({"model": ["x"]}), [[1]])


def test_from_long_llm_table_and_query_columns():
    df = pd.DataFrame({"query_id": ["a", "a", "b"], "model": ["x", "y", "x"], "score": [1, 0, 0.5],
                       "task": ["t", None, "u"], "query_text": ["hi", "hi", "yo"],
                       "extra": [None, 7, None]})
    llms = pd.DataFrame({"name": ["y", "x", "z"], "input_price": [1, 2, 3]})
    d = RoutingData.from_long(df, llms=llms)
    assert d.llm_names == ["y", "x", "z"]  # order of the table; z has no records
    np.testing.assert_array_equal(d.scores, [[0, 1, NAN], [NAN, 0.5, NAN]])
    assert d.costs is None
    assert d.queries["task"].tolist() == ["t", "u"]
    assert d.texts == ["hi", "yo"]  # query_text is read as text (round trip with to_long)
    assert d.queries["extra"].tolist()[0] == 7 and pd.isna(d.queries["extra"].tolist()[1])
    bad = pd.DataFrame({"query_id": ["a"], "model": ["w"], "score": [1.0]})
    with pytest.raises(DataValidationError, match="LLM 'w' is not in the LLM table"):
        RoutingData.from_long(bad, llms=llms)
    with pytest.raises(DataValidationError, match="duplicate LLM name 'x'"):
        RoutingData.from_long(df, llms=pd.DataFrame({"name": ["x", "y", "x"]}))


# ---------------------------------------------------------------- views
def test_to_dense_and_csr():
    d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [NAN, 0.5]], [[0.1, 0.2], [NAN, 0.3]])
    np.testing.assert_array_equal(d.to_dense(fill=-1), [[1, 0], [-1, 0.5]])
    assert np.isnan(d.to_dense()[1, 0])
    m = d.to_csr()
    assert isinstance(m, sparse.csr_matrix) and m.shape == (2, 2)
    assert m.nnz == 3  # the observed 0 is stored explicitly
    assert m.indptr.tolist() == [0, 2, 3] and m.indices.tolist() == [0, 1, 1]
    np.testing.assert_allclose(m.data, [1, 0, 0.5])
    np.testing.assert_allclose(d.to_csr("costs").data, [0.1, 0.2, 0.3], rtol=1e-6)
    with pytest.raises(ValueError, match="no costs"):
        RoutingData(["q"], ["a"], [[1]]).to_csr("costs")


def test_to_long_round_trip():
    d = _small()
    long = d.to_long()
    assert long.columns.tolist() == ["query_id", "model", "score", "cost", "query_text", "task"]
    assert long[["query_id", "model"]].values.tolist() == [["q1", "a"], ["q1", "b"], ["q2", "a"],
                                                           ["q3", "a"], ["q3", "b"]]
    np.testing.assert_allclose(long["score"], [1, 0.5, 0, 1, 0.3], rtol=1e-6)
    back = RoutingData.from_long(long)
    np.testing.assert_array_equal(back.scores, d.scores)
    np.testing.assert_array_equal(back.costs, d.costs)
    assert back.texts == d.texts and back.tasks.tolist() == ["t1", "t2", "t1"]


def test_selection_vectors_by_hand():
    b = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [NAN, 1]])
    np.testing.assert_array_equal(b.selection_vectors(), [[1, 0], [0, 1]])
    c = RoutingData(["q1", "q2", "q3"], ["a", "b", "c"],
                    [[0.9, 0.86, 0.5], [0.0, 0.0, NAN], [0.4, 0.37, 0.39]])
    # thresholds 0.95 * best: 0.855 | best 0 -> none | 0.38
    np.testing.assert_array_equal(c.selection_vectors(0.95), [[1, 1, 0], [0, 0, 0], [1, 0, 1]])
    np.testing.assert_array_equal(c.selection_vectors(1.0), [[1, 0, 0], [0, 0, 0], [1, 0, 0]])
    assert c.selection_vectors().dtype == np.float32


def test_llm_summary_and_mean_costs_by_hand():
    d = _small()
    s = d.llm_summary()
    assert s["llm"].tolist() == ["a", "b"] and s["n_observed"].tolist() == [3, 2]
    np.testing.assert_allclose(s["mean_score"], [2 / 3, 0.4], rtol=1e-6)
    np.testing.assert_allclose(s["std_score"], [np.sqrt(2 / 9), 0.1], rtol=1e-5)
    np.testing.assert_allclose(s["mean_cost"], [3.0, 3.0])
    np.testing.assert_allclose(d.mean_costs(), [3.0, 3.0])
    assert s["input_price"].tolist() == [1.0, 2.0] and s["size"].tolist() == [7.0, 70.0]
    assert np.isnan(_small(costs=False).mean_costs()).all()


def test_summary_by_hand():
    out = _small().summary()
    assert out["n_queries"] == 3 and out["n_llms"] == 2 and out["n_observed"] == 5
    assert out["score_min"] == 0.0 and out["score_max"] == 1.0
    assert out["tasks"] == {"t1": 2, "t2": 1} and out["splits"] == {}
    assert out["has_costs"] and out["has_text"] and not out["binary_scores"]
    assert out["simulated"] is False and out["name"] == "small" and out["source"] == "mem"


# ---------------------------------------------------------------- operations
def test_subset_by_ids_mask_index():
    d = _small()
    by_id = d.subset(["q3", "q1"], ["b"])
    assert by_id.query_ids == ["q3", "q1"] and by_id.llm_names == ["b"]
    np.testing.assert_allclose(by_id.scores, [[0.3], [0.5]], rtol=1e-6)
    np.testing.assert_allclose(by_id.costs, [[4], [2]])
    by_mask = d.subset(np.array([True, False, True]))
    assert by_mask.query_ids == ["q1", "q3"] and by_mask.n_llms == 2
    by_index = d.subset([1], [0, 1])
    assert by_index.query_ids == ["q2"] and by_index.texts == ["two"]
    assert by_index.llms["input_price"].tolist() == [1.0, 2.0]
    with pytest.raises(KeyError, match="unknown query"):
        d.subset(["q9"])
    with pytest.raises(ValueError, match="mask has shape"):
        d.subset(np.array([True, False]))
    with pytest.raises(IndexError):
        d.subset([5])


def test_concat_with_disjoint_llms():
    a = RoutingData(["q1"], pd.DataFrame({"name": ["x"], "size": [7]}), [[1.0]], [[0.1]], name="A")
    b = RoutingData(["q2", "q3"], ["y"], [[0.0], [1.0]], name="B")
    c = RoutingData.concat([a, b])
    assert c.query_ids == ["q1", "q2", "q3"] and c.llm_names == ["x", "y"]
    np.testing.assert_array_equal(c.scores, [[1, NAN], [NAN, 0], [NAN, 1]])
    np.testing.assert_allclose(c.costs, [[0.1, NAN], [NAN, NAN], [NAN, NAN]], rtol=1e-6)
    assert c.llms["size"].tolist()[0] == 7.0 and c.name == "A+B"
    with pytest.raises(DataValidationError, match="duplicate query_id 'q1'"):
        RoutingData.concat([a, a])
    with pytest.raises(ValueError, match="at least one"):
        RoutingData.concat([])


def _grid(n=100):
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)],
                      "task": [f"t{i % 4}" for i in range(n)]})
    return RoutingData(q, ["a", "b"], np.random.default_rng(0).random((n, 2)))


def test_split_random_ratios():
    d = _grid()
    parts = d.split((0.8, 0.1, 0.1), seed=1)
    assert {k: len(v) for k, v in parts.items()} == {"train": 80, "val": 10, "test": 10}
    ids = [set(p.query_ids) for p in parts.values()]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert set.union(*ids) == set(d.query_ids)
    again = d.split((0.8, 0.1, 0.1), seed=1)
    assert all(again[k].query_ids == parts[k].query_ids for k in parts)
    assert d.split((0.8, 0.1, 0.1), seed=2)["test"].query_ids != parts["test"].query_ids
    two = d.split((0.7, 0.3), seed=0)
    assert sorted(two) == ["test", "train"] and len(two["train"]) == 70
    with pytest.raises(ValueError, match="summing to 1"):
        d.split((0.5, 0.2))


def test_split_by_column():
    q = pd.DataFrame({"query_id": list("abcd"), "split": ["train", "Validation", "test", "train"]})
    d = RoutingData(q, ["m"], [[1], [0], [1], [0]])
    parts = d.split(column="split")
    assert {k: v.query_ids for k, v in parts.items()} == {"train": ["a", "d"], "val": ["b"],
                                                          "test": ["c"]}
    with pytest.raises(DataValidationError, match="no split column 'fold'"):
        d.split(column="fold")
    q2 = q.assign(split=["train", None, "test", "train"])
    with pytest.raises(DataValidationError, match="query 'b' has no value in split column"):
        RoutingData(q2, ["m"], [[1], [0], [1], [0]]).split(column="split")


def test_split_ood_tasks():
    d = _grid()
    parts = d.split((0.8, 0.1, 0.1), ood_tasks=["t3"], seed=0)
    assert set(parts["test"].tasks) == {"t3"} and len(parts["test"]) == 25
    assert "t3" not in set(parts["train"].tasks) | set(parts["val"].tasks)
    # remaining 75 queries split 8:1 -> round(75 * 8 / 9) = 67 train
    assert len(parts["train"]) == 67 and len(parts["val"]) == 8
    with pytest.raises(DataValidationError, match=r"unknown OOD task\(s\) \['t9'\]"):
        d.split(ood_tasks=["t9"])


def test_split_stratify_task():
    d = _grid()
    parts = d.split((0.6, 0.2, 0.2), stratify_task=True, seed=0)
    for k, share in (("train", 15), ("val", 5), ("test", 5)):  # 25 queries per task
        counts = pd.Series(parts[k].tasks).value_counts().to_dict()
        assert counts == {f"t{i}": share for i in range(4)}


def test_kfold_partitions_queries():
    d = _grid(23)
    folds = list(d.kfold(4, seed=0))
    assert len(folds) == 4
    tests = [set(te.query_ids) for _, te in folds]
    assert sorted(len(t) for t in tests) == [5, 6, 6, 6]
    assert set.union(*tests) == set(d.query_ids) and sum(map(len, tests)) == 23
    for tr, te in folds:
        assert set(tr.query_ids) == set(d.query_ids) - set(te.query_ids)
    assert [t.query_ids for _, t in d.kfold(4, seed=0)] == [t.query_ids for _, t in folds]
    with pytest.raises(ValueError, match="k must be in"):
        list(d.kfold(1))


def test_from_long_categorical_ids_and_mixed_types():
    df = pd.DataFrame({
        "query_id": pd.Categorical(["b", "a", "b"], categories=["z", "b", "a"]),  # 'z' unused
        "model": pd.Categorical(["y", "x", "x"], categories=["x", "y"]),
        "score": np.array([1.0, 0.0, 0.5], dtype=np.float32)})
    d = RoutingData.from_long(df)
    assert d.query_ids == ["b", "a"] and d.llm_names == ["x", "y"]  # category order, z dropped
    np.testing.assert_array_equal(d.scores, [[0.5, 1.0], [0.0, NAN]])
    # 1 and "1" would be one query id once read as text: refused, naming both rows (they
    # were merged silently, as a JSONL file's number and text ids were)
    mixed = pd.DataFrame({"query_id": [1, "1"], "model": ["x", "y"], "score": [1.0, 0.0]},
                         dtype=object).astype({"score": float})
    with pytest.raises(DataValidationError, match=r"row 1, column 'query_id': query_id 1 \(row "
                                                  r"0, an integer\) and '1' \(row 1, a text\)"):
        RoutingData.from_long(mixed)
    # equal numbers of one kind are one id: 1 and np.int64(1)
    m = RoutingData.from_long(pd.DataFrame({"query_id": [1, np.int64(1)], "model": ["x", "y"],
                                            "score": [1.0, 0.0]}, dtype=object
                                           ).astype({"score": float}))
    assert m.query_ids == ["1"] and m.scores.tolist() == [[1.0, 0.0]]


class _Row(list):
    """A list subclass (refused like a list)."""


@pytest.mark.parametrize("column", ["query_id", "model", "task", "split"])
def test_non_scalar_id_values_named_by_first_row_in_object_columns(column):
    """True object columns (strings mixed with numbers, None, and a few non-scalar values
    late in the table): the first non-scalar value's row and type are named, as the per-row
    isinstance check named them."""
    n = 5000
    rng = np.random.default_rng(1)
    vals = np.empty(n, dtype=object)
    vals[:] = [f"v{i % 7}" if i % 3 else i % 5 for i in range(n)]
    vals[rng.choice(n, 40, replace=False)] = None if column in ("task", "split") else "x"
    first = 3210  # rows 3210, 3900, 4500: a list subclass, a tuple, an array
    vals[first], vals[3900], vals[4500] = _Row(["a"]), ("b", 1), np.array([1, 2])
    df = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "model": "m", "score": 1.0})
    df[column] = pd.Series(vals, dtype=object)
    assert df[column].dtype == object
    expected = (rf"t\.csv, row {first + 2}, column '{column}': _Row value \"\['a'\]\"; "
                r"expected a single string or number")
    with pytest.raises(DataValidationError, match=expected):
        RoutingData.from_long(df, source="t.csv", row_offset=2)
    # the same values as an object column without them load (mixed str/int/None)
    vals[[first, 3900, 4500]] = "ok"
    df[column] = pd.Series(vals, dtype=object)
    RoutingData.from_long(df, source="t.csv", duplicates="first", labels="first")


def test_scalar_check_matches_the_per_row_isinstance_check():
    """Every first bad row and message equals the per-row form's, on random object columns."""
    from recsys_router.long_table import _check_scalar

    def per_row(col):  # the reference: isinstance on every value
        bad = [isinstance(v, (list, tuple, dict, set, np.ndarray)) for v in col]
        return next((i for i, b in enumerate(bad) if b), None)

    pool = ["s", 3, 2.5, None, np.nan, True, b"x", np.int64(4), pd.NA, [1], (1,), {"k": 1},
            {1}, np.zeros(2), _Row(), frozenset({1}), "ab"]
    rng = np.random.default_rng(0)
    for trial in range(300):
        size = int(rng.integers(1, 40))
        p = np.ones(len(pool)) if trial % 2 else np.r_[np.full(9, 30.0), np.ones(len(pool) - 9)]
        picks = rng.choice(len(pool), size, p=p / p.sum())
        col = pd.Series([pool[i] for i in picks], dtype=object)
        want = per_row(col)
        if want is None:
            _check_scalar(col, "task", "f", 0)
            continue
        with pytest.raises(DataValidationError) as err:
            _check_scalar(col, "task", "f", 0)
        assert err.value.row == want
        v = col.iloc[want]
        assert str(err.value).endswith(f"{type(v).__name__} value {str(v)[:60]!r}; expected a "
                                       "single string or number")


def test_split_column_labels_trimmed_and_checked():
    # "train " and " TEST" are train/test after trimming; nothing else may pass silently
    q = pd.DataFrame({"query_id": list("abcd"), "split": ["train ", " TEST", "dev", "train"]})
    parts = RoutingData(q, ["m"], [[1], [0], [1], [0]]).split(column="split")
    assert {k: v.query_ids for k, v in parts.items()} == {"train": ["a", "d"], "test": ["b"],
                                                          "val": ["c"]}
    for bad in ("training", "eval"):
        q2 = q.assign(split=["train", "test", bad, "train"])
        with pytest.raises(DataValidationError,
                           match=rf"row 2, column 'split': query 'c' has split label '{bad}'.*"
                                 r"train, val, test"):
            RoutingData(q2, ["m"], [[1], [0], [1], [0]]).split(column="split")
