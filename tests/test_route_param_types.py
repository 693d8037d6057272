"""Router.route with values of the wrong type: one-line errors naming the parameter."""

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.models.baselines import BestSingleRouter
from recsys_router.models.baselines.cascade import CascadeRouter
from recsys_router.models.baselines.zero import ZeroRouter
from recsys_router.policies import budget_policy, wtp_policy

D = RoutingData(["q1", "q2"], ["gpt-4", "a", "b"], [[.9, .5, .4], [.9, .5, .4]],
                [[3., 1., 2.], [3., 1., 2.]])


@pytest.mark.parametrize("factory", [BestSingleRouter, ZeroRouter, CascadeRouter])
@pytest.mark.parametrize("kw, needle", [
    ({"wtp": "10"}, "wtp must be a number, got str"),
    ({"budget": "2"}, "budget must be a number, got str"),
    ({"wtp": True}, "wtp must be a number, got bool"),
    ({"budget": False}, "budget must be a number, got bool"),
    ({"candidates": "ab"}, "candidates must be a list of LLM names, got str"),
    ({"candidates": "gpt-4"}, "candidates must be a list of LLM names, got str"),
])
def test_wrong_types_are_refused(factory, kw, needle):
    r = factory().fit(D)
    with pytest.raises(ValueError, match=needle):
        r.route(D, **kw)


def test_policies_refuse_strings_and_numbers_still_work():
    s, c = np.array([[0.5, 0.9]]), np.array([[1.0, 3.0]])
    with pytest.raises(ValueError, match="wtp must be a number"):
        wtp_policy(s, c, "10")
    with pytest.raises(ValueError, match="budget must be a number"):
        budget_policy(s, c, "2")
    # lambda 4: 4*.5-1 = 1.0 > 4*.9-3 = 0.6 -> a; budget 3 fits b (.9); numpy scalars are numbers
    assert wtp_policy(s, c, np.int64(4)).tolist() == [0]
    assert budget_policy(s, c, np.float64(3.0)).tolist() == [1]
    r = BestSingleRouter().fit(D)
    assert r.route(D, candidates=("a", "b")).tolist() == ["a", "a"]   # best train mean of the two


def test_numpy_zero_d_numbers_are_numbers():
    """np.array(2.0) (a 0-d array) routes like 2.0, as it did before the type check."""
    from recsys_router.policies import check_policy_values
    check_policy_values(wtp=np.array(2.0), budget=np.array(3))
    with pytest.raises(ValueError, match="wtp must be a number"):
        check_policy_values(wtp=np.array("2"))
    with pytest.raises(ValueError, match="budget must be a number"):
        check_policy_values(budget=np.array([1.0, 2.0]))
