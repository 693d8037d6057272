"""Cost-aware wrapper for any registered score-predicting router (registered as ``"cost-aware"``).

Reference: Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System" (2024),
willingness-to-pay utility ``score - cost / lambda``; the penalty is chosen on a held-out
part of the *training* queries by ORBIT's nAUC (Lai et al., ORBIT toolbox), never on test.

The wrapped router predicts ``P(score)`` per (query, LLM); this wrapper returns
``P - penalty * mean_cost / max(mean_cost)`` so that, at the largest budget of ORBIT's
sweep (plain argmax), a cheap LLM that is predicted almost as good as the dearest one is
preferred. With ``cost_model="ridge"`` the predicted cost of each (query, LLM) is a ridge
regression of the log cost on the query embedding (fitted on the training queries), so
ORBIT's budget sweep gets per-query budgets instead of one mean cost per LLM. Without
costs, or when no LLM has a recorded (finite) cost, it is the wrapped router unchanged.
``benchmarks/bench_quality.py`` names it ``ca-<name>`` (ridge costs) and ``cam-<name>``
(mean costs).
"""

from __future__ import annotations

import copy
import logging

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.errors import ArgumentValueError
from recsys_router.hyperparams import (check_fraction, check_number, check_seed,
                                       held_out_count)
from recsys_router.metrics.orbit import orbit_metrics
from recsys_router.policies import fill_unknown_costs
from recsys_router.router import Router
from recsys_router.state import FLOAT, STR, Arr, DictOf, Opt, Part, number_keys
from recsys_router.sweep_check import has_costs, held_out_nauc

from .inner_state import InnerRouterState

__all__ = ["CostAwareRouter", "PENALTY_GRID"]

log = logging.getLogger(__name__)

#: fewest held-out queries the penalty is chosen on (else it is 0)
MIN_HELD_OUT = 10
#: penalties tried when ``penalty="auto"`` (units: predicted score per max mean LLM cost)
PENALTY_GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3)


def _cost_scale(mean_costs) -> float | None:
    """The penalty's cost unit: the largest finite mean LLM cost (at least 1e-12), or None
    when no LLM has a finite mean cost (no costs, or every one unrecorded).

    Example
    -------
    >>> _cost_scale(np.array([np.nan, 2.0, 0.5])), _cost_scale(np.array([np.nan, np.nan]))
    (2.0, None)
    """
    if mean_costs is None:
        return None
    mc = np.asarray(mean_costs, dtype=np.float64)
    mc = mc[np.isfinite(mc)]
    return max(float(mc.max()), 1e-12) if mc.size else None


