"""Logged-feedback data: one revealed outcome per query, with its logging propensity.

Two sources give the same :class:`~recsys_router.data.RoutingData` (queries x LLMs with
exactly one observed cell per query and a per-query ``propensity`` column):

* the generic long table (``query_id, model, score[, cost], propensity[, query_text]``);
* the decision log itself (:func:`log_to_data`, decisions with feedback only; each
  decision's ``task`` label, when logged, becomes its query's task).

:func:`logged_arrays` turns such data into training arrays for the losses ``naive``,
``ips`` (weights ``1 / max(p, clip)``, mean loss ``(1/B) sum w l``), ``snips`` (the same
weights, self-normalised per batch: ``sum w l / sum w``) and ``dr`` (doubly robust pseudo-targets
``q_ij + 1[j = a_i] w_i (y_i - q_ij)`` for every cell, with ``q`` a ridge reward model
per LLM on the query embeddings, fitted on the logged cells and shrunk towards the pooled
mean for rarely logged LLMs).

References: Schnabel et al., "Recommendations as Treatments", ICML 2016 (IPS/SNIPS
training); Wang et al., "Doubly Robust Joint Learning for Recommendation on Data Missing Not
at Random", ICML 2019 (DR training).
"""

from __future__ import annotations

import decimal
import json
import numbers

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..long_columns import _boolean_rows
from .log_cells import (check_ids, check_probs, chosen_cost, is_missing, json_cell,
                        log_propensities, probs_json, task_cell)
from .ope_inputs import check_propensities, propensity_problem
from .reward import ridge_fit, ridge_predict

__all__ = ["FEEDBACK_LOSSES", "THUMBS", "check_logged", "feedback_error", "log_to_data", "logged_arrays", "logging_matrix",
           "ridge_reward_model", "thumbs_to_score"]

FEEDBACK_LOSSES = ("naive", "ips", "snips", "dr")


#: the thumbs a feedback may carry and the outcome each stands for
THUMBS = {"up": 1.0, "down": 0.0}


def feedback_error(score=None, thumbs=None) -> str | None:
    """Why a feedback ``score`` or ``thumbs`` breaks the rule the decision store enforces
    (a score is a number in [0, 1], thumbs are ``up`` or ``down``), or None when it keeps it.

    Example
    -------
    >>> feedback_error(score=0.5), feedback_error(score=7.0), feedback_error(thumbs="UP")
    (None, 'score must be in [0, 1], got 7.0', "thumbs must be 'up' or 'down', got 'UP'")
    """
    if score is not None:
        try:
            ok = 0.0 <= float(score) <= 1.0     # NaN fails too
        except (TypeError, ValueError):
            ok = False
        if not ok or isinstance(score, bool):
            return f"score must be in [0, 1], got {score!r}"
    if thumbs is not None and (not isinstance(thumbs, str) or thumbs not in THUMBS):
        return f"thumbs must be 'up' or 'down', got {thumbs!r}"
    return None


def _check_feedback(log: pd.DataFrame, source: str) -> None:
    """Every given ``feedback_score`` / ``thumbs`` / ``feedback_cost`` of a decision log keeps
    the store's rule; the error names the first bad row (0-based, as given), its decision and
    the field."""
    for field, key in (("feedback_score", "score"), ("thumbs", "thumbs")):
        if field not in log:
            continue
        for i, v in enumerate(log[field]):
            if is_missing(v):
                continue          # no feedback of this kind
            v = v.item() if isinstance(v, np.generic) else v
            err = feedback_error(**{key: v})
            if err:
                raise ValueError(f"{source}: row {i} (decision_id {log['decision_id'].iloc[i]!r}): "
                                 f"column {field!r}: {err}")
    if "feedback_score" in log and "thumbs" in log:   # the store takes exactly one of the two
        both = ~log["feedback_score"].map(is_missing).to_numpy(dtype=bool) \
            & ~log["thumbs"].map(is_missing).to_numpy(dtype=bool)
        if both.any():
            i = int(np.flatnonzero(both)[0])
            score, thumbs = (log[c].iloc[i] for c in ("feedback_score", "thumbs"))
            score = score.item() if isinstance(score, np.generic) else score
            raise ValueError(f"{source}: row {i} (decision_id {log['decision_id'].iloc[i]!r}): "
                             f"columns 'feedback_score' and 'thumbs' both hold feedback "
                             f"({score!r} and {thumbs!r}); a decision's feedback is exactly one "
                             f"of the two, as the store takes it ({int(both.sum())} such rows)")
    for i, v in enumerate(log["feedback_cost"] if "feedback_cost" in log else ()):
        if is_missing(v):
            continue              # no cost reported: the decision's predicted cost is used
        v = v.item() if isinstance(v, np.generic) else v
        # a number of any kind: int, float, Decimal (a warehouse's DECIMAL column in parquet)
        ok = isinstance(v, (numbers.Real, decimal.Decimal)) and not isinstance(v, bool) \
            and _finite_cost(v)
        if not ok:  # the rule POST /feedback applies; a text was read as "no cost" before
            raise ValueError(f"{source}: row {i} (decision_id {log['decision_id'].iloc[i]!r}): "
                             f"column 'feedback_cost': expected a finite number >= 0, got "
                             f"{str(v)[:80]!r}")


