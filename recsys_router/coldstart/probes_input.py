"""Validated probe records of a new LLM (the input of ``Router.add_llm``).

A new LLM is described by its observed scores on a few probe queries. They arrive as a
``{query text: score}`` mapping, a :class:`~recsys_router.data.RoutingData` with a column
named after the LLM, or a long table (``query_id``, ``model``, ``score``, optional ``text``
and ``cost``). Everything is untrusted: every problem is a one-line error naming the probe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError

__all__ = ["probe_data", "check_llm_name", "check_strategy_label", "probe_weights", "MAX_PROBES",
           "MAX_NAME_LENGTH", "MAX_TEXT_LENGTH", "MAX_STRATEGY_LENGTH"]

#: most probe records one add may carry
MAX_PROBES = 100_000
#: longest accepted LLM name
MAX_NAME_LENGTH = 200
#: longest accepted probe text (characters), in every input form
MAX_TEXT_LENGTH = 100_000
#: longest probe-strategy label recorded as provenance (the cap ``POST /llms`` puts on it)
MAX_STRATEGY_LENGTH = 100


def check_llm_name(name) -> str:
    """The stripped LLM name, or ValueError when it is empty, too long or has control chars.

    Example
    -------
    >>> check_llm_name(" gpt-x ")
    'gpt-x'
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"LLM name must be a non-empty string, got {name!r}")
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"LLM name is {len(name)} characters long; at most {MAX_NAME_LENGTH} allowed")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"LLM name {name!r} contains a control character")
    return name


def check_strategy_label(label) -> str:
    """The stripped probe-strategy label recorded as an onboarded LLM's provenance, or
    ValueError when it is blank, longer than :data:`MAX_STRATEGY_LENGTH` characters, holds a
    control character (a line break would forge a log line) or cannot be UTF-8 encoded.
    The same bounds as ``POST /llms``'s ``strategy`` field, plus no control characters.

    Example
    -------
    >>> check_strategy_label(" informative ")
    'informative'
    >>> check_strategy_label("informative\\nforged")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: strategy 'informative\\nforged' contains a control character; ...
    """
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"strategy must be a non-empty label, got {str(label)[:40]!r}")
    label = label.strip()
    if len(label) > MAX_STRATEGY_LENGTH:
        raise ValueError(f"strategy is {len(label)} characters long; at most "
                         f"{MAX_STRATEGY_LENGTH} allowed")
    if any(ord(c) < 32 or ord(c) == 127 for c in label):
        raise ValueError(f"strategy {label!r} contains a control character; expected a short "
                         "printable label")
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"strategy {label!r} is not valid Unicode (it cannot be UTF-8 "
                         "encoded)") from None
    return label


