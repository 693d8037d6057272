"""Cells of a decision log: the JSON columns ``candidates``, ``probs`` and ``costs`` read
from an untrusted file (``recsys-router ope --log``), each within a size cap, and its
``decision_id``, ``propensity`` and ``task`` columns, with errors that name the file, row,
decision and column.

Example
-------
>>> probs_json('{"a": 0.25, "b": 0.75}', "log.csv: row 0")
'{"a": 0.25, "b": 0.75}'
>>> chosen_cost('{"a": 0.1, "b": null}', "b", "log.csv: row 0")
nan
>>> chosen_cost("[0.1]", "a", "log.csv: row 3 (decision_id 'd3')")
Traceback (most recent call last):
...
ValueError: log.csv: row 3 (decision_id 'd3'): costs '[0.1]' is not a JSON object of LLM names to costs (numbers, or null when unknown)
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ..data import MAX_TASK_CHARS
from ..json_keys import RepeatedKey, unique_keys
from ..long_columns import _boolean_rows
from ..numeric import shown
from .ope_inputs import bad_propensities, propensity_problem

__all__ = ["MAX_CELL_CHARS", "PROBS_TOL", "is_missing", "json_cell", "is_number", "chosen_cost", "probs_json",
           "check_probs", "check_ids", "log_propensities", "task_cell"]

#: most characters one JSON cell of a decision log (``candidates``, ``probs``, ``costs``) may
#: hold: thousands of LLM names fit; a longer cell is refused before it is parsed
MAX_CELL_CHARS = 1 << 20

#: how far a row's ``probs`` may sum from 1, and its chosen LLM's probability differ from the
#: row's ``propensity``: a logger writes both from the same float64 numbers (exact), so this
#: only leaves room for numbers written out to six or more significant digits
PROBS_TOL = 1e-6


def is_missing(v) -> bool:
    """True for a scalar "no value": None, NaN, ``pd.NA`` or ``pd.NaT`` (nullable dtypes, e.g.
    a log re-saved after ``DataFrame.convert_dtypes()``); a list or dict is a value."""
    if v is None:
        return True
    if not pd.api.types.is_scalar(v):
        return False
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError, ArithmeticError):  # a signalling Decimal NaN: a bad value
        return False


def json_cell(raw, where: str, column: str, expected: str):
    """The value of one JSON cell of a decision log: a string parsed as JSON (at most
    :data:`MAX_CELL_CHARS` characters; a key given twice or nesting too deep to parse is
    refused), anything else (a list or dict read from parquet) as it is. An error names
    ``where`` (file, row, decision), the column and what was ``expected``."""
    if not isinstance(raw, str):
        return raw
    if len(raw) > MAX_CELL_CHARS:
        raise ValueError(f"{where}: {column} holds {len(raw):,} characters, more than the "
                         f"{MAX_CELL_CHARS:,} a cell may hold (expected {expected})")
    try:
        return json.loads(raw, object_pairs_hook=unique_keys)
    except RecursionError:
        raise ValueError(f"{where}: {column} is JSON nested too deeply to read "
                         f"(expected {expected})") from None
    except RepeatedKey as exc:
        raise ValueError(f"{where}: {column} {raw[:80]!r} names the key {exc.key!r} twice "
                         f"(expected {expected})") from None
    except ValueError:
        raise ValueError(f"{where}: {column} {raw[:80]!r} is not {expected}") from None


def is_number(v) -> bool:
    """A JSON or numpy number, not a boolean."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def chosen_cost(raw, chosen: str, where: str) -> float:
    """The chosen LLM's predicted cost from a log row's ``costs`` (JSON object LLM -> cost;
    ``null`` or a missing cell: none given); NaN when unknown. Anything else is refused."""
    what = "a JSON object of LLM names to costs (numbers, or null when unknown)"
    if is_missing(raw):
        return np.nan
    d = json_cell(raw, where, "costs", what)
    if d is None:
        return np.nan
    if not isinstance(d, dict) or not all(isinstance(k, str) and (v is None or is_number(v))
                                          for k, v in d.items()):
        raise ValueError(f"{where}: costs {str(raw)[:80]!r} is not {what}")
    v = d.get(chosen)
    v = np.nan if v is None else float(v)
    if np.isinf(v):
        raise ValueError(f"{where}: costs gives the chosen LLM {chosen!r} the cost {v!r}; "
                         "expected a finite number (or null when unknown)")
    return v


