"""Precomputed embedding tables that cannot serve a router are refused when read, naming
the file (and row): a missing or empty query id (a parquet null was kept under a float NaN id
no query matches, and exporting the encoder failed with a bare TypeError), a table of width 0
or without rows, and values that are not real numbers (complex: the imaginary parts were
dropped; booleans: read as 0/1)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.encoders import PrecomputedEncoder, get_encoder
from recsys_router.encoders.state import encoder_from_state, encoder_state
from recsys_router.errors import DataValidationError


def _refused(path, needle: str, source=None) -> None:
    with pytest.raises(DataValidationError) as info:
        get_encoder(f"precomputed:{path}")
    msg = str(info.value)
    assert msg.startswith(f"{source or path}") and needle in msg and "\n" not in msg, msg


def _npy(tmp_path, arr, ids: str | bytes, ids_name="e.ids.txt"):
    np.save(tmp_path / "e.npy", arr)
    side = tmp_path / ids_name
    side.write_bytes(ids if isinstance(ids, bytes) else ids.encode())
    return tmp_path / "e.npy", side


@pytest.mark.parametrize("ids, row, shown", [
    (["q1", None, "q3"], 1, "None"),      # a parquet null
    (["q1", "q2", ""], 2, "''"),
    (["  ", "q2", "q3"], 0, "'  '"),      # blank
])
@pytest.mark.parametrize("layout", ["list-column", "numeric-columns"])
def test_parquet_missing_or_empty_query_id_names_file_and_row(tmp_path, ids, row, shown, layout):
    path = tmp_path / "e.parquet"
    if layout == "list-column":
        pd.DataFrame({"query_id": ids, "embedding": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]}) \
            .to_parquet(path)
    else:
        pd.DataFrame({"query_id": ids, "e0": [1.0, 0.0, 1.0], "e1": [0.0, 1.0, 1.0]}) \
            .to_parquet(path)
    _refused(path, f"row {row}, column 'query_id': missing or empty query_id {shown}; "
                   "expected a non-empty id")


def test_parquet_list_valued_query_id_is_refused(tmp_path):
    path = tmp_path / "e.parquet"
    pd.DataFrame({"query_id": [["a"], ["b"]], "embedding": [[1.0], [2.0]]}).to_parquet(path)
    _refused(path, "row 0, column 'query_id': missing or empty query_id None")


@pytest.mark.parametrize("ids, name, row", [
    (b"q1\n\nq3\n", "e.ids.txt", 2),            # an empty line between ids (lines from 1)
    (b"q1\nq2\n \n", "e.ids.txt", 3),           # a blank last id (trailing empty lines go)
    (json.dumps(["q1", "q2", ""]).encode(), "e.ids.json", 3),
])
def test_sidecar_empty_query_id_names_ids_file_and_line(tmp_path, ids, name, row):
    npy, side = _npy(tmp_path, np.eye(3, dtype=np.float32), ids, name)
    _refused(npy, f"row {row}, column 'query_id': missing or empty query_id", source=side)


def test_ids_of_an_accepted_table_are_strings_and_export(tmp_path):
    """The good case around the checks: ids stay as written, the encoder exports."""
    path = tmp_path / "e.parquet"
    pd.DataFrame({"query_id": ["q1", "q2"], "embedding": [[1.0, 0.0], [0.0, 1.0]]}) \
        .to_parquet(path)
    enc = PrecomputedEncoder(path)
    assert enc.table()[0] == ["q1", "q2"]
    info, arrays = encoder_state(enc)
    back = encoder_from_state(info, arrays, "enc")
    np.testing.assert_array_equal(back.encode(None, ["q2"]), [[0.0, 1.0]])


@pytest.mark.parametrize("shape", [(2, 0), (0, 3)])
def test_npy_without_width_or_rows_is_refused(tmp_path, shape):
    npy, _ = _npy(tmp_path, np.zeros(shape, np.float32), "q1\nq2\n"[:3 * shape[0]])
    _refused(npy, f"an embedding matrix of shape {shape}; expected at least one query and one "
                  "number per query")


def test_parquet_of_empty_embeddings_is_refused(tmp_path):
    path = tmp_path / "e.parquet"
    pd.DataFrame({"query_id": ["q1", "q2"], "embedding": [[], []]}).to_parquet(path)
    _refused(path, "an embedding matrix of shape (2, 0)")


def test_in_memory_table_of_width_zero_is_refused():
    with pytest.raises(DataValidationError, match=r"shape \(1, 0\); expected at least one"):
        PrecomputedEncoder(None, table=(["a"], np.zeros((1, 0), np.float32)))


@pytest.mark.parametrize("arr", [np.array([[1 + 5j, 2], [3, 4 - 7j]], dtype=np.complex64),
                                 np.array([[True, False], [False, True]])],
                         ids=["complex", "bool"])
def test_npy_of_complex_or_bool_values_is_refused(tmp_path, arr):
    npy, _ = _npy(tmp_path, arr, "q1\nq2\n")
    _refused(npy, f"embedding matrix of dtype {arr.dtype}; expected numbers (an integer or "
                  "float dtype)")


def test_parquet_bool_values_are_refused(tmp_path):
    cols = tmp_path / "cols.parquet"
    pd.DataFrame({"query_id": ["q1", "q2"], "e0": [1.0, 2.0], "flag": [True, False]}) \
        .to_parquet(cols)
    _refused(cols, "non-numeric: ['flag']")
    lists = tmp_path / "lists.parquet"
    pd.DataFrame({"query_id": ["q1", "q2"], "embedding": [[True, False], [False, True]]}) \
        .to_parquet(lists)
    _refused(lists, "row 0, column 'embedding': embedding of query 'q1' is not a list of "
                    "numbers (values of dtype bool)")


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float16, np.float64])
def test_integer_and_float_matrices_still_load(tmp_path, dtype):
    arr = np.array([[1, 2], [3, 4]], dtype=dtype)
    npy, _ = _npy(tmp_path, arr, "q1\nq2\n")
    out = PrecomputedEncoder(npy).encode(None, ["q2", "q1"])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[3.0, 4.0], [1.0, 2.0]])
