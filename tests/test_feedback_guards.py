"""Guards of the feedback commands: bootstrap counts (none, few, negative), coverage without
intervals, options an artifact cannot use, a mistyped log database, and decision-log errors
that name the row of the file as given and its decision id."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.export import export_router
from recsys_router.feedback.bandit import _covered, bandit_evaluate
from recsys_router.feedback.logged import log_to_data
from recsys_router.feedback.ope import estimate_all
from recsys_router.feedback.report import ope_markdown, plot_ope
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def art_and_log(tmp_path_factory, sim_split):
    """A knn artifact and a uniform-logging long table (propensity 1/L) of the test queries."""
    tmp = tmp_path_factory.mktemp("fbg")
    tr, te = sim_split["train"], sim_split["test"]
    art = tmp / "knn"
    export_router(make_router("knn", k=5).fit(tr), art, train_data=tr)
    rng = np.random.default_rng(0)
    pick = rng.integers(0, te.n_llms, te.n_queries)
    log = tmp / "log.csv"
    pd.DataFrame({"query_id": te.query_ids, "model": [te.llm_names[j] for j in pick],
                  "score": te.scores[np.arange(te.n_queries), pick],
                  "query_text": te.texts, "propensity": 1.0 / te.n_llms}).to_csv(log, index=False)
    return art, log


def test_plot_ope_point_outside_its_interval(tmp_path):
    """Five resamples: a percentile interval may miss its estimate; the bars are clipped."""
    table = pd.DataFrame({"outcome": ["score"] * 2, "estimator": ["ips", "snips"],
                          "value": [0.40, 0.70], "lo": [0.45, 0.60], "hi": [0.50, 0.65]})
    plot_ope(table, tmp_path / "o.png", "t")
    assert (tmp_path / "o.png").stat().st_size > 0


def test_ope_few_resamples_writes_the_report(art_and_log, tmp_path):
    art, log = art_and_log
    out = tmp_path / "o"
    assert main(["ope", "--log", str(log), "--router", str(art), "--n-boot", "2", "--seed", "3",
                 "--out", str(out)]) == 0
    from recsys_router.evaluation.io import MARKER
    assert {p.name for p in out.iterdir()} == {"ope.csv", "ope.png", "report.md", MARKER}
    assert "Only 2 bootstrap resamples" in (out / "report.md").read_text()


def test_n_boot_zero_says_no_intervals_and_negative_is_refused(art_and_log, tmp_path, capsys):
    art, log = art_and_log
    with pytest.raises(ValueError, match="n_boot must be a whole number >= 0"):
        estimate_all([1.0, 0.0], [0.5, 0.5], np.eye(2), [0, 1], n_boot=-5)
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as ei:
        main(["ope", "--log", str(log), "--router", str(art), "--n-boot", "-5", "--out", str(out)])
    assert ei.value.code == 2
    assert "argument --n-boot: expected a whole number >= 0, got '-5'" in capsys.readouterr().err
    assert not out.exists()
    assert main(["ope", "--log", str(log), "--router", str(art), "--n-boot", "0", "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "No intervals" in text and "95% interval" not in text and "[nan" not in text
    table = pd.DataFrame({"outcome": ["score"], "estimator": ["ips"], "value": [0.5], "lo": [0.4],
                          "hi": [0.6], "ess": [3.0], "n": [4], "refit": [0]})
    assert "| score | IPS | 0.5000 | [0.4000, 0.6000] |" in ope_markdown(table, "t", n_boot=10)


def test_artifact_refuses_training_options(art_and_log, tmp_path, capsys):
    art, log = art_and_log
    out = tmp_path / "o"
    for extra, named in ((["--loss", "ips"], "--loss"), (["--param", "bogus=3"], "--param")):
        assert main(["ope", "--log", str(log), "--router", str(art), *extra, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{named} cannot apply to artifact {art}" in err and not out.exists()


def test_log_export_of_a_missing_database(tmp_path, capsys):
    for db in (tmp_path / "typo.db", f"sqlite:///{tmp_path / 'typo2.db'}"):
        assert main(["log", "export", "--db", str(db), "--out", str(tmp_path / "x.csv")]) == 2
        assert "no such SQLite file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _declog(**over):
    n = 8
    d = {"decision_id": [f"d{i}" for i in range(n)], "chosen": ["a", "b"] * 4,
         "propensity": [0.5] * n, "candidates": ['["a", "b"]'] * n,
         "feedback_score": [np.nan, np.nan, np.nan, 1, 0, 1, 0, 1]}
    frame = pd.DataFrame(d)
    for col, (row, value) in over.items():
        frame[col] = frame[col].astype(object)
        frame.loc[row, col] = value
    return frame


def test_decision_log_errors_name_the_row_as_given_and_the_decision():
    # rows 0-2 have no feedback: row 5 of the file is the third decision kept
    with pytest.raises(ValueError, match=r"^f.csv: row 5 \(decision_id 'd5'\): propensity 0.0 must be in"):
        log_to_data(_declog(propensity=(5, 0.0)), source="f.csv")
    with pytest.raises(ValueError, match=r"^f.csv: row 6 \(decision_id 'd6'\): candidates 'not json'"):
        log_to_data(_declog(candidates=(6, "not json")), source="f.csv")
    with pytest.raises(ValueError, match=r"row 4 \(decision_id 'd4'\): candidates '\{\}' is not a JSON list"):
        log_to_data(_declog(candidates=(4, "{}")), source="f.csv")
    assert log_to_data(_declog()).n_queries == 5


def test_coverage_without_intervals_is_nan(sim_split):
    assert _covered(0.1, 0.3, 0.2) == 1.0 and _covered(0.1, 0.3, 0.31) == 0.0
    assert np.isnan(_covered(float("nan"), float("nan"), 0.2))
    tr, te = sim_split["train"], sim_split["test"]
    rows = bandit_evaluate(tr, te, {"als": ("als", {})}, losses=["naive"], n_boot=0, seed=1)
    cov = rows[rows["metric"].str.startswith("ope_ci_covered")]
    assert len(cov) == 5 and cov["value"].isna().all()
    with pytest.raises(ValueError, match="n_boot must be a whole number >= 0"):
        bandit_evaluate(tr, te, {"als": ("als", {})}, losses=["naive"], n_boot=-4)


@pytest.mark.parametrize("flag,value,proto", [("--n-boot", "-4", "bandit"), ("--online-rounds", "-5", "bandit"),
                                              ("--retrain-every", "0", "bandit"), ("--n-seeds", "0", "coldstart"),
                                              ("--n-seeds", "-2", "coldstart")])
def test_protocol_counts_are_checked_when_parsed(tmp_path, capsys, flag, value, proto):
    out = tmp_path / "o"
    with pytest.raises(SystemExit) as ei:
        main(["evaluate", "--data", "synthetic", "--routers", "knn", "--protocol", proto, flag, value,
              "--out", str(out), "--no-progress"])
    assert ei.value.code == 2
    assert f"argument {flag}: expected a whole number >= " in capsys.readouterr().err
    assert not out.exists()


def test_simulated_log_reveals_only_observed_cells_and_counts_skipped_queries(caplog):
    from recsys_router.data import RoutingData
    from recsys_router.feedback.logging_sim import simulate_log, simulated_train_log
    nan = np.nan
    # q0 observes b and c only; q1 observes nothing; q2 observes all three
    s = np.array([[nan, 0.2, 0.7], [nan, nan, nan], [1.0, 0.0, 0.5]])
    d = RoutingData(["q0", "q1", "q2"], ["a", "b", "c"], s)
    for seed in range(20):
        log, a = simulate_log(d, np.full((3, 3), 1 / 3), seed=seed)
        assert log.query_ids == ["q0", "q2"] and a[0] in (1, 2)
        # by hand: q0 draws among 2 observed LLMs (1/2 each), q2 among 3 (1/3 each)
        assert np.allclose(log.queries["propensity"], [0.5, 1 / 3])
        assert not np.isnan(log.scores[[0, 1], a]).any()
        assert log.meta["unobserved_queries_skipped"] == 1
    assert "1 of 3 queries have no observed score" in caplog.text
    eps = simulated_train_log(d, "epsilon-greedy:0.3", seed=0)
    # best single by nanmean: a (1.0); q0 cannot reveal a, so b and c keep 0.1 each of the
    # epsilon mass, renormalised to 1/2 each
    assert eps.query_ids == ["q0", "q2"] and np.isclose(eps.queries["propensity"].iloc[0], 0.5)


def test_decision_log_feedback_and_chosen_keep_the_stores_rules():
    """Feedback outside [0, 1], thumbs other than up|down and a chosen LLM the decision did not
    offer are refused with the row as given, its decision and the field (they were accepted,
    or silently turned into no feedback)."""
    for over, pat in (
            ({"feedback_score": (4, 7.0)}, r"row 4 \(decision_id 'd4'\): column 'feedback_score': "
                                           r"score must be in \[0, 1\], got 7.0"),
            ({"feedback_score": (7, -3.0)}, r"row 7 \(decision_id 'd7'\): column 'feedback_score'"),
            ({"feedback_score": (3, "high")}, r"row 3 .*'feedback_score': score must be in \[0, 1\], "
                                              r"got 'high'"),
            ({"chosen": (5, "z")}, r"row 5 \(decision_id 'd5'\): column 'chosen': 'z' is not among "
                                   r"the decision's candidates \['a', 'b'\]")):
        with pytest.raises(ValueError, match=r"^f.csv: " + pat):
            log_to_data(_declog(**over), source="f.csv")
    frame = _declog()
    frame["thumbs"] = [None, "up", "UP", None, None, None, None, None]
    with pytest.raises(ValueError, match=r"^f.csv: row 2 \(decision_id 'd2'\): column 'thumbs': "
                                         r"thumbs must be 'up' or 'down', got 'UP'"):
        log_to_data(frame, source="f.csv")
    frame["thumbs"] = [None, "up", "down", None, None, None, None, None]
    d = log_to_data(frame, source="f.csv")
    assert list(d.query_ids)[:2] == ["d1", "d2"] and d.n_queries == 7
    assert np.nansum(d.scores[:2], axis=1).tolist() == [1.0, 0.0]


def test_decision_log_with_nullable_dtypes_loads_like_the_plain_one():
    """A log re-saved after ``convert_dtypes()`` has pandas NA (not None/NaN) for missing
    feedback and probs: that is no value, as before (it was refused as a bad score / probs)."""
    frame = _declog()
    frame["feedback_score"] = [np.nan, np.nan, np.nan, 1.0, 0.0, 0.25, np.nan, np.nan]
    frame["thumbs"] = [None, "up", None, None, None, None, "down", None]
    frame["probs"] = [None, '{"a": 0.5, "b": 0.5}', None, None, '{"a": 0.5, "b": 0.5}',
                      '{"a": 0.5, "b": 0.5}', '{"a": 0.5, "b": 0.5}', None]
    nullable = frame.convert_dtypes()
    assert nullable["feedback_score"].dtype == "Float64" and nullable["feedback_score"].iloc[0] is pd.NA
    assert nullable["probs"].iloc[0] is pd.NA and nullable["thumbs"].iloc[0] is pd.NA
    d = log_to_data(nullable, source="f.parquet")
    # kept: d1 (thumbs up), d3 (1.0), d4 (0.0), d5 (0.25), d6 (thumbs down); d0, d2, d7 have none
    assert list(d.query_ids) == ["d1", "d3", "d4", "d5", "d6"]
    assert np.nansum(d.scores, axis=1).tolist() == [1.0, 1.0, 0.0, 0.25, 0.0]
    assert d.queries["probs"].isna().tolist() == [False, True, False, False, False]
    plain = log_to_data(frame, source="f.csv")
    assert list(plain.query_ids) == list(d.query_ids)
    np.testing.assert_array_equal(plain.scores, d.scores)