class CostAwareRouter(InnerRouterState, Router):
    """Score router plus a cost penalty chosen on an inner validation split.

    Registered as ``"cost-aware"``.

    Parameters
    ----------
    base : str
        Registry name of the wrapped router (e.g. ``"mf"``).
    base_params : dict, optional
        Its constructor parameters.
    penalty : float or "auto"
        Fixed penalty (finite, >= 0), or ``"auto"``: the :data:`PENALTY_GRID` value of
        highest nAUC on ``val_fraction`` of the training queries (the wrapped router is then
        refitted on all of them); on a sparse training matrix, with fewer than
        :data:`MIN_HELD_OUT` fully observed held-out queries, the nAUC of routing each
        held-out query among its observed LLMs, and 0 when that cannot be scored either
        (``penalty_note_`` says which).
    val_fraction : float
    cost_model : {"mean", "ridge"}
        Predicted costs: each LLM's mean train cost, or a per-LLM ridge regression of
        ``log(cost)`` on the query embedding (needs ``encoder``; one that learns from text,
        e.g. ``tfidf``, is fitted on a copy with the training texts and kept as
        ``features_encoder_``).
    ridge_alpha : float
    encoder : object, optional
        Given to the wrapped router when it takes one (lets the runner share embeddings);
        also the features of the ``ridge`` cost model (default ``"minilm"``).
    seed : int

    Attributes
    ----------
    penalty_ : float
        The penalty in use.
    penalty_note_ : str
        How it was chosen ("fixed", the held-out queries it was scored on, or why it is 0);
        :meth:`summary` and the log say it too.
    val_nauc_ : dict
        With ``penalty="auto"``: held-out nAUC of each penalty tried.
    router_ : Router
        The wrapped router, fitted on all the training queries.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(120, 3, 2, seed=0)
    >>> r = CostAwareRouter("knn", {"k": 5}, penalty=0.1).fit(d)
    >>> r.predict_scores(d).shape
    (120, 3)
    """

    uses_text = True

    #: the wrapped router, the penalty, the cost ridge's numbers and (with it) the encoder
    _state_ = {"penalty_": FLOAT, "penalty_note_": STR, "val_nauc_": DictOf(Opt(FLOAT), 1000),
               "cost_coef_": Arr("float64", ("dim", "n_llms"), optional=True),
               "cost_intercept_": Arr("float64", ("n_llms",), optional=True),
               "features_encoder_": Part(optional=True)}

    def _get_state(self):
        from recsys_router.encoders.state import save_encoder_part
        fields, arrays = super()._get_state()
        if self.cost_model_ is not None:
            arrays["cost_coef_"] = np.asarray(self.cost_model_[0], np.float64)
            arrays["cost_intercept_"] = np.asarray(self.cost_model_[1], np.float64)
        fields["features_encoder_"] = None
        if self.cost_model_ is not None:
            info, enc = save_encoder_part("features_encoder_", self.cost_model_[2])
            fields.update(info)
            arrays.update(enc)
        return fields, arrays

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.encoders.state import load_encoder_part
        router = super()._from_state(params, fields, arrays)
        router.val_nauc_ = number_keys(router.val_nauc_)
        if (router.cost_coef_ is None) != (router.cost_intercept_ is None):
            raise ValueError(f"{cls.__name__}: cost_coef_ and cost_intercept_ go together")
        router.cost_model_, router.features_encoder_ = None, None
        if router.cost_coef_ is not None:
            if fields.get("features_encoder_") is None:
                raise ValueError(f"{cls.__name__}: a cost ridge needs its features_encoder_")
            router.features_encoder_ = load_encoder_part("features_encoder_", fields, arrays,
                                                         cls.__name__)
            router.cost_model_ = (router.cost_coef_, router.cost_intercept_,
                                  router.features_encoder_)
        return router

    def __init__(self, base: str = "mf", base_params: dict | None = None, penalty="auto",
                 val_fraction: float = 0.25, cost_model: str = "mean", ridge_alpha: float = 1.0,
                 encoder=None, seed: int = 0):
        self.base = base
        self.base_params = base_params
        self.penalty = penalty
        self.val_fraction = val_fraction
        self.cost_model = cost_model
        self.ridge_alpha = ridge_alpha
        self.encoder = encoder
        self.seed = seed

    def _make(self) -> Router:
        from recsys_router.router_spec import resolve_router  # noqa: PLC0415
        return resolve_router(self.base, self.base_params, encoder=self.encoder,
                              seed=self.seed)[0]

    def _fitted_encoder(self, train: RoutingData):
        """The cost ridge's encoder for ``train``: ``encoder`` (default ``"minilm"``), and for
        one that learns from text (e.g. ``tfidf``) a copy fitted on the training texts (a
        given encoder object is never changed)."""
        from recsys_router.encoders import get_encoder  # noqa: PLC0415
        enc = self.encoder if self.encoder is not None else "minilm"
        enc = get_encoder(enc) if isinstance(enc, str) else enc
        if getattr(enc, "needs_fit", False):
            enc = copy.deepcopy(enc).fit(list(train.texts))
        return enc

    @staticmethod
    def _features(enc, data: RoutingData) -> np.ndarray:
        return np.asarray(enc.encode(list(data.texts), query_ids=list(data.query_ids)))

    def _fit_costs(self, train: RoutingData):
        """Per-LLM ridge of log cost on embeddings: (coef (d, m), intercept (m,), the fitted
        encoder) or None."""
        if self.cost_model == "mean" or train.costs is None or not train.has_text:
            return None
        from sklearn.linear_model import Ridge  # noqa: PLC0415
        enc = self._fitted_encoder(train)
        X = self._features(enc, train)
        coef, icpt = np.zeros((X.shape[1], train.n_llms)), np.zeros(train.n_llms)
        for j in range(train.n_llms):
            ok = np.isfinite(train.costs[:, j])
            if ok.sum() < 2:
                icpt[j] = np.log(np.nanmean(train.costs[:, j]) + 1e-9) if ok.any() else 0.0
                continue
            m = Ridge(alpha=self.ridge_alpha).fit(X[ok], np.log(train.costs[ok, j] + 1e-9))
            coef[:, j], icpt[j] = m.coef_, m.intercept_
        return coef, icpt, enc

    def _costs(self, model, mean_costs, data: RoutingData) -> np.ndarray | None:
        """Predicted costs; an LLM with no recorded training cost gets the dearest known
        prediction of its row (:func:`~recsys_router.policies.fill_unknown_costs`)."""
        if mean_costs is None:
            return None
        mc = np.asarray(mean_costs, dtype=np.float64)
        if model is None:
            return np.broadcast_to(fill_unknown_costs(mc), (data.n_queries, len(mc))).copy()
        coef, icpt, enc = model
        return fill_unknown_costs(np.exp(self._features(enc, data) @ coef + icpt[None, :]),
                                  np.isfinite(mc))

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        pen = self.penalty
        if not (isinstance(pen, str) and pen == "auto"):
            pen = check_number(pen, "penalty (or 'auto')", low=0)
        check_fraction(self.val_fraction, "val_fraction")
        check_seed(self.seed)
        check_number(self.ridge_alpha, "ridge_alpha", low=0)
        if not isinstance(self.cost_model, str) or self.cost_model not in ("mean", "ridge"):
            # before the wrapped router's fit, which may take minutes
            raise ArgumentValueError(f"cost_model must be 'mean' or 'ridge', "
                                     f"got {str(self.cost_model)[:80]!r}")
        self.val_nauc_ = {}
        if pen == "auto":
            pen, self.penalty_note_ = 0.0, "0: the training data has no costs"
            if train.costs is not None and train.n_queries < 40:
                self.penalty_note_ = f"0: {train.n_queries} < 40 training queries"
            elif train.costs is not None:
                pen, self.penalty_note_ = self._choose(train)
            log.info("cost-aware(%s): penalty %s", self.base, self.penalty_note_)
        else:
            self.penalty_note_ = "fixed"
        self.penalty_ = float(pen)
        self.router_ = self._make().fit(train, val)
        self.cost_model_ = self._fit_costs(train)
        self.features_encoder_ = None if self.cost_model_ is None else self.cost_model_[2]

    def _choose(self, train: RoutingData) -> tuple[float, str]:
        """The penalty of highest held-out nAUC and how it was scored.

        The held-out queries whose every score and cost is observed are scored by ORBIT's
        nAUC when there are at least :data:`MIN_HELD_OUT` of them; else (sparse training
        matrices) every held-out query with an observed score is routed among its observed
        LLMs (:func:`~recsys_router.sweep_check.held_out_nauc`), which needs a finite cost on
        every observed cell; else the penalty is 0.
        """
        rng = np.random.default_rng(self.seed)
        perm = rng.permutation(train.n_queries)
        n_val = held_out_count(self.val_fraction, train.n_queries, MIN_HELD_OUT, "cost-aware")
        inner, held = train.subset(np.sort(perm[n_val:])), train.subset(np.sort(perm[:n_val]))
        complete = ~np.isnan(held.scores).any(axis=1) & ~np.isnan(held.costs).any(axis=1)
        observed = (~np.isnan(held.scores)).any(axis=1)
        if complete.sum() >= MIN_HELD_OUT:
            held, how = held.subset(np.flatnonzero(complete)), "complete"
        elif observed.sum() >= MIN_HELD_OUT and has_costs(held):
            held, how = held.subset(np.flatnonzero(observed)), "observed"
        else:
            return 0.0, (f"0: {int(complete.sum())} held-out queries have every score and cost "
                         f"observed and the observed cells cannot be scored instead (fewer than "
                         f"{MIN_HELD_OUT} queries, or an observed cell without a cost)")
        router = self._make().fit(inner)
        P = router.predict_scores(held)
        C = self._costs(self._fit_costs(inner), router.mean_costs_, held)
        scale = _cost_scale(router.mean_costs_)
        if scale is None:
            return 0.0, "0: no LLM has a recorded cost on the inner training queries"
        shift = C / scale
        best, best_v = 0.0, -np.inf
        for p in PENALTY_GRID:
            if how == "complete":
                v = orbit_metrics(P - p * shift, C, held.scores, held.costs)["nauc"]
            else:
                v = held_out_nauc(P - p * shift, C, held.scores, held.costs)
            self.val_nauc_[p] = float(v)
            if v > best_v + 1e-9:
                best, best_v = p, v
        where = (f"{held.n_queries} held-out queries with every score and cost observed"
                 if how == "complete" else
                 f"the observed cells of {held.n_queries} held-out queries (only "
                 f"{int(complete.sum())} fully observed)")
        return best, f"{best:g}: best nAUC on {where}"

    def summary(self) -> str:
        """One line for reports: the penalty in use and how it was chosen."""
        self._check_fitted()
        return f"penalty {self.penalty_:g} ({self.penalty_note_})"

    def predict_scores(self, data: RoutingData) -> np.ndarray:
        """The wrapped router's predicted scores minus the cost penalty, over the whole pool.

        ``P - penalty_ * C / max(mean_costs_)`` with ``C`` what :meth:`predict_costs` predicts
        (the cost routing uses), so an LLM added by :meth:`add_llm` (scored by its probe
        head) is penalised by its estimated mean cost like every fitted LLM. The cost unit is
        the largest finite mean cost of the fitted LLMs, so adding or removing an LLM does not
        change it; without a finite one the wrapped router's scores are returned unchanged.

        Returns
        -------
        ndarray of float64, shape (n_queries, n_llms)
        """
        P = super().predict_scores(data)
        scale = _cost_scale(self.mean_costs_)
        if scale is None:  # no costs, or none recorded: the wrapped router unchanged
            return P
        return P - self.penalty_ * self.predict_costs(data) / scale

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        # un-penalised: predict_scores applies the penalty once the pool is assembled
        return np.asarray(self.router_.predict_scores(data), dtype=np.float64)

    def _predict_costs(self, data: RoutingData) -> np.ndarray:
        return self._costs(self.cost_model_, self.mean_costs_, data)
