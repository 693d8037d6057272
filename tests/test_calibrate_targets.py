"""calibrate_policy / calibrate_artifact: inputs the policies accept, reachable targets, and
which costs a calibration charges (values worked out by hand on tiny cases)."""

import numpy as np
import pytest

from recsys_router.export.calibrate import calibrate_policy

S = np.array([[0.2, 0.9], [0.3, 0.8], [0.1, 0.7]])


def test_unknown_predicted_cost_is_no_candidate_budget():
    c = np.array([[1.0, 10.0], [1.0, np.nan], [1.0, 10.0]])
    # budget 1: a everywhere (share of b 0, mean cost 1); budget 10: b, a, b (query 2's b has
    # no known cost, so a is chosen): share 2/3, mean cost (10 + 1 + 10) / 3 = 7
    res = calibrate_policy(S, c, policy="budget", target_share=(1, 0.5))
    assert res["value"] == 10.0 and res["achieved"] == pytest.approx(2 / 3)
    res = calibrate_policy(S, c, policy="budget", target_cost=5.0)
    assert res["value"] == 10.0 and res["achieved"] == pytest.approx(7.0)
    with pytest.raises(ValueError, match="known"):
        calibrate_policy(S, np.full((3, 2), np.nan), policy="budget", target_cost=1.0)


def test_empty_calibration_set_is_one_line_error():
    with pytest.raises(ValueError, match="at least one query"):
        calibrate_policy(S[:0], np.ones((0, 2)), policy="wtp", target_share=(1, 0.5))


@pytest.mark.parametrize("kw, needle", [
    ({"target_share": (2, 0.5)}, "index"), ({"target_share": (-1, 0.5)}, "index"),
    ({"target_share": (1, 1.5)}, "share"), ({"target_share": (1, -0.1)}, "share"),
    ({"target_cost": float("nan")}, "target_cost"), ({"target_cost": -1.0}, "target_cost")])
def test_out_of_range_targets_are_refused(kw, needle):
    with pytest.raises(ValueError, match=needle):
        calibrate_policy(S, np.tile([1.0, 10.0], (3, 1)), policy="budget", **kw)


def test_zero_router_is_calibrated_between_step_points(tmp_path):
    import pandas as pd

    from recsys_router.data import RoutingData
    from recsys_router.export.artifact import export_router
    from recsys_router.export.calibrate import calibrate_artifact
    from recsys_router.models.baselines.zero import ZeroRouter
    n = 200
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)],
                      "text": [f"query {i}" for i in range(n)]})
    d = RoutingData(q, ["cheap", "dear"], np.tile([0.5, 0.9], (n, 1)), np.tile([1.0, 10.0], (n, 1)))
    export_router(ZeroRouter().fit(d), tmp_path / "zero", train_data=d)
    # the step points (budgets 1 and 10) give mean costs 1 and 10; Zero mixes in between, each
    # query's cost 1 or 10, so a mean of exactly 5.5 is 100 queries on each LLM
    res = calibrate_artifact(tmp_path / "zero", d, policy="budget", target_cost=5.5)
    assert 1.0 < res["value"] < 10.0 and res["achieved"] == pytest.approx(5.5)
    share = calibrate_artifact(tmp_path / "zero", d, policy="budget", target_share=("dear", 0.25))
    assert share["achieved"] == pytest.approx(0.25)


def test_true_costs_where_known_predicted_for_the_rest(tmp_path):
    from recsys_router.data import RoutingData
    from recsys_router.export.artifact import export_router
    from recsys_router.export.calibrate import calibrate_artifact
    from recsys_router.models.baselines import BestSingleRouter
    s = [[0.2, 0.9], [0.2, 0.9]]
    train = RoutingData(["t1", "t2"], ["a", "b"], s, [[1.0, 10.0], [1.0, 10.0]])
    # predicted costs 1 (a) and 10 (b); true costs 2 and 20, b's unknown on the second query
    true = np.array([[2.0, 20.0], [2.0, np.nan]])
    # budget 10 routes both queries to b: paid 20 (true) and 10 (predicted) -> 15
    res = calibrate_policy(np.array(s), np.array([[1.0, 10.0]] * 2), policy="budget",
                           target_cost=15.0, true_costs=true)
    assert res["value"] == 10.0 and res["achieved"] == pytest.approx(15.0)
    export_router(BestSingleRouter().fit(train), tmp_path / "bs", train_data=train)
    cal = RoutingData(["c1", "c2"], ["a", "b"], s, true)
    res = calibrate_artifact(tmp_path / "bs", cal, policy="budget", target_cost=15.0)
    assert res["achieved"] == pytest.approx(15.0) and res["cost_source"] == "mixed"
    assert res["predicted_cells"] == [1, 4]
    # budget 1: a on both, true cost 2 each
    res = calibrate_artifact(tmp_path / "bs", cal, policy="budget", target_cost=2.0)
    assert res["value"] == 1.0 and res["achieved"] == pytest.approx(2.0)


def test_cascade_is_calibrated_on_what_it_pays(tmp_path):
    """A cascade pays every LLM it tries: calibration measures that (it charged the last LLM's
    cost alone: 'achieved' 6.0 where the stored budget really costs more)."""
    from recsys_router.data import RoutingData
    from recsys_router.export.artifact import export_router, load_router
    from recsys_router.export.calibrate import calibrate_artifact
    from recsys_router.models.baselines.cascade import CascadeRouter
    n = 40
    s = np.column_stack([(np.arange(n) % 2 == 0).astype(float), np.ones(n)])  # a right on evens
    d = RoutingData([f"q{i}" for i in range(n)], ["a", "b"], s, np.tile([1.0, 10.0], (n, 1)))
    export_router(CascadeRouter(threshold=1.0).fit(d), tmp_path / "cas", train_data=d)
    res = calibrate_artifact(tmp_path / "cas", d, policy="budget", target_cost=6.0)
    # cap 11 (a then b): evens pay 1, odds 1 + 10 = 11 -> mean 6.0, exactly the target
    assert res["value"] == pytest.approx(11.0) and res["achieved"] == pytest.approx(6.0)
    ch, paid = load_router(tmp_path / "cas").router.decide(d, budget=res["value"])
    assert paid.mean() == pytest.approx(res["achieved"])
    low = calibrate_artifact(tmp_path / "cas", d, policy="budget", target_cost=3.0)
    assert low["achieved"] == pytest.approx(1.0)   # only a is affordable below 11
