"""The coldstart protocol's metrics and arguments, by hand on tiny cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.coldstart.protocol import coldstart_rows, parse_cold_llms
from recsys_router.data import RoutingData
from recsys_router.registry import make_router


def test_mu_o_routes_each_query_among_its_observed_llms():
    # 4 test queries, LLMs a, b, new; best-single prefers a (train mean 0.75 > b's 0.25 and
    # the onboarded new's probe mean 0.5). Test queries 0 and 1 have a unobserved: they go to
    # the better of b (0.25) and new (0.5) among their observed LLMs, i.e. new (scores 0 and
    # 1); queries 2 and 3 go to a (scores 1 and 1). mu_o = (0 + 1 + 1 + 1) / 4 = 0.75 for
    # the onboarded pool; without new, queries 0 and 1 go to b (scores 1 and 0): also 0.75.
    # (Routing every query to a and dropping the unobserved ones gave 1.0 over 2 queries.)
    tr_s = np.array([[1, 0, 1], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=float)
    te_s = np.array([[np.nan, 1, 0], [np.nan, 0, 1], [1, 0, 0], [1, 1, 1]], dtype=float)
    q = lambda a: pd.DataFrame({"query_id": [f"{a}{i}" for i in range(4)],  # noqa: E731
                                "text": [f"{a} question {i}" for i in range(4)]})
    tr = RoutingData(q("tr"), ["a", "b", "new"], tr_s)
    te = RoutingData(q("te"), ["a", "b", "new"], te_s)
    out = coldstart_rows(tr, te, lambda: make_router("best-single"), router="best-single",
                         cold_llms=["new"], ks=[4], strategies=["random"], progress=False)
    got = out[out["router"] == "best-single"].set_index("metric")["value"]
    assert got["mu_o_onboarded"] == pytest.approx(0.75)
    assert got["mu_o_without"] == pytest.approx(0.75)
    # the full-column router (a: 0.75, new: 0.5, b: 0.25) routes queries 0, 1 to new
    assert got["mu_o_full"] == pytest.approx(0.75)


@pytest.mark.parametrize("spec", ["a,a", ["b", "a", "b"]])
def test_cold_llms_named_twice_are_refused(spec):
    with pytest.raises(ValueError, match=r"--cold-llms: LLM\(s\) \['(a|b)'\] named more than once"):
        parse_cold_llms(spec, ["a", "b", "c"])


def test_full_column_rows_record_a_seed_the_run_used():
    """The full-column rows are fitted once per cold LLM whatever the probe seed; they record
    the run's first seed (5 here), never a seed the run did not use (they recorded 0)."""
    rng = np.random.default_rng(0)
    q = lambda a, n: pd.DataFrame({"query_id": [f"{a}{i}" for i in range(n)],  # noqa: E731
                                   "text": [f"{a} question {i}" for i in range(n)]})
    tr = RoutingData(q("tr", 30), ["a", "b", "new"], rng.integers(0, 2, (30, 3)).astype(float))
    te = RoutingData(q("te", 10), ["a", "b", "new"], rng.integers(0, 2, (10, 3)).astype(float))
    out = coldstart_rows(tr, te, lambda: make_router("best-single"), router="best-single",
                         cold_llms=["new"], ks=[4], strategies=["random"], seeds=[5, 6],
                         progress=False)
    full = out[out["router"] == "best-single (full column)"]
    assert len(full) and set(full["seed"]) == {5}
    assert set(out.loc[out["router"] == "best-single", "seed"]) == {5, 6}
    with pytest.raises(ValueError, match="at least one probe seed"):
        coldstart_rows(tr, te, lambda: make_router("best-single"), router="best-single",
                       cold_llms=["new"], ks=[4], strategies=["random"], seeds=[], progress=False)