def probs_json(raw, where: str):
    """A log row's ``probs`` (JSON object LLM -> choice probability) as canonical JSON, or
    None when the row has none (its support cannot be checked)."""
    if is_missing(raw):
        return None
    what = "a JSON object of LLM names to choice probabilities in [0, 1]"
    if isinstance(raw, str):
        d = json_cell(raw, where, "probs", what)
    else:
        try:
            d = dict(raw)
        except (TypeError, ValueError):
            d = None
    if not isinstance(d, dict) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
            and 0 <= v <= 1 for k, v in d.items()):
        raise ValueError(f"{where}: probs {str(raw)[:80]!r} is not {what}")
    return json.dumps(d)


def check_probs(probs: dict, chosen: str, propensity: float, where: str) -> None:
    """A row's logging probabilities must be a distribution (summing to 1 within
    :data:`PROBS_TOL`; an LLM it leaves out has probability 0) that gives the logged
    ``chosen`` LLM its ``propensity`` (within :data:`PROBS_TOL`): OPE divides by the
    propensity and checks support on the probabilities, so the two must describe one policy.

    Example
    -------
    >>> check_probs({"a": 0.5, "b": 0.5}, "a", 0.5, "log.csv: row 0")
    >>> check_probs({"a": 0.0, "b": 1.0}, "a", 0.5, "log.csv: row 2 (decision_id 'd2')")
    Traceback (most recent call last):
    ...
    ValueError: log.csv: row 2 (decision_id 'd2'): probs give the chosen LLM 'a' probability 0.0, but its propensity is 0.5; the two must agree (within 1e-06)
    """
    total = float(np.sum(np.asarray(list(probs.values()), np.float64)))
    if abs(total - 1.0) > PROBS_TOL:
        raise ValueError(f"{where}: probs {json.dumps(probs)[:80]!r} sum to {total!r}, not 1 "
                         f"(within {PROBS_TOL:g}); they are the logging policy's choice "
                         "probabilities over the LLMs")
    mine = float(probs.get(chosen, 0.0))
    if abs(mine - float(propensity)) > PROBS_TOL:
        raise ValueError(f"{where}: probs give the chosen LLM {chosen!r} probability {mine!r}, but "
                         f"its propensity is {float(propensity)!r}; the two must agree "
                         f"(within {PROBS_TOL:g})")


def check_ids(ids: pd.Series, source: str) -> None:
    """Every decision of a log has an id, given once: a missing (or blank) or repeated
    ``decision_id`` is an error naming its row as given (0-based, decisions without feedback
    counted) and, when repeated, the row that holds it first."""
    blank = ids.map(lambda v: is_missing(v) or (isinstance(v, str) and not v.strip()))
    blank = blank.to_numpy(dtype=bool)
    if blank.any():
        i = int(np.flatnonzero(blank)[0])
        raise ValueError(f"{source}: row {i}: column 'decision_id' is empty "
                         f"({shown(ids.iloc[i])}); every decision needs its id "
                         f"({int(blank.sum())} such rows)")
    keys = ids.astype(str)       # the id each decision's query carries
    again = keys.duplicated(keep="first").to_numpy()
    if again.any():
        i = int(np.flatnonzero(again)[0])
        first = int(np.flatnonzero(keys.to_numpy()[:i] == keys.iloc[i])[0])
        raise ValueError(f"{source}: row {i} (decision_id {ids.iloc[i]!r}): column "
                         f"'decision_id': the id of row {first} again; a decision is logged "
                         f"once ({int(again.sum())} repeated rows)")


def log_propensities(col: pd.Series, at) -> np.ndarray:
    """A decision log's ``propensity`` column (the decisions with feedback) as float64; a
    boolean, a value outside (0, 1] or one below
    :data:`~recsys_router.numeric.PROPENSITY_FLOOR` is an error at ``at(i)`` (file, row as
    given, decision)."""
    p = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
    flags = _boolean_rows(col)
    bad = flags | bad_propensities(p)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raw = col.iloc[i]
        raw = raw.item() if isinstance(raw, np.generic) else raw
        raise ValueError(f"{at(i)}: {propensity_problem(raw, p[i])} ({int(bad.sum())} such "
                         "rows); off-policy estimators and debiased losses divide by it")
    return p


def task_cell(raw, where: str) -> str | None:
    """A decision-log ``task`` cell: a label of at most :data:`MAX_TASK_CHARS` characters, or
    nothing (empty, None, NaN)."""
    if is_missing(raw) or raw == "":
        return None
    if not isinstance(raw, str):
        raise ValueError(f"{where}: column 'task': expected a task label (a string) or nothing, "
                         f"got {type(raw).__name__} {str(raw)[:80]!r}")
    if len(raw) > MAX_TASK_CHARS:
        raise ValueError(f"{where}: column 'task' holds {len(raw):,} characters; a task label "
                         f"has at most {MAX_TASK_CHARS:,}")
    return raw