def _finite_cost(v) -> bool:
    """Whether the number ``v`` is finite and >= 0 (a signalling Decimal NaN is not)."""
    try:
        return 0 <= float(v) < float("inf")
    except (ValueError, ArithmeticError):
        return False


def thumbs_to_score(score, thumbs) -> np.ndarray:
    """Outcome per row: ``score`` when given, else thumbs up = 1, down = 0 (NaN if neither);
    either column may be absent (``None``).

    Example
    -------
    >>> thumbs_to_score([0.5, None, None], [None, "up", "down"]).tolist()
    [0.5, 1.0, 0.0]
    """
    n = len(score) if score is not None else len(thumbs)
    s = np.full(n, np.nan) if score is None else \
        pd.to_numeric(pd.Series(score, dtype=object), errors="coerce").to_numpy(dtype=float)
    t = np.full(n, np.nan) if thumbs is None else \
        pd.Series(thumbs, dtype=object).map(THUMBS).to_numpy(dtype=float)
    return np.where(np.isnan(s), t, s)


def check_logged(data: RoutingData, *, need_propensity: bool = True):
    """Validate logged-feedback data; returns ``(action, outcome, propensity)`` per query.

    Raises
    ------
    ValueError
        A query with no or several observed cells, a missing ``propensity`` column (when
        needed) or a propensity outside (0, 1] or not a number (shown as given); the message
        names the query's row in ``data`` (a file's lines are checked when it is loaded, see
        :func:`recsys_router.datasets.generic.frame_to_data`).
    """
    src = data.source or data.name
    obs = ~np.isnan(data.scores)
    n_obs = obs.sum(axis=1)
    if (n_obs != 1).any():
        r = int(np.flatnonzero(n_obs != 1)[0])
        raise ValueError(f"{src}: query {data.query_ids[r]!r} (row {r}) has {int(n_obs[r])} observed "
                         "outcomes; logged feedback reveals exactly one LLM per query")
    action = obs.argmax(axis=1)
    outcome = data.scores[np.arange(data.n_queries), action].astype(np.float64)
    if "propensity" not in data.queries.columns:
        if need_propensity:
            raise ValueError(f"{src}: no 'propensity' column; the ips, snips and dr losses and "
                             "the off-policy estimators need the logging policy's probability of "
                             "each logged choice (use loss 'naive' without it)")
        return action, outcome, np.ones(data.n_queries)
    raw = data.queries["propensity"]
    p = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    flags = _boolean_rows(raw)   # True would read as 1: a deterministic logger
    if flags.any():
        r = int(np.flatnonzero(flags)[0])
        raise ValueError(f"{src}: column 'propensity': query {data.query_ids[r]!r} (row {r}): "
                         f"{propensity_problem(raw.iloc[r], 1.0)}")
    text = np.isnan(p) & raw.notna().to_numpy()  # a value that is not a number: show it as given
    if text.any():
        r = int(np.flatnonzero(text)[0])
        raise ValueError(f"{src}: column 'propensity': query {data.query_ids[r]!r} (row {r}): "
                         f"propensity {raw.iloc[r]!r} is not a number in (0, 1]")
    return action, outcome, check_propensities(p, source=f"{src}: column 'propensity'")


