"""Shared contract checks every router must pass.

Usage (two lines per router, in any ``tests/test_*.py``)::

    from router_contract import RouterContract
    from recsys_router.registry import make_router

    class TestKnn(RouterContract):
        router_factory = staticmethod(lambda: make_router("knn"))

Class attributes tune the checks:

``deterministic``      routing a set equals routing each query alone (batch == single)
``learns``             the router learns from train data: its mean test score must reach
                       the uniform-random expectation (plus ``quality_margin``)
``supports_wtp``       ``route(wtp=...)`` is meaningful (wtp=0 -> cheapest; huge -> argmax)
``budget_mode``        ``"per_query"`` (every choice fits the budget when something fits),
                       ``"mean"`` (average predicted cost ~ budget) or ``None`` (skip)
``n_single``           how many test queries the batch == single check routes one by one

Override the ``data`` fixture (a dict with ``train``/``test`` and optionally ``val``) to
run on other data; the default is the shared ``sim_split`` fixture (300 simulated queries,
5 LLMs). The router is fitted once per test class (``fitted`` fixture); checks that need a
fresh router call ``router_factory()`` again.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError, NotFittedError
from recsys_router.router import Router

__all__ = ["RouterContract", "strip_ground_truth", "mean_routed_score"]


def strip_ground_truth(data: RoutingData, *, keep_costs: bool = False) -> RoutingData:
    """Copy of ``data`` with every score NaN (and costs dropped unless ``keep_costs``)."""
    return RoutingData(data.queries, data.llms, np.full(data.shape, np.nan),
                       data.costs if keep_costs else None, name=data.name, source=data.source)


def mean_routed_score(data: RoutingData, choice: np.ndarray) -> float:
    """Mean true score of the chosen column per query (mu_o)."""
    return float(np.nanmean(data.scores[np.arange(data.n_queries), choice]))


class RouterContract:
    """Mixin of contract tests; subclass it as ``Test<Name>`` and set ``router_factory``."""

    router_factory = None
    deterministic = True
    learns = True
    supports_wtp = True
    budget_mode = "per_query"
    quality_margin = 0.0
    n_single = 12

    # ------------------------------------------------------------------ fixtures
    @pytest.fixture(scope="class")
    def data(self, sim_split):
        return sim_split

    @pytest.fixture(scope="class")
    def fit_result(self, data):
        """``(router, value returned by fit)``, fitted once per test class."""
        router = self.router_factory()
        return router, router.fit(data["train"], data.get("val"))

    @pytest.fixture(scope="class")
    def fitted(self, fit_result):
        return fit_result[0]

    def _fresh(self) -> Router:
        r = self.router_factory()
        assert isinstance(r, Router), f"router_factory returned {type(r).__name__}, not a Router"
        return r

    # ------------------------------------------------------------------ construction
    def test_unfitted_use_raises(self, data):
        r = self._fresh()
        assert not r.is_fitted
        with pytest.raises(NotFittedError):
            r.route(data["test"])
        with pytest.raises(NotFittedError):
            r.predict_scores(data["test"])

    def test_fit_returns_self(self, fit_result, data):
        router, returned = fit_result
        assert returned is router
        assert router.is_fitted
        assert router.llm_names_ == data["train"].llm_names

    def test_params_are_attributes_and_round_trip(self):
        r = self._fresh()
        sig = inspect.signature(type(r).__init__)
        kinds = {p.kind for name, p in sig.parameters.items() if name != "self"}
        assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}, \
            "constructors must list every hyperparameter explicitly (no *args/**kwargs)"
        params = r.get_params()
        assert set(params) == set(type(r)._param_names())
        for k, v in params.items():
            assert getattr(r, k) is v
        clone = type(r)(**params)
        assert clone.get_params() == params
        assert not clone.is_fitted
        assert not [k for k in vars(clone) if k.endswith("_") and not k.startswith("_")], \
            "the constructor must not set learned (trailing-underscore) state"
        with pytest.raises(ValueError):
            clone.set_params(definitely_not_a_parameter=1)

    # ------------------------------------------------------------------ prediction
    def test_predict_scores_shape_and_finite(self, fitted, data):
        test = data["test"]
        before = test.scores.copy()
        s = fitted.predict_scores(test)
        assert s.shape == (test.n_queries, test.n_llms)
        assert np.isfinite(s).all()
        np.testing.assert_array_equal(test.scores, before)  # data not mutated

    def test_route_returns_pool_names(self, fitted, data):
        test = data["test"]
        names = fitted.route(test)
        assert names.shape == (test.n_queries,)
        assert set(names) <= set(test.llm_names)
        idx = fitted.route_indices(test)
        assert [test.llm_names[i] for i in idx] == list(names)

    def test_batch_equals_single(self, fitted, data):
        if not self.deterministic:
            pytest.skip("router is not batch-invariant")
        test = data["test"]
        n = min(self.n_single, test.n_queries)
        whole = fitted.route(test)[:n]
        alone = [fitted.route(test.subset([i]))[0] for i in range(n)]
        assert list(whole) == alone

    def test_same_seed_same_decisions(self, fitted, data):
        again = self._fresh().fit(data["train"], data.get("val"))
        assert list(again.route(data["test"])) == list(fitted.route(data["test"]))

    def test_candidates(self, fitted, data):
        test = data["test"]
        allowed = test.llm_names[-2:]
        assert set(fitted.route(test, candidates=allowed)) <= set(allowed)
        with pytest.raises(ValueError):
            fitted.route(test, candidates=["no-such-llm"])

    def test_wtp_zero_picks_cheapest(self, fitted, data):
        if not self.supports_wtp:
            pytest.skip("router has no willingness-to-pay mode")
        test = data["test"]
        costs = fitted.predict_costs(test)
        choice = fitted.route_indices(test, wtp=0.0)
        np.testing.assert_allclose(costs[np.arange(test.n_queries), choice], costs.min(axis=1))

    def test_huge_wtp_equals_argmax(self, fitted, data):
        if not self.supports_wtp:
            pytest.skip("router has no willingness-to-pay mode")
        test = data["test"]
        assert list(fitted.route(test, wtp=1e12)) == list(fitted.route(test))

    def test_budget_policy(self, fitted, data):
        if self.budget_mode is None:
            pytest.skip("budget checked in the router's own tests")
        test = data["test"]
        mc = np.sort(np.nan_to_num(fitted.mean_costs_, nan=np.inf))
        budget = float((mc[len(mc) // 2] + mc[len(mc) // 2 - 1]) / 2) if len(mc) > 1 else float(mc[0])
        costs = fitted.predict_costs(test)
        choice = fitted.route_indices(test, budget=budget)
        chosen = costs[np.arange(test.n_queries), choice]
        if self.budget_mode == "per_query":
            feasible = costs.min(axis=1) <= budget
            assert (chosen[feasible] <= budget + 1e-12).all()
            np.testing.assert_allclose(chosen[~feasible], costs.min(axis=1)[~feasible])
        else:
            spread = float(np.nanmax(costs) - np.nanmin(costs))
            assert chosen.mean() <= budget + 0.2 * spread

    def test_llm_order_mismatch_raises(self, fitted, data):
        test = data["test"]
        shuffled = test.subset(llms=list(reversed(test.llm_names)))
        with pytest.raises(ValueError):
            fitted.route(shuffled)

    def test_selection_probs_valid(self, fitted, data):
        probs = fitted.selection_probs(data["test"])
        if probs is None:
            pytest.skip("router defines no selection probabilities")
        assert probs.shape == data["test"].shape
        assert (probs >= -1e-12).all()
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)

    def test_no_ground_truth_peeking(self, fitted, data):
        """Routers that do not declare ``uses_ground_truth`` decide without the test scores."""
        if fitted.uses_ground_truth:
            pytest.skip("oracle-style router reads ground truth by design")
        test = data["test"]
        blind = strip_ground_truth(test)
        assert list(fitted.route(blind)) == list(fitted.route(test))

    def test_text_requirement(self, fitted, data):
        test = data["test"]
        q = test.queries.copy()
        q["text"] = q["text"].astype(object)
        q.loc[0, "text"] = None
        holed = RoutingData(q, test.llms, test.scores, test.costs, name="holed")
        if fitted.uses_text:
            with pytest.raises(DataValidationError, match="text"):
                fitted.route(holed)
        else:
            assert len(fitted.route(holed)) == test.n_queries

    def test_beats_random_on_simulated_data(self, fitted, data):
        if not self.learns:
            pytest.skip("router does not learn from data")
        test = data["test"]
        mu = mean_routed_score(test, fitted.route_indices(test))
        random_mu = float(np.nanmean(np.nanmean(test.scores, axis=1)))
        assert mu >= random_mu + self.quality_margin, (mu, random_mu)
