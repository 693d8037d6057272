"""Policy calibration: find the willingness-to-pay or budget that meets a target.

RouteLLM calibrates one threshold so that a given share of calls goes to the strong
model. With many LLMs the decision is ``argmax_j lambda * P_hat_j - c_hat_j`` (wtp) or
"best predicted score with c_hat_j <= C" (budget); both are step functions of their
parameter. The decisions only change at finitely many breakpoints, so we evaluate a
dense, data-derived candidate set of parameter values and keep the one whose outcome is
closest to the target (ties: the smaller parameter, i.e. the cheaper policy).
"""

from __future__ import annotations

import numpy as np

from ..hyperparams import check_number
from ..policies import budget_policy, fill_unknown_costs, wtp_policy

__all__ = ["calibrate_policy", "candidate_values", "calibrate_artifact"]


#: (query, LLM pair) cells :func:`candidate_values` works on at once for ``wtp``
_PAIR_CHUNK_CELLS = 1 << 20


def _wtp_breakpoints(pred_scores: np.ndarray, pred_costs: np.ndarray) -> np.ndarray:
    """Distinct positive finite ``(c_j - c_k) / (P_j - P_k)`` over every row and LLM pair.

    Each unordered pair once (the ratio is the same both ways round), a block of rows at a
    time, each block reduced to its distinct values: the temporaries hold about
    :data:`_PAIR_CHUNK_CELLS` values instead of the ``n x m x m`` of every ordered pair at
    once.
    """
    s, c = np.asarray(pred_scores), np.asarray(pred_costs)
    n, m = s.shape
    j, k = np.triu_indices(m, 1)
    step = max(1, _PAIR_CHUNK_CELLS // max(1, len(j)))
    parts = []
    for lo in range(0, n, step):
        sl = slice(lo, lo + step)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = (c[sl][:, j] - c[sl][:, k]) / (s[sl][:, j] - s[sl][:, k])
        parts.append(np.unique(lam[np.isfinite(lam) & (lam > 0)]))
    out = np.concatenate(parts) if parts else np.zeros(0)
    del parts
    out.sort()                      # in place: np.unique would sort a copy
    keep = np.ones(len(out), dtype=bool)
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def candidate_values(pred_scores: np.ndarray, pred_costs: np.ndarray, policy: str,
                     max_values: int = 400) -> np.ndarray:
    """Parameter values at which decisions can change.

    For ``budget`` these are the distinct predicted costs. For ``wtp`` the decision between
    LLMs j and k flips at ``lambda = (c_j - c_k) / (P_j - P_k)``; we take the quantiles of
    the midpoints between these pairwise breakpoints (positive ones), plus 0 and a value
    above all of them. The breakpoints are gathered a block of rows at a time, so memory
    grows with the number of distinct breakpoints, not with ``n_queries x n_llms**2``
    temporaries.
    """
    if policy == "budget":
        c = np.asarray(pred_costs, dtype=np.float64)
        vals = np.unique(c[np.isfinite(c)])  # an unknown (NaN) cost is no budget
        if not len(vals):
            raise ValueError("budget calibration needs a known (finite) predicted cost; "
                             "every predicted cost is unknown")
    elif policy == "wtp":
        brk = np.concatenate([[0.0], _wtp_breakpoints(pred_scores, pred_costs)])  # sorted
        top = brk[-1] * 2 if brk[-1] > 0 else 1.0
        # midpoints sit strictly between breakpoints, where no decision is a float-rounding tie
        vals = np.empty(len(brk) + 1)
        vals[0], vals[-1] = 0.0, top
        np.add(brk[1:], brk[:-1], out=vals[1:-1])
        del brk
        vals[1:-1] /= 2
    else:
        raise ValueError(f"policy must be 'wtp' or 'budget', got {policy!r}")
    if len(vals) > max_values:
        vals = np.unique(np.quantile(vals, np.linspace(0, 1, max_values)))
    return vals


def calibrate_policy(pred_scores: np.ndarray, pred_costs: np.ndarray, *, policy: str = "wtp",
                     target_cost: float | None = None, target_share: tuple[int, float] | None = None,
                     true_costs: np.ndarray | None = None, max_values: int = 400,
                     choose=None, values: np.ndarray | None = None) -> dict:
    """Find the policy parameter meeting a target mean cost or a target share of one LLM.

    Parameters
    ----------
    pred_scores, pred_costs : ndarray, shape (n_queries, n_llms)
        The router's predictions on the calibration data.
    policy : {"wtp", "budget"}
    target_cost : float, optional
        Wanted mean cost per query (actual costs when ``true_costs`` is given, else predicted).
    target_share : (int, float), optional
        ``(llm_index, share)``: wanted fraction of queries routed to that LLM.
    true_costs : ndarray, optional
        Actual costs of the calibration queries; NaN (unknown) cells are charged their
        predicted cost.
    choose : callable, optional
        ``choose(value) -> choices`` for routers with their own decision rule (e.g. the
        zero router's mixing), or ``-> (choices, paid)`` for one that says what each decision
        costs (a cascade pays every LLM it tries; :meth:`~recsys_router.router.Router.decide`);
        default: the wtp/budget policy on the predictions.
    values : ndarray, optional
        The parameter values to search (default: where the policy's outcome on the
        predictions can change, :func:`candidate_values`); a router with its own rule may
        know its own (``policy_values``, e.g. the cascade's caps). Its
        outcome is also searched between the candidate values by bisection (it may change
        between them, as the Zero router's mix does; see :func:`_bisect`).

    Returns
    -------
    dict
        ``{"policy", "value", "achieved", "target", "kind"}``.

    Example
    -------
    >>> s = np.array([[0.2, 0.9]] * 4); c = np.array([[1.0, 10.0]] * 4)
    >>> calibrate_policy(s, c, policy="budget", target_cost=10.0)["value"]
    10.0
    """
    if (target_cost is None) == (target_share is None):
        raise ValueError("give exactly one of target_cost or target_share")
    pred_scores = np.asarray(pred_scores)
    if pred_scores.ndim != 2 or pred_scores.shape[0] == 0:
        raise ValueError(f"calibration needs at least one query, got predictions of shape "
                         f"{pred_scores.shape}")
    if target_cost is not None:
        target = check_number(target_cost, "target_cost", low=0)
    else:
        if not isinstance(target_share, (tuple, list)) or len(target_share) != 2:
            raise ValueError(f"target_share must be (LLM index, share), got {target_share!r}")
        check_number(target_share[0], "target_share LLM index", low=0,
                     high=pred_scores.shape[1] - 1, integer=True)
        target = check_number(target_share[1], "target_share share", low=0, high=1)
    vals = candidate_values(pred_scores, pred_costs, policy, max_values)
    if values is not None:
        vals = np.unique(np.concatenate([vals, np.asarray(values, dtype=np.float64)]))
        if len(vals) > max_values:  # keep the ends and an even spread between them
            vals = vals[np.unique(np.linspace(0, len(vals) - 1, max_values).round().astype(int))]
    fn = wtp_policy if policy == "wtp" else budget_policy
    cost_mat = pred_costs if true_costs is None else \
        np.where(np.isnan(true_costs), pred_costs, true_costs)
    rows = np.arange(pred_scores.shape[0])

    def outcome(v: float) -> float:
        got = fn(pred_scores, pred_costs, v) if choose is None else choose(v)
        paid = None
        if isinstance(got, tuple):  # (choices, realised costs): a router that says what it pays
            got, paid = got
            paid = np.asarray(paid, dtype=np.float64)
        ch = np.asarray(got)
        if target_cost is not None:  # a choice whose cost nobody knows is left out
            if paid is None:
                paid = cost_mat[rows, ch]
            paid = paid[~np.isnan(paid)]
            return float(paid.mean()) if len(paid) else float("nan")
        return float((ch == target_share[0]).mean())

    achieved = np.array([outcome(float(v)) for v in vals])
    err = np.nan_to_num(np.abs(achieved - target), nan=np.inf)
    best = int(np.flatnonzero(err == err.min())[0])
    value, got = float(vals[best]), float(achieved[best])
    if choose is not None and err[best] > 0:
        value, got = _bisect(outcome, vals, achieved, target, value, got)
    return {"policy": policy, "value": value, "achieved": got,
            "target": target, "kind": "mean_cost" if target_cost is not None else "share"}


def _bisect(outcome, vals, achieved, target: float, value: float, got: float,
            steps: int = 40) -> tuple[float, float]:
    """Refine a router's own decision rule (``choose``) between two neighbouring candidate
    values whose outcomes bracket ``target``: the Zero router mixes two hull LLMs, so its
    realised mean cost (and share) moves between the step points too, monotonically in its
    parameter; bisection on the outcome finds the value closest to the target (the best
    step point is kept when no pair brackets it or bisection finds nothing closer)."""
    side = np.sign(achieved - target)
    cross = np.flatnonzero(side[:-1] * side[1:] < 0)
    if not len(cross):
        return value, got
    lo, hi = float(vals[cross[0]]), float(vals[cross[0] + 1])
    rising = achieved[cross[0] + 1] > achieved[cross[0]]
    for _ in range(steps):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        out = outcome(mid)
        if abs(out - target) < abs(got - target):
            value, got = mid, out
        if out == target:
            break
        if (out < target) == rising:
            lo = mid
        else:
            hi = mid
    return value, got


def calibrate_artifact(path, data, *, policy: str = "wtp", target_cost: float | None = None,
                       target_share: tuple[str, float] | None = None,
                       split: str | None = None, sign_key: str | bytes | None = None) -> dict:
    """Calibrate an exported router on ``data`` and store the result as its default policy.

    Parameters
    ----------
    path : path
        Artifact folder (verified on load; its manifest is rewritten atomically).
    data : RoutingData
        Queries to calibrate on; must hold every LLM of the artifact's pool. True costs are
        used where a cell has one and the router's predicted cost where not
        (``cost_source``: ``true``, ``mixed`` with ``predicted_cells`` = [cells predicted,
        cells], or ``predicted`` when the data has no cost at all). A router that says what
        it pays (the cascade, ``own_costs``) is charged its estimates (the LLMs' mean train
        costs) for the unknown cells, including every cell of data without costs. A target
        cost no candidate value has a known mean cost for is refused before anything is
        written.
    policy : {"wtp", "budget"}
    target_cost : float, optional
        Wanted mean cost per query.
    target_share : (LLM name, share), optional
        Wanted share of queries sent to one LLM.
    split : str, optional
        Calibrate on the queries whose ``split`` column is this value only.
    sign_key : str or bytes, optional
        Key of a signed artifact: its signature is checked on load and renewed.

    Returns
    -------
    dict
        :func:`calibrate_policy`'s result plus ``cost_source`` and ``data``.
    """
    from ..datasets.resolve import select_split  # noqa: PLC0415
    from .artifact import load_router, set_default_policy  # noqa: PLC0415
    if target_cost is not None:  # impossible targets fail before the artifact is read
        check_number(target_cost, "target_cost", low=0)
    if target_share is not None:
        check_number(target_share[1], f"target share of {target_share[0]!r}", low=0, high=1)
    art = load_router(path, sign_key=sign_key)
    data = select_split(data, split, data.name)
    missing = [n for n in art.llm_names if n not in data.llm_names]
    if missing:
        raise ValueError(f"{data.name} lacks LLM(s) {missing} of the artifact's pool")
    data = data.subset(llms=art.llm_names)
    scores, costs, _ = art.predict(data)
    if costs is None:
        raise ValueError("the router predicts no costs (trained without costs): nothing to calibrate")
    share = None
    if target_share is not None:
        llm, frac = target_share
        if llm not in art.llm_names:
            raise ValueError(f"target share: unknown LLM {llm!r}; the artifact's LLMs: "
                             f"{art.llm_names}")
        share = (art.llm_names.index(llm), float(frac))
    true_costs = data.costs if data.costs is not None and np.isfinite(data.costs).any() else None
    n_unknown = 0 if true_costs is None else int(np.isnan(true_costs).sum())
    choose = values = None
    if getattr(art.router, "own_costs", False):  # e.g. cascade: what it really pays
        # an unknown cost is charged its estimate here, as for every router (a cascade's
        # decide leaves a query with an unknown cost unpaid, NaN, as evaluate does); data
        # without any cost is charged the estimates throughout
        priced = data if true_costs is not None and not n_unknown else \
            _with_estimates(data, art.router.llm_mean_costs())

        def choose(v):
            return art.router.decide(priced, **{policy: v})
        if hasattr(art.router, "policy_values"):
            values = art.router.policy_values(data, policy)
    elif art.custom_routing:  # e.g. zero: calibrate its own decisions, not a policy on its scores
        def choose(v):
            return art.router.route_indices(data, **{policy: v})
    res = calibrate_policy(scores, costs, policy=policy, target_cost=target_cost,
                           target_share=share, true_costs=true_costs, choose=choose,
                           values=values)
    if not np.isfinite(res["achieved"]):  # never a NaN in the manifest (not JSON)
        raise ValueError(f"calibration data {data.name!r} ({data.n_queries} queries): no "
                         f"{policy} value has a known mean cost (the cost of every decision "
                         "is unknown); the artifact was not changed")
    res["cost_source"] = ("predicted" if true_costs is None else
                          "true" if not n_unknown else "mixed")
    if n_unknown:
        res["predicted_cells"] = [n_unknown, int(true_costs.size)]
    res["data"] = {"name": data.name, "n_queries": data.n_queries, "split": split}
    set_default_policy(path, res["policy"], res["value"], sign_key=sign_key,
                       extra={"calibration": {k: v for k, v in res.items()
                                              if k not in ("policy", "value")}})
    return res


def _with_estimates(data, mean_costs: np.ndarray):
    """``data`` with each unknown (NaN) cost cell, or every cell of data without costs, set
    to its LLM's estimated cost (:func:`~recsys_router.policies.fill_unknown_costs` of the
    router's mean costs)."""
    from ..data import RoutingData  # noqa: PLC0415
    est = fill_unknown_costs(np.asarray(mean_costs, dtype=np.float64))
    if data.costs is None:  # no cost at all: every cell is charged its estimate
        costs = np.broadcast_to(est, data.shape).copy()
    else:
        costs = np.where(np.isnan(data.costs), est[None, :], data.costs)
    return RoutingData(data.queries, data.llms, data.scores, costs, name=data.name,
                       source=data.source, meta=data.meta)
