"""Exploration policies with exact propensities.

A serving policy turns the router's predictions into a *distribution* over the allowed
candidates and draws the chosen LLM from it; the probability of the drawn LLM is its
**propensity**, logged with the decision so off-policy estimators and debiased training
can re-weight by it.

* ``none``: all mass on the greedy decision (propensity 1).
* ``epsilon:E``: ``1 - E + E/K`` on the greedy decision, ``E/K`` on each other allowed
  candidate (``K`` allowed candidates).
* ``softmax:T``: ``softmax(u / T)`` over the allowed candidates (computed from ``u - max u``,
  so a tiny ``T`` is the argmax, exact ties sharing it), where ``u`` is the utility
  the decision policy maximises (the predicted score for ``argmax``, ``wtp * score - cost``
  for ``wtp``; for ``budget`` the affordable candidates, or the cheapest when none fits).
* ``thompson``: Thompson sampling with ``n_samples`` posterior draws of the predicted
  scores (routers that can sample them, :func:`can_sample`); the choice is drawn from the
  empirical distribution of the draws' winners, so the logged propensity is exactly the
  probability with which the LLM was chosen given those draws.

Reference: Li, Chu, Langford, Schapire, "A contextual-bandit approach to personalized news
article recommendation", WWW 2010 (logging propensities for offline replay).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ope import row_sum_tolerance

__all__ = ["ExplorationPolicy", "parse_explore", "policy_utility", "choice_probabilities",
           "draw", "can_sample", "EXPLORE_KINDS"]

EXPLORE_KINDS = ("none", "epsilon", "softmax", "thompson")


@dataclass(frozen=True)
class ExplorationPolicy:
    """A parsed ``--explore`` value.

    Example
    -------
    >>> parse_explore("epsilon:0.1")
    ExplorationPolicy(kind='epsilon', value=0.1, n_samples=64)
    """

    kind: str = "none"
    value: float | None = None
    n_samples: int = 64

    @property
    def spec(self) -> str:
        """The policy as written on the command line (and stored in the log)."""
        return self.kind if self.value is None else f"{self.kind}:{self.value:g}"


def parse_explore(text: str | None) -> ExplorationPolicy:
    """Parse ``none``, ``epsilon:E`` (0 <= E <= 1), ``softmax:T`` (T > 0) or ``thompson``.

    Example
    -------
    >>> parse_explore("softmax:0.5").value, parse_explore(None).kind
    (0.5, 'none')
    """
    if text is None or str(text).strip() in ("", "none"):
        return ExplorationPolicy()
    kind, _, raw = str(text).strip().partition(":")
    if kind not in EXPLORE_KINDS:
        raise ValueError(f"--explore must be none, epsilon:E, softmax:T or thompson, got {text!r}")
    if kind == "thompson":
        n = 64 if not raw else raw
        try:
            n = int(n)
        except ValueError:
            raise ValueError(f"--explore thompson[:N]: N must be an integer, got {raw!r}") from None
        if not 2 <= n <= 10_000:
            raise ValueError(f"--explore thompson:N needs 2 <= N <= 10000 draws, got {n}")
        return ExplorationPolicy("thompson", None, n)
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"--explore {kind}:VALUE needs a number, got {text!r}") from None
    if kind == "epsilon" and not 0.0 <= value <= 1.0:
        raise ValueError(f"--explore epsilon:E needs 0 <= E <= 1, got {value}")
    if kind == "softmax" and not (np.isfinite(value) and value > 0):
        raise ValueError(f"--explore softmax:T needs a temperature T > 0, got {value}")
    return ExplorationPolicy(kind, value)


def policy_utility(scores: np.ndarray, costs: np.ndarray | None, policy: str, value: float | None,
                   mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Utility maximised by a decision policy, and the allowed candidates, per query.

    Returns
    -------
    utility : ndarray float64 (n, L)
    allowed : ndarray bool (n, L)
        The candidate mask; for ``budget`` further restricted to the affordable LLMs (a
        known cost within the budget: an unknown, NaN, cost is never affordable, even at an
        infinite budget, as in :func:`~recsys_router.policies.budget_policy`; the
        cheapest allowed one when none is affordable, every allowed one when no allowed LLM
        has a known cost). For ``wtp`` an unknown (NaN) cost counts as infinite, as in
        :func:`~recsys_router.policies.wtp_policy` (utility ``-inf``); a row where no
        allowed LLM has a known cost has the predicted score as its utility. A row where
        ``lambda * P_hat`` overflows float64 (``wtp`` near 1e308) takes its limit: ``-c_hat``
        on the allowed LLMs with the row's best predicted score, ``-inf`` elsewhere (every
        other gap is then past any temperature), so exploration agrees with the policy's
        own choice instead of every utility turning infinite.

    Example
    -------
    >>> u, a = policy_utility(np.array([[0.5, 0.9]]), np.array([[0.1, 1.0]]), "wtp", 2.0)
    >>> u.round(2).tolist(), a.tolist()
    ([[0.9, 0.8]], [[True, True]])
    """
    s = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-1e9)
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape).copy()
    if policy == "wtp":
        # as policies.wtp_policy: an unknown (NaN) cost is infinite, never free; a row whose
        # allowed LLMs all have unknown costs is ranked by predicted score alone
        c = np.broadcast_to(np.nan_to_num(np.asarray(costs, dtype=np.float64), nan=np.inf),
                            s.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            util = float(value) * s - c
        over = (np.isinf(float(value) * np.where(allowed, s, 0.0)) & allowed).any(axis=1)
        if over.any():  # lambda * P_hat past float64 (wtp near 1e308): the limit of the
            # utility's order is the best predicted score first, then the cheaper cost
            so = np.where(allowed[over], s[over], -np.inf)
            util[over] = np.where(so == so.max(axis=1, keepdims=True), -c[over], -np.inf)
        unknown = ~np.isfinite(np.where(allowed, c, np.inf)).any(axis=1)
        util[unknown] = s[unknown]
        return util, allowed
    if policy == "budget":
        c = np.broadcast_to(np.nan_to_num(np.asarray(costs, dtype=np.float64), nan=np.inf),
                            s.shape)
        # as policies.budget_policy: an unknown (NaN) cost never fits, even budget = inf
        fits = allowed & np.isfinite(c) & (c <= float(value))
        none = ~fits.any(axis=1)
        if none.any():  # the cheapest allowed LLMs (all allowed ones when no cost is known)
            cc = np.where(allowed, c, np.inf)[none]
            fits[none] = allowed[none] & (cc == cc.min(axis=1, keepdims=True))
        return s, fits
    return s, allowed


def choice_probabilities(policy: ExplorationPolicy, greedy: np.ndarray, utility: np.ndarray,
                         allowed: np.ndarray, samples: np.ndarray | None = None) -> np.ndarray:
    """Probability of choosing each LLM, per query (rows sum to 1, 0 outside ``allowed``).

    Parameters
    ----------
    policy : ExplorationPolicy
    greedy : ndarray int (n,)
        The decision policy's own choice.
    utility, allowed : ndarray (n, L)
        From :func:`policy_utility`.
    samples : ndarray (S, n, L), optional
        Posterior draws of the utility (``thompson`` only).

    Example
    -------
    >>> p = choice_probabilities(parse_explore("epsilon:0.3"), np.array([1]), np.zeros((1, 3)),
    ...                          np.ones((1, 3), bool))
    >>> p.round(3).tolist()
    [[0.1, 0.8, 0.1]]
    """
    n, L = utility.shape
    greedy = np.asarray(greedy, dtype=np.int64)
    onehot = np.zeros((n, L))
    onehot[np.arange(n), greedy] = 1.0
    if policy.kind == "none":
        return onehot
    k = allowed.sum(axis=1, keepdims=True).astype(np.float64)
    if (k == 0).any():
        raise ValueError("no allowed candidate to explore among")
    if policy.kind == "epsilon":
        eps = float(policy.value)
        return (1.0 - eps) * onehot + eps * allowed / k
    if policy.kind == "softmax":
        return _softmax(np.asarray(utility, np.float64), allowed, float(policy.value))
    if samples is None:
        raise ValueError("thompson exploration needs posterior draws of the predicted scores")
    draws = np.where(allowed[None], samples, -np.inf)
    win = draws.argmax(axis=2)                                   # (S, n)
    counts = np.zeros((n, L))
    np.add.at(counts, (np.broadcast_to(np.arange(n), win.shape), win), 1.0)
    return counts / samples.shape[0]


def _softmax(utility: np.ndarray, allowed: np.ndarray, temperature: float) -> np.ndarray:
    """``softmax(u / T)`` over the allowed LLMs, computed from ``u - max(u)`` so that no
    temperature overflows: a tiny ``T`` tends to the argmax, exact ties (an all ``-inf`` row
    too) sharing the mass equally."""
    u = np.where(allowed, utility, -np.inf)
    if np.isnan(u).any():
        i = int(np.flatnonzero(np.isnan(u).any(axis=1))[0])
        raise ValueError(f"softmax exploration: query {i} has a utility that is not a number")
    top = u.max(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        gap = np.where(u == top, 0.0, u - top)      # <= 0; the best (and ties) exactly 0
        e = np.where(allowed, np.exp(gap / temperature), 0.0)
    return e / e.sum(axis=1, keepdims=True)


def draw(probs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw one LLM per row of ``probs``; returns ``(choice, propensity)``.

    Each row must be a distribution: finite, non-negative and summing to 1 within
    :func:`~recsys_router.feedback.ope.row_sum_tolerance` of its dtype (a float32 softmax
    passes). Another row is refused, not renormalised: the returned propensity is the row's
    own value at the choice, which a caller logs, so it must be the probability the choice
    was drawn with.

    Example
    -------
    >>> c, p = draw(np.array([[0.0, 1.0, 0.0]]), np.random.default_rng(0))
    >>> c.tolist(), p.tolist()
    ([1], [1.0])
    >>> draw(np.array([[0.2, 0.2]]), np.random.default_rng(0))
    Traceback (most recent call last):
    ...
    ValueError: choice probabilities of query 0 are not a distribution: [0.2, 0.2] (sum 0.4; expected non-negative numbers summing to 1)
    """
    given = np.asarray(probs)
    probs = given.astype(np.float64)
    tol = row_sum_tolerance(given.dtype, probs.shape[1] if probs.ndim == 2 else 1)
    with np.errstate(invalid="ignore"):
        total = probs.sum(axis=1)
        bad = ~(np.isfinite(probs).all(axis=1) & (probs >= 0).all(axis=1) & (np.abs(total - 1.0) <= tol))
    if bad.any():  # never serve (or log) a NaN or wrong propensity
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"choice probabilities of query {i} are not a distribution: {probs[i].tolist()} "
                         f"(sum {float(total[i])!r}; expected non-negative numbers summing to 1)")
    cdf = np.cumsum(probs, axis=1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    choice = np.minimum((cdf <= u).sum(axis=1), probs.shape[1] - 1)
    # never land on a zero-probability column through rounding at the top of the cdf
    bad = probs[np.arange(len(probs)), choice] <= 0
    if bad.any():
        choice[bad] = probs[bad].argmax(axis=1)
    return choice, probs[np.arange(len(probs)), choice]


def can_sample(router) -> bool:
    """Whether a router can draw its predicted scores from a posterior (``sample_scores``)."""
    return callable(getattr(router, "sample_scores", None))
