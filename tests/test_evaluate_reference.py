"""RouterEval V_R with a user-given reference score (``--reference-score``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate, metrics_from_decisions


def _value(metrics, router, metric):
    sel = metrics[(metrics["router"] == router) & (metrics["metric"] == metric)]
    return float(sel["value"].iloc[0])


def test_v_r_is_mu_o_over_the_reference_and_recomputable():
    data = make_synthetic(200, 4, 3, seed=1)
    res = evaluate(data, EvalConfig(routers=["random", "best-single"], protocols=["routereval"],
                                    reference_score=0.8, seed=0), progress=False)
    m = res.metrics
    for r in ("random", "best-single"):
        assert _value(m, r, "v_r") == pytest.approx(_value(m, r, "mu_o") / 0.8)
    assert _value(m, "LLM:reference", "reference_score") == 0.8
    # the same numbers come back from the decisions and the recorded reference
    again, _ = metrics_from_decisions(res.decisions, reference_score=0.8)
    pd.testing.assert_frame_equal(again.reset_index(drop=True), m.reset_index(drop=True))
    # no reference and not a RouterEval benchmark: no V_R at all
    plain = evaluate(data, EvalConfig(routers=["random"], protocols=["routereval"], seed=0),
                     progress=False).metrics
    assert not (plain["metric"] == "v_r").any()


def test_bad_reference_is_refused():
    data = make_synthetic(100, 3, 2, seed=1)
    with pytest.raises(ValueError, match="positive number"):
        evaluate(data, EvalConfig(routers=["random"], protocols=["routereval"], reference_score=0.0),
                 progress=False)


def test_cli_reference_score_in_leaderboard(tmp_path, capsys):
    rc = main(["evaluate", "--data", "synthetic", "--routers", "best-single", "--protocol",
               "routereval", "--reference-score", "0.5", "--seed", "0", "--out",
               str(tmp_path / "o"), "--no-progress", "--no-plots"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| V_R |" in out
    m = pd.read_csv(tmp_path / "o" / "metrics.csv")
    mu = _value(m, "best-single", "mu_o")
    assert np.isclose(_value(m, "best-single", "v_r"), mu / 0.5)
