"""Calibrating a cascade artifact on data without costs (review CAL r1): the cascade is charged
its estimated costs (its LLMs' mean train costs), as README says for every router, instead of
the manifest write failing on a NaN ("Out of range float values are not JSON compliant"); a
calibration whose every outcome is unknown is refused in one line, the artifact unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.export import calibrate_artifact, export_router
from recsys_router.models.baselines.cascade import CascadeRouter

NAMES = ["a", "b", "c"]
# calibration scores: the judge accepts a score >= 1 (threshold 1.0)
SCORES = [[0., 0., 1.], [1., 1., 1.], [0., 1., 1.], [0., 0., 0.]]
# the rows of a CSV without a cost column, the same scores
CSV = "query_id,model,score\n" + "".join(
    f"q{i},{n},{s}\n" for i, row in enumerate(SCORES) for n, s in zip(NAMES, row))


def _artifact(tmp_path):
    """A cascade trained with costs a 1, b 2, c 4 (its chain a, b, c and its estimates)."""
    tr = RoutingData(["t0", "t1"], NAMES, [[0., 0., 1.], [0., 1., 1.]], [[1., 2., 4.]] * 2)
    out = tmp_path / "cas"
    export_router(CascadeRouter(threshold=1.0).fit(tr), out, train_data=tr)
    return out


@pytest.mark.parametrize("costs", [None, np.full((4, 3), np.nan)], ids=["no-column", "all-nan"])
@pytest.mark.parametrize("policy", ["budget", "wtp"])
def test_cascade_without_costs_is_charged_its_estimates(tmp_path, costs, policy):
    """By hand, with the estimates a 1, b 2, c 4 (wtp caps at wtp * threshold 1 = the budget):
    cap 1: every query tries a alone, mean 1. Cap 3: q0 a+b = 3 (c would make 7), q1 accepts
    a (1), q2 accepts b (3), q3 a+b (3): mean 2.5. Cap 7: q0 7, q1 1, q2 3, q3 7: mean 4.5.
    Target 3 is closest to 2.5 (cap 3; caps between 3 and 7 pay the same as 3)."""
    import json
    path = _artifact(tmp_path)
    data = RoutingData([f"q{i}" for i in range(4)], NAMES, SCORES, costs)
    res = calibrate_artifact(path, data, policy=policy, target_cost=3.0)
    assert res["value"] == pytest.approx(3.0) and res["achieved"] == pytest.approx(2.5)
    assert res["cost_source"] == "predicted"
    assert calibrate_artifact(path, data, policy=policy, target_cost=4.5)["achieved"] \
        == pytest.approx(4.5)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["default_policy"]["name"] == policy
    assert manifest["default_policy"]["value"] == pytest.approx(7.0)


def test_cli_calibrates_a_cascade_on_a_csv_without_costs(tmp_path, capsys):
    """The CLI exited 2 with "Out of range float values are not JSON compliant: nan"."""
    import json

    from recsys_router.cli import main
    path = _artifact(tmp_path)
    csv = tmp_path / "nocost.csv"
    csv.write_text(CSV)
    rc = main(["calibrate", str(path), "--data", str(csv), "--target-cost", "3",
               "--policy", "budget"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "calibrated budget = 3 on 4 queries: mean cost achieved 2.5 vs target 3 " \
           "(predicted costs)" in out
    assert json.loads((path / "manifest.json").read_text())["default_policy"]["value"] == 3.0


def test_unknown_outcome_everywhere_is_one_line_error_and_manifest_untouched(
        tmp_path, capsys, monkeypatch):
    """If no candidate value has a known mean cost (here every decision's paid cost is made
    unknown), calibration must not write NaN: a one-line error naming the data, the artifact
    byte for byte as before, from the API and the CLI."""
    from recsys_router.cli import main
    path = _artifact(tmp_path)
    before = (path / "manifest.json").read_bytes()
    real = CascadeRouter.decide

    def unpaid(self, data, **kw):
        choice, paid = real(self, data, **kw)
        return choice, np.full(len(paid), np.nan)
    monkeypatch.setattr(CascadeRouter, "decide", unpaid)
    data = RoutingData([f"q{i}" for i in range(4)], NAMES, SCORES, name="cal-set")
    with pytest.raises(ValueError, match=r"calibration data 'cal-set' \(4 queries\): no budget "
                                         r"value has a known mean cost"):
        calibrate_artifact(path, data, policy="budget", target_cost=3.0)
    assert (path / "manifest.json").read_bytes() == before
    csv = tmp_path / "nocost.csv"
    csv.write_text(CSV)
    rc = main(["calibrate", str(path), "--data", str(csv), "--target-cost", "3"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("recsys-router calibrate: error: calibration data ")
    assert "no wtp value has a known mean cost" in err and "not JSON compliant" not in err
    assert (path / "manifest.json").read_bytes() == before
