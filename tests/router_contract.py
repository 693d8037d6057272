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
``n_probes``           probe records given to ``add_llm`` in the pool checks
``keeps_others``       ``add_llm`` / ``remove_llm`` leave the other LLMs' predictions unchanged
                       (the promise of ``Router.remove_llm``; False only for the documented
                       exceptions: ``graph``, whose message passing reads the whole pool, and
                       ``cascade``, whose scores are the one-hot end of its cost chain)

A text router (``uses_text`` and an ``encoder`` parameter) must predict with the encoder
fixed at ``fit``: ``test_encoder_fixed_at_fit`` sets another encoder (and other encoder
options) on a fitted copy and expects the same predictions; other routers skip it. No
router reads a constructor parameter after ``fit`` (``tests/router_contract_params.py``).

Override the ``data`` fixture (a dict with ``train``/``test`` and optionally ``val``) to
run on other data; the default is the shared ``sim_split`` fixture (300 simulated queries,
5 LLMs). The router is fitted once per test class (``fitted`` fixture); checks that need a
fresh router call ``router_factory()`` again.
"""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.encoders import HashingEncoder
from recsys_router.errors import DataValidationError, NotFittedError
from recsys_router.router import Router
from router_contract_params import ParamsFixedContract

__all__ = ["RouterContract", "strip_ground_truth", "mean_routed_score", "with_new_llm",
           "query_encoder", "other_encoder", "ENCODER_OPTION_PARAMS"]

#: constructor parameters holding the options a text router passes to its encoder
ENCODER_OPTION_PARAMS = ("encoder_options", "encoder_kwargs")


def strip_ground_truth(data: RoutingData, *, keep_costs: bool = False) -> RoutingData:
    """Copy of ``data`` with every score NaN (and costs dropped unless ``keep_costs``)."""
    return RoutingData(data.queries, data.llms, np.full(data.shape, np.nan),
                       data.costs if keep_costs else None, name=data.name, source=data.source)


def mean_routed_score(data: RoutingData, choice: np.ndarray) -> float:
    """Mean true score of the chosen column per query (mu_o)."""
    return float(np.nanmean(data.scores[np.arange(data.n_queries), choice]))


def with_new_llm(data: RoutingData, name: str, level: float, cost: float | None) -> RoutingData:
    """Copy of ``data`` with one more LLM column ``name``: score ``level`` (and cost ``cost``)
    on every query."""
    s = np.hstack([data.scores, np.full((data.n_queries, 1), level, np.float32)])
    c = None if data.costs is None else np.hstack(
        [data.costs, np.full((data.n_queries, 1), cost, np.float32)])
    return RoutingData(data.queries, data.llm_names + [name], s, c, name=data.name)


def query_encoder(router: Router):
    """The encoder a fitted router embeds query text with (its ``encoder_``, or that of the
    router it wraps, ``router_``); None when none is found."""
    for _ in range(8):  # wrappers nest a few levels at most
        enc = getattr(router, "encoder_", None)
        if enc is not None:
            return enc
        router = getattr(router, "router_", None)
        if router is None:
            return None
    return None


def other_encoder(router: Router, texts) -> HashingEncoder:
    """A deterministic encoder giving ``texts`` other embeddings than ``router``'s own encoder,
    of the same width (so that reading it at prediction time would change predictions
    silently rather than fail): hashed words alone, no character n-grams."""
    mine = query_encoder(router)
    width = int(getattr(mine, "dim", 0) or 64)
    other = HashingEncoder(width, word_ngrams=(1, 1), char_ngrams=None, word_weight=1.0)
    if mine is not None and getattr(mine, "needs_text", True):
        texts = [str(t) for t in texts]
        assert not np.allclose(np.asarray(other.encode(texts), np.float64),
                               np.asarray(mine.encode(texts), np.float64)), \
            "the replacement encoder must embed the texts differently"
    return other


class RouterContract(ParamsFixedContract):
    """Mixin of contract tests; subclass it as ``Test<Name>`` and set ``router_factory``."""

    router_factory = None
    deterministic = True
    learns = True
    supports_wtp = True
    budget_mode = "per_query"
    quality_margin = 0.0
    n_single = 12
    n_probes = 40
    keeps_others = True

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
        # costs too: never in the fitted order under the data's reversed names, nor a full
        # pool's width for data with fewer LLMs
        for other in (shuffled, test.subset(llms=test.llm_names[:2])):
            with pytest.raises(ValueError, match="was fitted on LLMs"):
                fitted.predict_costs(other)

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

    def test_encoder_fixed_at_fit(self, fitted, data):
        """A text router predicts with the encoder fixed at ``fit``: setting another encoder
        (and other encoder options) afterwards changes no prediction until the next fit,
        while ``get_params`` reports what was set."""
        params = fitted.get_params()
        if not fitted.uses_text or "encoder" not in params:
            pytest.skip("router reads no query text through an encoder parameter")
        test = data["test"]
        r = copy.deepcopy(fitted)
        scores, costs, choice = r.predict_scores(test), r.predict_costs(test), r.route(test)
        probs = r.selection_probs(test)
        changes = {"encoder": other_encoder(r, test.texts[:20])}
        width = int(getattr(query_encoder(r), "dim", 0) or 64)
        changes.update({k: {"dim": width + 1} for k in ENCODER_OPTION_PARAMS if k in params})
        assert r.set_params(**changes) is r
        now = r.get_params()
        assert all(now[k] is v for k, v in changes.items())
        np.testing.assert_array_equal(r.predict_scores(test), scores)
        if costs is None:
            assert r.predict_costs(test) is None
        else:
            np.testing.assert_array_equal(r.predict_costs(test), costs)
        assert list(r.route(test)) == list(choice)
        if probs is not None:
            np.testing.assert_array_equal(r.selection_probs(test), probs)

    # ------------------------------------------------------------------ the LLM pool
    def _probes(self, data, level: float):
        """``(scores, costs, cost)``: ``n_probes`` train queries all scored ``level``, costing
        half the cheapest LLM's mean cost."""
        train = data["train"]
        texts = [str(t) for t in train.texts[:self.n_probes]]
        mc = np.nan_to_num(train.mean_costs(), nan=np.inf) if train.costs is not None else None
        cost = 0.5 * float(mc.min()) if mc is not None and np.isfinite(mc).any() else 0.01
        return {t: level for t in texts}, {t: cost for t in texts}, cost

    def _levels(self, data) -> tuple[float, float]:
        obs = data["train"].scores[data["train"].observed]
        return float(obs.max()), float(obs.min())

    def test_add_llm_can_be_routed_to(self, fitted, data):
        hi, _ = self._levels(data)
        scores, costs, cost = self._probes(data, hi)
        r = copy.deepcopy(fitted)
        assert r.add_llm("onboarded", scores, costs) is r
        assert r.llm_names_ == data["train"].llm_names + ["onboarded"]
        test = with_new_llm(data["test"], "onboarded", hi, cost)
        s = r.predict_scores(test)
        assert s.shape == test.shape and np.isfinite(s).all()
        assert set(r.route(test, candidates=["onboarded"])) == {"onboarded"}
        assert set(r.route(test, candidates=["onboarded", test.llm_names[0]])) <= \
            {"onboarded", test.llm_names[0]}
        with pytest.raises(ValueError):
            r.route(data["test"])    # the pool now has one more LLM

    def test_add_llm_predictions_follow_probes(self, fitted, data):
        hi, lo = self._levels(data)
        means = []
        for level in (hi, lo):
            scores, costs, cost = self._probes(data, level)
            r = copy.deepcopy(fitted).add_llm("onboarded", scores, costs)
            means.append(r.predict_scores(with_new_llm(data["test"], "onboarded", level, cost))[:, -1].mean())
        assert means[0] > means[1], means

    def test_remove_llm_restores_decisions_exactly(self, fitted, data):
        test = data["test"]
        r = copy.deepcopy(fitted)
        before, before_s = list(r.route(test)), r.predict_scores(test)
        scores, costs, _ = self._probes(data, self._levels(data)[0])
        r.add_llm("onboarded", scores, costs)
        assert r.remove_llm("onboarded") is r
        assert r.llm_names_ == test.llm_names
        assert list(r.route(test)) == before
        np.testing.assert_array_equal(r.predict_scores(test), before_s)
        # removing a fitted LLM leaves a routable pool without it
        gone = test.llm_names[0]
        r.remove_llm(gone)
        rest = test.subset(llms=test.llm_names[1:])
        assert set(r.route(rest)) <= set(rest.llm_names)
        with pytest.raises(ValueError, match="unknown LLM"):
            r.remove_llm(gone)

    def test_add_and_remove_keep_the_other_llms_predictions(self, fitted, data):
        if not self.keeps_others:
            pytest.skip("documented exception: add/remove changes the other LLMs' predictions")
        test, (hi, _) = data["test"], self._levels(data)
        r = copy.deepcopy(fitted)
        before = r.predict_scores(test)
        scores, costs, cost = self._probes(data, hi)
        r.add_llm("onboarded", scores, costs)
        added = r.predict_scores(with_new_llm(test, "onboarded", hi, cost))
        np.testing.assert_allclose(added[:, :-1], before, rtol=1e-6, atol=1e-7)
        r.remove_llm(test.llm_names[0])
        rest = with_new_llm(test.subset(llms=test.llm_names[1:]), "onboarded", hi, cost)
        np.testing.assert_allclose(r.predict_scores(rest), added[:, 1:], rtol=1e-6, atol=1e-7)

    def test_add_llm_bad_input_changes_nothing(self, fitted, data):
        test = data["test"]
        r = copy.deepcopy(fitted)
        before = r.predict_scores(test)
        scores, costs, _ = self._probes(data, 1.0)
        first = next(iter(scores))
        bad = [
            (ValueError, "already in the pool", (test.llm_names[0], scores, costs)),
            (DataValidationError, "NaN|finite", ("x", {**scores, first: float("nan")}, costs)),
            (DataValidationError, "must be a number", ("x", {**scores, first: "high"}, costs)),
            (ValueError, "at least", ("x", {first: 1.0}, {first: costs[first]})),
            (ValueError, "non-empty", ("", scores, costs)),
            (DataValidationError, "no cost", ("x", scores, {first: 0.1})),
        ]
        for exc, msg, args in bad:
            with pytest.raises(exc, match=msg):
                r.add_llm(*args)
            assert r.llm_names_ == test.llm_names
            np.testing.assert_array_equal(r.predict_scores(test), before)
        with pytest.raises(NotFittedError):
            self._fresh().add_llm("x", scores, costs)

