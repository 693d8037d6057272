"""``evaluate --protocol coldstart`` on data it cannot measure: a pool of one LLM, a cold LLM
with no training answers (no probes to draw) and a cold LLM with no test answers (never
routable there, so its rows recorded route_gap 0, a perfect onboarding, into summary.csv's
means) are refused before any fit with an error that says what is wrong; leaving that LLM out
of ``--cold-llms`` runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.coldstart.protocol import coldstart_rows
from recsys_router.data import RoutingData
from recsys_router.evaluation.protocols.coldstart import run_coldstart
from recsys_router.registry import make_router

_N_TRAIN, _N_TEST = 40, 20


def _data(scores: np.ndarray) -> RoutingData:
    n = len(scores)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)],
                      "text": [f"question {i} about topic {i % 3}" for i in range(n)],
                      "split": ["train"] * _N_TRAIN + ["test"] * (n - _N_TRAIN)})
    return RoutingData(q, [f"L{j}" for j in range(scores.shape[1])], scores, name="toy.csv")


def _scores() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.random((_N_TRAIN + _N_TEST, 3)) < np.array([0.3, 0.6, 0.8])).astype(float)


def _settings(out, cold=("all",)) -> dict:
    return {"routers": ["knn"], "encoder": "hashing", "split_column": "split", "seed": 0,
            "out": str(out), "plots": False, "progress": False, "cold_llms": list(cold),
            "probes": ["5"], "probe_strategy": ["random"], "n_seeds": 1}


@pytest.fixture
def no_fit(monkeypatch):
    """Fail when a router is built: the data must be refused before any fit."""
    import recsys_router.router_spec as spec

    def refuse(*a, **k):
        raise AssertionError("a router was built before the data was checked")
    monkeypatch.setattr(spec, "resolve_router", refuse)


def test_one_llm_needs_another(tmp_path, no_fit):
    with pytest.raises(ValueError) as exc:
        run_coldstart(_data(_scores()[:, :1]), _settings(tmp_path / "o"))
    msg = str(exc.value)
    assert msg.startswith("toy.csv: coldstart needs at least 2 LLMs") and "the data has 1" in msg
    assert "no LLMs" not in msg and not (tmp_path / "o").exists()


@pytest.mark.parametrize("rows, what", [(slice(0, _N_TRAIN), "training"),
                                        (slice(_N_TRAIN, None), "test")])
def test_cold_llm_without_answers_is_refused_by_name(tmp_path, no_fit, rows, what):
    S = _scores()
    S[rows, 2] = np.nan                          # L2 answers no query of that part
    with pytest.raises(ValueError) as exc:
        run_coldstart(_data(S), _settings(tmp_path / "o"))
    msg = str(exc.value)
    assert f"LLM(s) 'L2' have no observed {what} queries" in msg
    assert "leave them out of the cold LLMs (--cold-llms)" in msg
    assert "count <= 0" not in msg and not (tmp_path / "o").exists()


def test_library_rows_refuse_a_cold_llm_without_test_answers():
    S = _scores()
    S[_N_TRAIN:, 2] = np.nan
    d = _data(S)
    tr, te = d.subset(np.arange(_N_TRAIN)), d.subset(np.arange(_N_TRAIN, len(S)))
    with pytest.raises(ValueError, match="'L2' have no observed test queries"):
        coldstart_rows(tr, te, lambda: make_router("best-single"), router="best-single",
                       cold_llms=["L0", "L2"], ks=[5], strategies=["random"], progress=False)


def test_leaving_the_unscorable_llm_out_runs_and_scores_the_others(tmp_path):
    S = _scores()
    S[_N_TRAIN:, 2] = np.nan
    out = tmp_path / "o"
    run_coldstart(_data(S), _settings(out, cold=["L0", "L1"]))
    summary = pd.read_csv(out / "summary.csv")
    gap = summary[(summary["router"] == "knn") & (summary["metric"] == "route_gap")]
    assert gap["n"].tolist() == [2]              # one row per cold LLM (L0, L1), one seed
    rows = pd.read_csv(out / "metrics.csv")
    assert set(rows["cold_llm"]) == {"L0", "L1"}
    # the mean is that of the two per-LLM rows in metrics.csv
    per = rows[(rows["router"] == "knn") & (rows["metric"] == "route_gap")]["value"]
    assert gap["mean"].iloc[0] == pytest.approx(per.mean())