def log_to_data(log: pd.DataFrame, *, source: str = "log") -> RoutingData:
    """Decisions with feedback as logged-feedback data (queries = decisions).

    The outcome is the feedback ``score`` (or thumbs up = 1, down = 0); the cost is the
    feedback ``cost`` when given, else the chosen LLM's predicted cost. The log's ``probs``
    (every LLM's logging probability) and ``explore`` columns are kept as query columns, so
    off-policy evaluation can check that the logger could have made the target's choices. Decisions without
    feedback carry no outcome and are left out (their number is in ``data.name``). An error
    names the row of ``log`` as given (0-based, header not counted; decisions without feedback
    counted too) and its ``decision_id``: a missing, blank or repeated ``decision_id`` (column
    ``decision_id``; a repeat also names the row that holds the id first), a feedback score
    outside [0, 1], thumbs other than up|down, or both a score and thumbs on one row (the
    store's rule, :func:`feedback_error`: exactly one of the two), a ``chosen`` LLM that is
    not among the decision's candidates, a propensity outside (0, 1], below
    :data:`~recsys_router.numeric.PROPENSITY_FLOOR` (1e-12) or boolean, malformed candidates, probs or costs
    (a cell over :data:`~recsys_router.feedback.log_cells.MAX_CELL_CHARS`, nested too deeply to parse, naming a key twice, not
    the JSON list or object expected, a cost that is not a number or null, an infinite cost
    of the chosen LLM), probs that do not sum to 1 or that give the chosen LLM a probability
    other than its propensity (:func:`~recsys_router.feedback.log_cells.check_probs`).
    """
    need = ("decision_id", "chosen", "propensity", "candidates")
    missing = [c for c in need if c not in log.columns]
    if missing:
        raise ValueError(f"{source}: not a decision log: missing column(s) {missing}")
    check_ids(log["decision_id"], source)
    _check_feedback(log, source)
    y = thumbs_to_score(log.get("feedback_score"), log.get("thumbs")) if len(log) else np.zeros(0)
    keep = ~np.isnan(y)
    if not keep.any():
        raise ValueError(f"{source}: no decision has feedback yet ({len(log)} decisions)")
    orig = np.flatnonzero(keep)  # row of each kept decision in the log as given
    sub = log[keep].reset_index(drop=True)
    y = y[keep]

    def at(i: int) -> str:
        return f"{source}: row {int(orig[i])} (decision_id {sub['decision_id'].iloc[i]!r})"
    names: list[str] = []
    offered: list[str] = []
    for i, cand in enumerate(sub["candidates"]):
        what = "a JSON list of LLM names"
        try:
            lst = json_cell(cand, at(i), "candidates", what) if isinstance(cand, str) else list(cand)
        except TypeError:
            lst = None
        if not isinstance(lst, list) or not all(isinstance(x, str) for x in lst):
            raise ValueError(f"{at(i)}: candidates {str(cand)[:80]!r} is not {what}")
        names.extend(x for x in lst if x not in names)
        offered.append(json.dumps(lst))
    for i, x in enumerate(sub["chosen"]):
        if not isinstance(x, str) or x not in json.loads(offered[i]):
            raise ValueError(f"{at(i)}: column 'chosen': {x!r} is not among the decision's "
                             f"candidates {json.loads(offered[i])}")
    col = {n: j for j, n in enumerate(names)}
    rows = np.arange(len(sub))
    act = np.array([col[x] for x in sub["chosen"]])
    scores = np.full((len(sub), len(names)), np.nan, np.float32)
    scores[rows, act] = y
    cost = pd.to_numeric(sub.get("feedback_cost"), errors="coerce").to_numpy(dtype=float) \
        if "feedback_cost" in sub else np.full(len(sub), np.nan)
    if "costs" in sub:
        pred = np.array([chosen_cost(c, ch, at(i))
                         for i, (c, ch) in enumerate(zip(sub["costs"], sub["chosen"]))])
        cost = np.where(np.isnan(cost), pred, cost)
    costs = None
    if not np.isnan(cost).all():
        costs = np.full(scores.shape, np.nan, np.float32)
        costs[rows, act] = cost
    text = sub["query_text"] if "query_text" in sub else pd.Series([None] * len(sub))
    p = log_propensities(sub["propensity"], at)
    q = pd.DataFrame({"query_id": sub["decision_id"].astype(str),
                      "text": [t if isinstance(t, str) else "" for t in text],
                      "propensity": p, "candidates": offered})
    if "probs" in sub:  # the logging policy's choice probabilities: OPE checks its support
        given = [probs_json(raw, at(i)) for i, raw in enumerate(sub["probs"])]
        for i, js in enumerate(given):
            if js is not None:
                check_probs(json.loads(js), sub["chosen"].iloc[i], p[i], at(i))
        q["probs"] = given
    if "explore" in sub:
        q["explore"] = [x if isinstance(x, str) else None for x in sub["explore"]]
    if "task" in sub:  # the label each decision was routed by (a router reading tasks needs it)
        labels = [task_cell(t, at(i)) for i, t in enumerate(sub["task"])]
        if any(t is not None for t in labels):
            q["task"] = labels
    dropped = int((~keep).sum())
    name = f"decision log ({len(sub)} with feedback, {dropped} without)"
    return RoutingData(q, names, scores, costs, name=name, source=source)