def _number(v, what: str, *, nonneg: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise DataValidationError(f"{what} must be a number, got {type(v).__name__} {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise DataValidationError(f"{what} is {f}; expected a finite number")
    if nonneg and f < 0:
        raise DataValidationError(f"{what} is {f}; expected a cost >= 0")
    return f


def _from_mapping(name: str, scores: Mapping, costs: Mapping | None) -> RoutingData:
    texts, s, c = [], [], []
    for i, (text, v) in enumerate(scores.items()):
        if not isinstance(text, str) or not text.strip():
            raise DataValidationError(f"probe {i}: query text must be a non-empty string, got {text!r}")
        if len(text) > MAX_TEXT_LENGTH:
            raise DataValidationError(f"probe {i}: query text has {len(text)} characters; at most "
                                      f"{MAX_TEXT_LENGTH} allowed")
        texts.append(text)
        s.append(_number(v, f"probe {i} ({text[:40]!r}): score of {name!r}"))
        if costs is not None:
            if text not in costs:
                raise DataValidationError(f"probe {i} ({text[:40]!r}): no cost given for it "
                                          "(costs must cover every probe)")
            c.append(_number(costs[text], f"probe {i} ({text[:40]!r}): cost of {name!r}", nonneg=True))
    if costs is not None:
        extra = [k for k in costs if k not in scores]
        if extra:
            raise DataValidationError(f"cost given for unknown probe query {str(extra[0])[:60]!r} "
                                      "(not among the scored probes)")
    q = pd.DataFrame({"query_id": [f"probe-{i}" for i in range(len(texts))], "text": texts})
    return RoutingData(q, [name], np.asarray(s, np.float64)[:, None],
                       None if costs is None else np.asarray(c, np.float64)[:, None], name="probes")


def _check_texts(data: RoutingData) -> None:
    """Every probe text given is a non-blank string of at most :data:`MAX_TEXT_LENGTH`
    characters, as in the mapping form; a missing one (None/NaN) is left to ``add_llm``,
    which refuses it for routers that read text."""
    for i, text in enumerate(data.queries["text"]):
        if isinstance(text, str):
            if len(text) > MAX_TEXT_LENGTH:
                raise DataValidationError(f"probe query {data.query_ids[i]!r}: query text has "
                                          f"{len(text)} characters; at most {MAX_TEXT_LENGTH} "
                                          "allowed", source=data.source, row=i, column="text")
            if text.strip():
                continue
        elif pd.api.types.is_scalar(text) and pd.isna(text):
            continue
        raise DataValidationError(f"probe query {data.query_ids[i]!r}: query text must be a "
                                  f"non-empty string, got {text!r}", source=data.source, row=i,
                                  column="text")


def _column(name: str, data: RoutingData, costs) -> RoutingData:
    if costs is not None:
        raise TypeError("with a RoutingData of probes, costs come from its costs matrix; "
                        "do not pass costs separately")
    if name in data.llm_names:
        j = data.llm_names.index(name)
    elif data.n_llms == 1:
        j = 0
    else:
        raise DataValidationError(f"probe data has no column for LLM {name!r} (columns: "
                                  f"{data.llm_names[:10]})")
    _check_texts(data)
    s = data.scores[:, j].astype(np.float64)
    bad = np.flatnonzero(np.isnan(s))
    if bad.size:
        raise DataValidationError(f"probe query {data.query_ids[bad[0]]!r} has no score (NaN) for "
                                  f"{name!r}; every probe needs an observed score",
                                  source=data.source, row=int(bad[0]))
    c = None
    if data.costs is not None:
        c = data.costs[:, j].astype(np.float64)
        if np.isnan(c).any():
            c = None if np.isnan(c).all() else c
        if c is not None and np.isnan(c).any():
            i = int(np.flatnonzero(np.isnan(c))[0])
            raise DataValidationError(f"probe query {data.query_ids[i]!r} has a score but no cost "
                                      f"for {name!r}", source=data.source, row=i)
    keep = [k for k in ("query_id", "text", "task") if k in data.queries.columns]
    return RoutingData(data.queries[keep], [name], s[:, None], None if c is None else c[:, None],
                       name="probes", source=data.source)


def probe_data(name: str, scores, costs=None) -> RoutingData:
    """One-column :class:`RoutingData` of a new LLM's probe records, validated.

    Parameters
    ----------
    name : str
        The new LLM.
    scores : mapping, RoutingData or pandas.DataFrame
        ``{query text: score}``; or a RoutingData with a column ``name`` (or a single
        column); or a long table with ``query_id`` and ``score`` (rows of other ``model``
        values are ignored when a ``model`` column is present; ``text``/``cost`` optional).
    costs : mapping, optional
        ``{query text: cost}`` for the mapping form (every probe, cost >= 0).

    Returns
    -------
    RoutingData
        Queries = the probes (in the given order), one LLM column ``name``.

    Raises
    ------
    DataValidationError
        NaN/non-finite score, a missing cost, an empty or blank (whitespace-only) text,
        duplicate probes, too many.

    Example
    -------
    >>> probe_data("new", {"what is 2+2?": 1.0, "prove P != NP": 0.0}).scores.ravel().tolist()
    [1.0, 0.0]
    """
    name = check_llm_name(name)
    if isinstance(scores, RoutingData):
        if scores.n_queries > MAX_PROBES:   # before the per-probe checks
            raise DataValidationError(f"{scores.n_queries} probes given; at most {MAX_PROBES} "
                                      "allowed", source=scores.source)
        out = _column(name, scores, costs)
    elif isinstance(scores, pd.DataFrame):
        df = scores
        if "model" in df.columns:
            df = df[df["model"].astype(str) == name]
            if not len(df):
                raise DataValidationError(f"probe table has no row for model {name!r}")
        df = df.assign(model=name)
        if "score" in df.columns:
            nan = pd.to_numeric(df["score"], errors="coerce").isna().to_numpy()
            if nan.any():
                i = int(np.flatnonzero(nan)[0])
                raise DataValidationError(f"probe {df['query_id'].iloc[i]!r} has no numeric score "
                                          f"(got {df['score'].iloc[i]!r})", row=i, column="score")
        out = _column(name, RoutingData.from_long(df, name="probes"), costs)
    elif isinstance(scores, Mapping):
        if len(scores) > MAX_PROBES:
            raise DataValidationError(f"{len(scores)} probes given; at most {MAX_PROBES} allowed")
        out = _from_mapping(name, scores, costs)
        return out
    else:
        raise TypeError("probe scores must be a {text: score} mapping, a RoutingData or a long "
                        f"table (DataFrame), got {type(scores).__name__}")
    if out.n_queries > MAX_PROBES:
        raise DataValidationError(f"{out.n_queries} probes given; at most {MAX_PROBES} allowed",
                                  source=out.source)
    ids = pd.Series(out.query_ids)
    dup = ids.duplicated().to_numpy()
    if dup.any():
        raise DataValidationError(f"probe query {ids[dup].iloc[0]!r} appears more than once")
    return out


def probe_weights(name: str, probes: RoutingData, weights) -> np.ndarray:
    """Validated probe weights of LLM ``name``, normalised to mean 1 (ones when None).

    A weight says how many candidate queries a probe stands for (e.g. its cluster's share,
    from ``select_probes(..., return_weights=True)``): a weighted fit estimates the LLM's
    mean over the candidates without the bias of an unevenly chosen probe set.

    Raises
    ------
    DataValidationError
        Wrong length, a non-number, NaN or infinity, a negative weight or all weights zero,
        naming the probe (its query id) and the LLM. Any finite weights >= 0 with one > 0 are
        taken: only their ratios count (``[5e-324] * k`` and ``[1e308] * k`` are ``[1] * k``).

    Example
    -------
    >>> d = RoutingData(["a", "b"], ["new"], [[1.0], [0.0]])
    >>> probe_weights("new", d, [3, 1]).tolist()
    [1.5, 0.5]
    """
    n = probes.n_queries
    if weights is None:
        return np.ones(n)
    if isinstance(weights, (str, bytes, Mapping)) or not hasattr(weights, "__len__"):
        raise DataValidationError(f"probe weights of {name!r} must be a sequence of {n} numbers "
                                  f"(one per probe), got {type(weights).__name__}")
    if len(weights) != n:
        raise DataValidationError(f"{len(weights)} probe weights given for {name!r} but {n} probes; "
                                  "expected one weight per probe")
    ids = probes.query_ids
    w = np.empty(n)
    for i, v in enumerate(weights):
        what = f"weight of probe {i} ({str(ids[i])[:40]!r}) of {name!r}"
        w[i] = _number(v, what)
        if w[i] < 0:
            raise DataValidationError(f"{what} is {w[i]}; expected a weight >= 0")
    top = w.max()
    if not top > 0:
        raise DataValidationError(f"every probe weight of {name!r} is 0; at least one must be > 0")
    # by the largest first (each in [0, 1], the largest exactly 1), then by the mean (in
    # [1/n, 1]): no step can overflow, equal weights of any size (5e-324, 1e308) become
    # exactly 1, and only a weight below 1e-308 of the largest can underflow to 0
    w = w / top
    return w / w.mean()
