"""RouterEval metrics: mu_o, V_R, V_B, E_p and the oracle / r_o(p) references.

Reference: Huang et al., "RouterEval: A Comprehensive Benchmark for Routing LLMs to
Explore Model-level Scaling Up in LLMs", arXiv:2503.10657; code MilkThink-Lab/RouterEval.

* ``mu_o`` - mean true score of the chosen LLM over the test queries.
* ``V_R = mu_o / reference`` - ratio to a strong reference model's score on the benchmark
  (:data:`REFERENCE_SCORES` holds the values of RouterEval's 12 benchmarks).
* ``V_B = mu_o / max_j mean_i s_ij`` - ratio to the best single LLM of the candidate pool.
* ``E_p`` - entropy (bits) of the distribution of chosen LLMs over the test queries
  (``log2 m`` for a uniform random router, 0 for a router that always picks one LLM).
  RouterEval's code instead averages the per-query entropy of softmax-ed predicted
  probabilities; :func:`mean_prob_entropy` computes that variant.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataValidationError
from .base import as_choices, as_matrix, best_single, chosen, entropy_bits, metric

__all__ = ["REFERENCE_SCORES", "mu_o", "v_r", "v_b", "selection_entropy", "mean_prob_entropy",
           "oracle_choices", "oracle_mean", "expected_ro_mean", "routereval_metrics"]

#: Reference-model scores of RouterEval's 12 benchmarks, as hard-coded in ``acc_ref_dict``
#: of RouterEval's ``test_router.py`` / ``get_router_dataset.py`` (commit 2edf54d).
REFERENCE_SCORES: dict[str, float] = {
    "arc": 0.852, "hellaswag": 0.953, "mmlu": 0.864, "harness_truthfulqa_mc_0": 0.669,
    "winogrande": 0.875, "gsm8k": 0.92, "ifeval": 0.7689, "bbh": 0.8303, "gpqa": 0.397,
    "math": 0.4, "musr": 0.699, "mmlu_pro": 0.637,
}


def _sc(scores, choices):
    s = as_matrix(scores, "scores", allow_nan=True)    # NaN: not observed (reduced pools)
    return s, as_choices(choices, s.shape[0], s.shape[1])


@metric("mu_o", "higher")
def mu_o(scores: np.ndarray, choices: np.ndarray) -> float:
    """Mean score of the chosen LLM: ``mu_o = (1/n) sum_i s[i, choice_i]``.

    With per-query candidate pools (NaN = unobserved) the mean runs over the queries whose
    chosen cell is observed (a router restricted to observed candidates covers them all).

    Parameters
    ----------
    scores : ndarray, shape (n_queries, n_llms)
        True scores on the test queries.
    choices : ndarray of int, shape (n_queries,)
        Chosen column per query.

    Returns
    -------
    float

    Example
    -------
    >>> mu_o(np.array([[1., 0.], [0., 1.], [1., 1.]]), np.array([0, 0, 1]))
    0.6666666666666666
    """
    s, c = _sc(scores, choices)
    v = chosen(s, c)
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


@metric("v_r", "higher")
def v_r(scores: np.ndarray, choices: np.ndarray, reference: float | None = None, *,
        benchmark: str | None = None) -> float:
    """Ratio to a reference model: ``V_R = mu_o / reference``.

    Parameters
    ----------
    scores, choices
        As in :func:`mu_o`.
    reference : float, optional
        Reference score (> 0). Give either this or ``benchmark``.
    benchmark : str, optional
        Key of :data:`REFERENCE_SCORES` (e.g. ``"gsm8k"``).

    Returns
    -------
    float

    Example
    -------
    >>> v_r(np.array([[0.8], [0.8]]), np.array([0, 0]), 0.4)
    2.0
    >>> round(v_r(np.array([[0.46]]), np.array([0]), benchmark="gsm8k"), 3)
    0.5
    """
    if (reference is None) == (benchmark is None):
        raise ValueError("v_r needs exactly one of reference= (a score) or benchmark= "
                         f"(one of {sorted(REFERENCE_SCORES)})")
    if benchmark is not None:
        if benchmark not in REFERENCE_SCORES:
            raise DataValidationError(f"no RouterEval reference score for benchmark {benchmark!r}; "
                                      f"known: {sorted(REFERENCE_SCORES)} (or pass reference=)",
                                      column="benchmark")
        reference = REFERENCE_SCORES[benchmark]
    if not np.isfinite(reference) or reference <= 0:
        raise DataValidationError(f"reference score must be a finite number > 0, got {reference!r}",
                                  column="reference")
    return mu_o(scores, choices) / float(reference)


@metric("v_b", "higher")
def v_b(scores: np.ndarray, choices: np.ndarray) -> float:
    """Ratio to the best single LLM of the pool: ``V_B = mu_o / max_j mean_i s[i, j]``.

    Returns NaN when the best mean score is not positive (0, or negative on a signed score
    scale), where the ratio no longer orders routers by ``mu_o``.

    Example
    -------
    >>> v_b(np.array([[1., 0.], [0., 1.], [1., 0.]]), np.array([0, 1, 0]))
    1.5
    """
    s, c = _sc(scores, choices)
    best = best_single(s).quality
    return float(mu_o(s, c) / best) if best > 0 else float("nan")


@metric("e_p", "higher")
def selection_entropy(choices: np.ndarray, n_llms: int) -> float:
    """E_p: entropy in bits of the chosen-LLM distribution, ``-sum_j f_j log2 f_j`` with
    ``f_j`` the share of queries routed to LLM ``j``.

    ``log2 m`` for a router spreading queries evenly over ``m`` LLMs, 0 for one that always
    picks the same LLM. RouterEval reads a low value as classification bias (collapse).

    Parameters
    ----------
    choices : ndarray of int, shape (n_queries,)
    n_llms : int
        Size of the candidate pool.

    Returns
    -------
    float

    Example
    -------
    >>> selection_entropy(np.array([0, 1, 0, 1]), 2), selection_entropy(np.array([2, 2]), 3)
    (1.0, 0.0)
    """
    c = np.asarray(choices)
    if c.ndim != 1 or c.size == 0:
        raise DataValidationError(f"choices must be a non-empty 1-D array, got shape {c.shape}",
                                  column="choices")
    c = as_choices(c, c.shape[0], int(n_llms))
    freq = np.bincount(c, minlength=int(n_llms)) / c.shape[0]
    return float(entropy_bits(freq))


@metric("prob_entropy", "none")
def mean_prob_entropy(probs: np.ndarray, *, softmax: bool = False) -> float:
    """Mean per-query entropy (bits) of selection probabilities:
    ``(1/n) sum_i -sum_j p_ij log2 p_ij``.

    Parameters
    ----------
    probs : ndarray, shape (n_queries, n_llms)
        Rows summing to 1 (``softmax=False``), or raw predicted scores to pass through a row
        softmax first (``softmax=True``, what RouterEval's code does with predicted
        correctness probabilities before calling it E_p).

    Returns
    -------
    float

    Example
    -------
    >>> mean_prob_entropy(np.array([[0.5, 0.5], [1.0, 0.0]]))
    0.5
    """
    p = as_matrix(probs, "probs")
    if softmax:
        e = np.exp(p - p.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    else:
        if (p < 0).any() or not np.allclose(p.sum(axis=1), 1.0, atol=1e-6):
            i = int(np.flatnonzero((p < 0).any(axis=1) | ~np.isclose(p.sum(axis=1), 1.0, atol=1e-6))[0])
            raise DataValidationError(f"probs row {i} is not a probability distribution (sum "
                                      f"{p[i].sum():.6g}); expected non-negative rows summing to 1, "
                                      f"or pass softmax=True", row=i, column="probs")
    return float(entropy_bits(p, axis=1).mean())


def oracle_choices(scores: np.ndarray, costs: np.ndarray | None = None) -> np.ndarray:
    """Oracle router: the best true score per query, the cheapest LLM among ties (then the
    lowest index; without costs, the lowest index).

    Example
    -------
    >>> oracle_choices(np.array([[1., 1., 0.], [0., 0., 1.]]), np.array([[3., 2., 1.]] * 2)).tolist()
    [1, 2]
    """
    s = as_matrix(scores, "scores")
    n, m = s.shape
    tied = s == s.max(axis=1, keepdims=True)
    if costs is None:
        return tied.argmax(axis=1)
    c = as_matrix(costs, "costs", s.shape)
    return np.where(tied, c, np.inf).argmin(axis=1)


@metric("oracle_mean", "higher")
def oracle_mean(scores: np.ndarray) -> float:
    """Mean over queries of the best score: ``(1/n) sum_i max_j s_ij``.

    NaN cells (unobserved) are skipped; queries with nothing observed are left out.

    Example
    -------
    >>> oracle_mean(np.array([[1., 0.], [0., 0.]]))
    0.5
    """
    s = as_matrix(scores, "scores", allow_nan=True)
    s = s[~np.isnan(s).all(axis=1)]
    return float(np.nanmax(s, axis=1).mean()) if len(s) else float("nan")


def expected_ro_mean(scores: np.ndarray, p: float) -> float:
    """Expected mu_o of RouterEval's ``r_o(p)``: with probability ``p`` the oracle, otherwise a
    uniformly random LLM. ``E[mu_o] = p * oracle_mean + (1 - p) * (1/m) sum_j mean_i s_ij``.

    Example
    -------
    >>> expected_ro_mean(np.array([[1., 0.], [0., 0.]]), 0.5)
    0.375
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    s = as_matrix(scores, "scores")
    return float(p * s.max(axis=1).mean() + (1.0 - p) * s.mean())