def logging_matrix(data: RoutingData) -> np.ndarray:
    """The logging policy's choice probabilities (n, L) over ``data``'s LLM columns from its
    ``probs`` query column (an LLM missing from a row's object had probability 0); a row
    without ``probs`` (or data without the column) is all NaN: unknown.

    Example
    -------
    >>> d = RoutingData(pd.DataFrame({"query_id": ["a", "b"], "probs": ['{"m": 1.0}', None]}),
    ...                 ["m", "n"], np.array([[1.0, np.nan], [np.nan, 0.0]]))
    >>> logging_matrix(d).tolist()
    [[1.0, 0.0], [nan, nan]]
    """
    out = np.full((data.n_queries, data.n_llms), np.nan)
    if "probs" not in data.queries.columns:
        return out
    col = {n: j for j, n in enumerate(data.llm_names)}
    src = data.source or data.name
    for i, raw in enumerate(data.queries["probs"]):
        js = probs_json(raw, f"{src}: query {data.query_ids[i]!r} (row {i})")
        if js is None:
            continue
        out[i] = 0.0
        for name, v in json.loads(js).items():
            if name in col:
                out[i, col[name]] = float(v)
    return out


def ridge_reward_model(x: np.ndarray, action: np.ndarray, y: np.ndarray, w: np.ndarray,
                       n_llms: int, alpha: float = 10.0, prior: float = 10.0) -> np.ndarray:
    """Predicted outcome of every LLM for every query, clipped to the logged outcomes' range
    (:func:`recsys_router.feedback.reward.ridge_fit` fitted and predicted on ``x``).

    Per LLM: weighted ridge regression of the logged outcomes on the centred query
    embeddings, around the LLM's weighted mean outcome shrunk towards the pooled mean with
    the weight of ``prior`` average observations (an LLM logged once or twice, common under
    epsilon-greedy logging over dozens of LLMs, stays near the pooled mean).

    Example
    -------
    >>> x = np.array([[0.0], [1.0], [0.0], [1.0]])
    >>> q = ridge_reward_model(x, np.array([0, 0, 1, 1]), np.array([0.0, 1.0, 1.0, 1.0]),
    ...                        np.ones(4), 2, alpha=1e-9, prior=0.0)
    >>> q.round(3).tolist()
    [[0.0, 1.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]]
    """
    return ridge_predict(ridge_fit(x, action, y, w, n_llms, alpha=alpha, prior=prior), x)


def logged_arrays(data: RoutingData, x: np.ndarray, loss: str, clip: float = 0.05,
                  clip_targets: bool = False) -> dict:
    """Training arrays of a logged-feedback loss (one row per query).

    ``clip_targets`` (``dr`` only) clips the pseudo-targets to [0, 1]: biased, but a logged
    cell with weight 20 can no longer ask for a target of 20.

    Returns
    -------
    dict
        ``y`` (n, L) float32 target (the logged outcome in its cell; the DR pseudo-target
        everywhere for ``dr``), ``mask`` (n, L) bool cells in the loss, ``w`` (n,) float32
        weight of each row's logged cell (1 for ``dr``, whose weights are in ``y``), and
        ``x``, ``index``; for ``snips`` also ``self_normalise`` (the loss then divides by the
        batch's summed weight instead of its size).

    Example
    -------
    >>> d = RoutingData(pd.DataFrame({"query_id": ["a", "b"], "propensity": [0.5, 0.25]}), ["m", "n"],
    ...                 np.array([[1.0, np.nan], [np.nan, 0.0]]))
    >>> logged_arrays(d, np.zeros((2, 1)), "ips")["w"].tolist()
    [2.0, 4.0]
    """
    if loss not in FEEDBACK_LOSSES:
        raise ValueError(f"feedback loss must be one of {FEEDBACK_LOSSES}, got {loss!r}")
    if not 0 < clip <= 1:
        raise ValueError(f"propensity_clip must be in (0, 1], got {clip!r}")
    action, y, p = check_logged(data, need_propensity=loss != "naive")
    n, L = data.scores.shape
    rows = np.arange(n)
    w = np.ones(n) if loss == "naive" else 1.0 / np.maximum(p, clip)
    target = np.zeros((n, L))
    mask = np.zeros((n, L), bool)
    target[rows, action], mask[rows, action] = y, True
    if loss == "dr":
        q = ridge_reward_model(x, action, y, np.ones(n), L)  # selection depends on x only
        target = q.copy()
        target[rows, action] += w * (y - q[rows, action])
        if clip_targets:
            np.clip(target, 0.0, 1.0, out=target)
        mask[:] = True
        w = np.ones(n)
    out = {"index": rows.astype(np.int64), "x": np.asarray(x, np.float32),
           "y": target.astype(np.float32), "mask": mask, "w": w.astype(np.float32)}
    if loss == "snips":  # the loss divides by the batch's mean weight
        out["self_normalise"] = np.ones(n, np.float32)
    return out
