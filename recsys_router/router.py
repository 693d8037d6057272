"""The router contract: one base class holding the whole public API.

Every router (classic baseline, collaborative-filtering model, loaded artifact) is a
:class:`Router`. Conventions (scikit-learn's): the constructor stores hyperparameters
only (``sklearn.base.clone`` works; see :meth:`Router.get_params`); ``fit`` returns
``self``; learned state ends in ``_``; using a router before ``fit`` raises :class:`~recsys_router.errors.NotFittedError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from .data import RoutingData
from .errors import NotFittedError, RepeatedNameError, few
from .numeric import shown
from .coldstart.pool import core_view, observed_range, pool_changed, pool_costs, predict_pool
from .policies import apply_policy, check_policy_values, fill_unknown_costs
# add_llm / remove_llm / llm_mean_costs: the pool methods every router shares
from .router_pool import LLMPoolMixin
# get_params / set_params / params_at_fit / _freeze_params: the hyperparameter methods
from .router_params import ParamsMixin
from .state import Part, StateError, check_state, collect_state

__all__ = ["Router", "mean_llm_prices", "custom_routing"]


def mean_llm_prices(llms) -> np.ndarray:
    """Each LLM's price as the mean of its known input and output prices (USD per 1M tokens);
    NaN where neither is known.

    Parameters
    ----------
    llms : pandas.DataFrame
        ``RoutingData.llms`` (columns ``input_price``, ``output_price``).

    Returns
    -------
    numpy.ndarray
        float64, one price per row of ``llms``.

    Example
    -------
    >>> import pandas as pd
    >>> mean_llm_prices(pd.DataFrame({"input_price": [1.0, 2.0, np.nan],
    ...                               "output_price": [3.0, np.nan, np.nan]})).tolist()
    [2.0, 2.0, nan]
    """
    prices = llms[["input_price", "output_price"]].to_numpy(dtype=np.float64)
    known = np.isfinite(prices).sum(axis=1)
    return np.where(known > 0, np.nansum(prices, axis=1) / np.maximum(known, 1), np.nan)


def custom_routing(router) -> bool:
    """Whether the router decides with its own ``route_indices`` (zero's budget mix, a
    cascade's chain), not by a policy over its predictions: ``evaluate`` then records its
    every decision through :meth:`Router.decide`, an artifact routes through it.

    Example
    -------
    >>> from recsys_router.models.baselines import BestSingleRouter, ZeroRouter
    >>> custom_routing(BestSingleRouter()), custom_routing(ZeroRouter())
    (False, True)
    """
    return type(router).route_indices is not Router.route_indices


class Router(ParamsMixin, LLMPoolMixin, ABC):
    """Abstract base class of every router.

    Subclasses implement ``_fit(train, val)`` (setting attributes ending in ``_``) and
    ``_predict_scores(data)``. Everything else (cost prediction, candidate masks,
    policies, parameter introspection) is shared here.

    Example
    -------
    >>> from recsys_router.models.baselines import BestSingleRouter  # doctest: +SKIP
    >>> r = BestSingleRouter().fit(train)               # doctest: +SKIP
    >>> r.route(test, wtp=100.0)                        # doctest: +SKIP
    """

    #: whether the router reads query text (via an encoder) to predict
    uses_text: bool = False
    #: whether predictions read ground-truth scores of the data routed (oracle-style)
    uses_ground_truth: bool = False
    #: whether predictions read each query's ``task`` label, so that a query routed without
    #: one may get another LLM (task-best, task-residual, graph; a safe fallback whose
    #: decisions differ by task). An exported router records it in its manifest.
    uses_tasks: bool = False
    #: whether a fit takes seconds, so that wrappers may repeat it (the safe fallback's
    #: ``inner_folds="auto"`` then holds out every training query once)
    cheap_fit: bool = False
    #: the safe fallback's ``inner_folds="auto"`` also holds out every training query once
    #: (5 inner folds, 6 fits) when the training set has at most this many observed cells:
    #: the small sets where one held-out fifth is noisiest (0: never, unless ``cheap_fit``)
    fold_max_cells: int = 0
    #: whether ``fit`` holds out a part of its own training queries to choose what it keeps
    #: (Lightning early stopping): the safe fallback with one inner split then keeps its
    #: inner fit instead of refitting on every training query (a parameter named
    #: ``val_fraction`` alone says nothing: others use one to tune a setting, then refit)
    holds_out_val: bool = False
    #: whether :meth:`add_llm` places a new LLM in the learned state
    #: (``_add_llm(name, probes, cost, weights)`` / ``_remove_llm(column)``, ``weights`` the
    #: validated probe weights, mean 1); otherwise it gets a kNN head over its probes
    native_add_llm: bool = False
    #: fewest probe records :meth:`add_llm` accepts
    min_probes: int = 2
    #: logged-feedback losses the ``logged`` router can train this router with (one revealed
    #: LLM per query; :mod:`recsys_router.feedback.logged`): every router sees the log as it
    #: is (``naive``); collaborative-filtering routers also take ``ips``, ``snips``, ``dr``
    feedback_losses: tuple = ("naive",)
    #: declared fitted state of this class (merged along the class hierarchy by
    #: :meth:`state_spec`): attribute name -> :class:`~recsys_router.state.Arr` or JSON spec
    _state_: dict = {}
    #: whether what the router pays on a query can differ from its chosen LLM's cost (e.g. a
    #: cascade pays every LLM it tried): :meth:`decide` then says what it pays, and
    #: ``evaluate`` takes each of its decisions from :meth:`decide` (as it does for every
    #: router overriding :meth:`route_indices`, see :func:`custom_routing`)
    own_costs: bool = False

    # ------------------------------------------------------------------ fitting
    def fit(self, train: RoutingData, val: RoutingData | None = None) -> "Router":
        """Learn from the train interaction matrix (and optionally a validation set).

        Returns
        -------
        Router
            ``self``.
        """
        if not isinstance(train, RoutingData):
            raise TypeError(f"fit expects a RoutingData, got {type(train).__name__}")
        # a refit that fails leaves an unfitted router, never the new pool's LLM names on
        # the previous fit's learned state
        self.fitted_ = False
        self.llm_names_ = list(train.llm_names)
        self.mean_costs_ = train.mean_costs() if train.costs is not None else None
        self.llm_prices_ = mean_llm_prices(train.llms)
        # the training scores' range, from which add_llm derives the scale probe scores must
        # lie on; artifacts carry it in their manifest (score_range), not in the router state
        self.score_range_ = observed_range(train.scores)
        self.core_llms_, self.probe_llms_, self.llm_info_ = None, {}, {}
        self._fix_params()
        self._fit(train, val)
        self.fitted_ = True
        return self

    @abstractmethod
    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        """Learn state; called by :meth:`fit`."""

    @abstractmethod
    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        """Predicted performance, shape (n_queries, n_llms_)."""

    @property
    def is_fitted(self) -> bool:
        return bool(getattr(self, "fitted_", False))

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit(train) first")

    def _check_llms(self, data: RoutingData) -> None:
        if list(data.llm_names) != self.llm_names_:
            raise ValueError(f"{type(self).__name__} was fitted on LLMs {self.llm_names_} but got data "
                             f"with LLMs {data.llm_names}; subset the data to the same pool and order")

    # ------------------------------------------------------------------ declared state
    @classmethod
    def state_spec(cls) -> dict:
        """Every declared piece of fitted state: the pool bookkeeping
        (:func:`~recsys_router.state.pool.pool_spec`) plus the ``_state_`` of each
        class in the hierarchy (name -> spec)."""
        from .state.pool import pool_spec
        spec = pool_spec()
        for klass in reversed(cls.__mro__):
            spec.update(klass.__dict__.get("_state_", {}))
        return spec

    def _get_state(self) -> tuple[dict, dict]:
        """The fitted state as data: ``(JSON fields, {name: ndarray})``.

        The default reads the attributes declared by :meth:`state_spec`; families holding
        encoders, networks or inner routers extend it (see ``recsys_router.export``).

        Example
        -------
        >>> from recsys_router.models.baselines import BestSingleRouter  # doctest: +SKIP
        >>> fields, arrays = BestSingleRouter().fit(train)._get_state()  # doctest: +SKIP
        """
        from .state.pool import heads_state
        self._check_fitted()
        fields, arrays = collect_state(self, self.state_spec())
        fields["probe_llms_"], heads = heads_state(self)
        return fields, {**arrays, **heads}

    @classmethod
    def _from_state(cls, params: dict, fields: dict, arrays: dict) -> "Router":
        """Rebuild a fitted router from validated state (the inverse of :meth:`_get_state`).

        Parameters
        ----------
        params : dict
            Constructor hyperparameters (JSON values).
        fields : dict
            JSON pieces, already checked against :meth:`state_spec`.
        arrays : dict
            Arrays (name -> ndarray), already checked against :meth:`state_spec`.

        Returns
        -------
        Router
            A fitted router: ``cls(**params)`` with every declared attribute set.
        """
        router = cls(**params)
        try:
            router._fix_params()
        except ValueError as exc:  # a stored parameter that fit would refuse
            raise StateError(f"{cls.__name__} parameters: {exc}") from exc
        for name, spec in cls.state_spec().items():
            if not isinstance(spec, Part):  # nested parts are restored by the family
                setattr(router, name, fields[name] if name in fields else arrays.get(name))
        from .state.pool import heads_from_state
        router.probe_llms_ = heads_from_state(router, fields.get("probe_llms_"), arrays, cls.__name__)
        router.llm_info_ = router.llm_info_ or {}
        router.fitted_ = True
        return router

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        """Refuse stored hyperparameters that would make the router load or import
        something the data chose (families whose parameters name modules override this;
        ``encoder`` and encoder options are checked before, by ``router_state``)."""

    @classmethod
    def _check_state(cls, fields: dict, headers: dict, dims: dict) -> dict:
        """Validate stored state against :meth:`state_spec` (families with nested parts
        extend this); returns the JSON fields converted to their declared types."""
        return check_state(cls.state_spec(), fields, headers, dims)

    # ------------------------------------------------------------------ prediction
    def predict_scores(self, data: RoutingData) -> np.ndarray:
        """Predicted performance of every LLM on every query.

        Returns
        -------
        ndarray of float64, shape (n_queries, n_llms)
        """
        self._check_fitted()
        self._check_llms(data)
        if pool_changed(self):
            out = predict_pool(self, data, np.asarray(self._predict_scores(core_view(self, data))))
        else:
            out = np.asarray(self._predict_scores(data), dtype=np.float64)
        if out.shape != (data.n_queries, len(self.llm_names_)):
            raise RuntimeError(f"{type(self).__name__} predicted shape {out.shape}, expected "
                               f"{(data.n_queries, len(self.llm_names_))}")
        return out

    def predict_costs(self, data: RoutingData) -> np.ndarray | None:
        """Predicted cost per (query, LLM); default: each LLM's mean train cost.

        Returns None when the training data had no costs. An LLM with no recorded training
        cost is predicted the dearest known mean cost of the pool (never cheaper than an LLM
        whose cost is known; :func:`~recsys_router.policies.fill_unknown_costs`); 0 when no
        LLM has a known cost. Subclasses with per-query costs implement ``_predict_costs``.
        ``data`` must have the router's LLMs in its order, as for :meth:`predict_scores`.
        """
        self._check_fitted()
        self._check_llms(data)
        if self.mean_costs_ is None:
            return None
        if pool_changed(self):
            core = self._predict_costs(core_view(self, data))
            return None if core is None else pool_costs(self, data, core)
        return self._predict_costs(data)

    def _predict_costs(self, data: RoutingData) -> np.ndarray:
        mc = fill_unknown_costs(np.asarray(self.mean_costs_, dtype=np.float64))
        return np.broadcast_to(mc, (data.n_queries, len(mc))).copy()

    def selection_probs(self, data: RoutingData) -> np.ndarray | None:
        """Probability of selecting each LLM per query, when the router defines one.

        None after :meth:`add_llm` / :meth:`remove_llm` on a router without a native
        ``add_llm`` (its probabilities were learned over the fitted pool only).
        """
        self._check_fitted()
        if pool_changed(self):
            return None
        return self._selection_probs(data)

    def _selection_probs(self, data: RoutingData) -> np.ndarray | None:
        return None

    def candidate_mask(self, candidates: Sequence[str] | None) -> np.ndarray | None:
        """Boolean mask over ``llm_names_`` for a candidate subset (None = all); an unknown name
        is a ``ValueError``, a name given twice a :class:`~recsys_router.errors.RepeatedNameError`."""
        self._check_fitted()
        if candidates is None:
            return None
        if isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__iter__") \
                or not all(isinstance(c, str) for c in candidates):
            raise ValueError(f"candidates must be a list of LLM names, got "
                             f"{type(candidates).__name__} {shown(candidates)}")
        known = {n: i for i, n in enumerate(self.llm_names_)}
        bad = [c for c in candidates if c not in known]
        if bad or not len(candidates):  # a few names of each list: the message stays short
            raise ValueError(f"unknown candidate LLM(s) {few(dict.fromkeys(bad))}; this router knows "
                             f"{few(self.llm_names_, 20)}"
                             if bad else "candidates must name at least one LLM")
        mask = np.zeros(len(self.llm_names_), dtype=bool)
        mask[[known[c] for c in candidates]] = True
        if mask.sum() < len(candidates):  # so never more names than the pool has LLMs
            seen: set = set()
            twice = [c for c in candidates if c in seen or seen.add(c)]
            raise RepeatedNameError(f"candidates must name each LLM once: {few(dict.fromkeys(twice))} "
                                    f"repeated ({len(candidates):,} names, {int(mask.sum())} distinct)")
        return mask

    def route_indices(self, data: RoutingData, *, wtp: float | None = None,
                      budget: float | None = None, candidates: Sequence[str] | None = None) -> np.ndarray:
        """Chosen column index per query (see :meth:`route`)."""
        scores = self.predict_scores(data)
        costs = self.predict_costs(data)
        choice, _ = apply_policy(scores, costs, wtp=wtp, budget=budget,
                                 mask=self.candidate_mask(candidates))
        return choice

    def decide(self, data: RoutingData, *, wtp: float | None = None, budget: float | None = None,
               candidates: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Chosen column per query and the cost each decision really pays.

        The hook :func:`~recsys_router.evaluation.runner.evaluate` records its decisions
        through: the policy is none (argmax), ``wtp`` or ``budget`` as in :meth:`route`. The
        default pays the chosen LLM's true cost in ``data`` (NaN where it is unknown or
        ``data`` has no costs). A router whose realised cost differs (a cascade pays every
        LLM it tried) overrides this, sets :attr:`own_costs` and makes
        :meth:`route_indices` agree with it. ``evaluate`` records from here every decision
        of such a router and of any router overriding :meth:`route_indices` (zero's budget
        mix; :func:`custom_routing`); the others' it takes from their predictions (for them
        the same choices and costs as this default, without predicting once per operating
        point).

        Returns
        -------
        (ndarray of int64, ndarray of float64), each shape (n_queries,)
            Chosen column of ``llm_names_`` and realised cost per query.

        Example
        -------
        >>> from recsys_router.models.baselines import BestSingleRouter
        >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[.9, .5], [.9, .5]], [[3., 1.], [2., 1.]])
        >>> ch, paid = BestSingleRouter().fit(d).decide(d)
        >>> ch.tolist(), paid.tolist()
        ([0, 0], [3.0, 2.0])
        """
        check_policy_values(wtp, budget)
        choice = np.asarray(self.route_indices(data, wtp=wtp, budget=budget,
                                               candidates=candidates), dtype=np.int64)
        if data.costs is None:
            return choice, np.full(len(choice), np.nan)
        return choice, data.costs[np.arange(len(choice)), choice].astype(np.float64)

    def answer_costs(self, data: RoutingData, answers, *,
                     candidates: Sequence[str] | None = None) -> np.ndarray:
        """Cost paid per query when the answer of LLM column ``answers[i]`` is used, given
        the router's own decision (no policy) made it (RouteLLM's thresholds on its scores).
        Default: that LLM's true cost in ``data`` (NaN where unknown); an :attr:`own_costs`
        router adds what deciding cost it (a cascade: the LLMs its chain tried)."""
        a = np.asarray(answers, dtype=np.int64)
        if data.costs is None:
            return np.full(len(a), np.nan)
        return data.costs[np.arange(len(a)), a].astype(np.float64)

    def route(self, data: RoutingData, *, wtp: float | None = None, budget: float | None = None,
              candidates: Sequence[str] | None = None) -> np.ndarray:
        """Choose one LLM per query.

        Parameters
        ----------
        data : RoutingData
            Queries to route (scores may be all NaN unless the router uses ground truth).
        wtp : float, optional
            Willingness to pay (lambda): maximise ``lambda * P_hat - c_hat``.
        budget : float, optional
            Per-query cost budget C: best predicted score with ``c_hat <= C``.
        candidates : list of str, optional
            Restrict the choice to these LLMs (a list of names; one string is refused).

        Returns
        -------
        ndarray of str, shape (n_queries,)
            Chosen LLM names.
        """
        check_policy_values(wtp, budget)
        idx = self.route_indices(data, wtp=wtp, budget=budget, candidates=candidates)
        return np.asarray(self.llm_names_, dtype=object)[idx]