def routereval_metrics(scores: np.ndarray, choices: np.ndarray, *, probs: np.ndarray | None = None,
                       reference: float | None = None, benchmark: str | None = None) -> dict:
    """All RouterEval numbers for one router.

    Parameters
    ----------
    scores : ndarray, shape (n_queries, n_llms)
    choices : ndarray of int, shape (n_queries,)
    probs : ndarray, shape (n_queries, n_llms), optional
        Selection probabilities; adds ``prob_entropy``.
    reference, benchmark
        For ``v_r`` (see :func:`v_r`); ``v_r`` is NaN when neither is given.

    Returns
    -------
    dict
        ``mu_o``, ``v_r``, ``v_b``, ``e_p``, ``prob_entropy`` (NaN without ``probs``),
        ``oracle_mean``, ``best_single_mean``, ``best_single_index``.

    Example
    -------
    >>> r = routereval_metrics(np.array([[1., 0.], [0., 1.]]), np.array([0, 0]), reference=0.5)
    >>> r["mu_o"], r["v_r"], r["v_b"], r["e_p"]
    (0.5, 1.0, 1.0, 0.0)
    """
    s, c = _sc(scores, choices)
    bs = best_single(s)
    has_ref = reference is not None or benchmark is not None
    return {
        "mu_o": mu_o(s, c),
        "v_r": v_r(s, c, reference, benchmark=benchmark) if has_ref else float("nan"),
        "v_b": v_b(s, c),
        "e_p": selection_entropy(c, s.shape[1]),
        "prob_entropy": mean_prob_entropy(probs) if probs is not None else float("nan"),
        "oracle_mean": oracle_mean(s),
        "best_single_mean": bs.quality,
        "best_single_index": bs.index,
    }
