"""probes / onboard commands, evaluate --protocol coldstart, probe selection (small, simulated)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.coldstart.protocol import _auc, parse_cold_llms
from recsys_router.coldstart.selection import ProbeSession, select_probes
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export.artifact import export_router, load_router
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cs")
    d = make_synthetic(240, 5, 3, seed=0)
    d.to_long().to_csv(tmp / "data.csv", index=False)
    old = d.subset(llms=d.llm_names[:4])
    r = make_router("knn").fit(old)
    export_router(r, tmp / "art", train_data=old)
    return tmp, d


def test_auc_matches_pairwise_count():
    rng = np.random.default_rng(0)
    p, y = rng.random(50).round(1), rng.integers(0, 2, 50)
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a, ya in zip(p, y) for b, yb in zip(p, y)
             if ya == 1 and yb == 0]
    assert _auc(p, y) == pytest.approx(np.mean(pairs))


def test_selection_strategies(setup):
    _, d = setup
    r = make_router("best-single").fit(d)
    for s in ("random", "stratified", "informative"):
        idx = select_probes(r, d, 12, s, seed=3)
        assert len(set(idx.tolist())) == len(idx) and 1 <= len(idx) <= 12
        assert (select_probes(r, d, 12, s, seed=3) == idx).all()   # seeded
    tasks = np.asarray(d.tasks, dtype=str)
    strat = select_probes(r, d, 24, "stratified", seed=0)
    share = pd.Series(tasks[strat]).value_counts() / 24
    full = pd.Series(tasks).value_counts() / d.n_queries
    assert (abs(share - full.reindex(share.index)) <= 1 / 24 + 1e-9).all()
    with pytest.raises(ValueError, match="ProbeSession"):
        select_probes(r, d, 5, "adaptive")
    with pytest.raises(ValueError, match="unknown probe strategy"):
        select_probes(r, d, 5, "magic")
    with pytest.raises(ValueError, match="only"):
        select_probes(r, d, 10_000, "random")


def test_probe_session_learns_which_llm_it_resembles(setup):
    _, d = setup
    r = make_router("knn").fit(d.subset(llms=d.llm_names[:4]))
    truth = d.scores[:, 1].astype(float)          # the new LLM answers exactly like LLM 1
    s = ProbeSession(r, d.subset(llms=d.llm_names[:4]))
    for _ in range(30):
        s.record(truth[s.next()])
    assert int(np.argmax(s.weights)) == 1
    assert len(set(s.asked)) == 30
    with pytest.raises(ValueError, match="next"):
        s.record(1.0)
    s.next()
    with pytest.raises(ValueError, match="finite"):
        s.record(float("nan"))


def test_probes_and_onboard_commands(setup, tmp_path):
    tmp, d = setup
    out = tmp_path / "probes.csv"
    assert main(["probes", str(tmp / "art"), "--data", str(tmp / "data.csv"), "--k", "20",
                 "--strategy", "informative", "--out", str(out)]) == 0
    probes = pd.read_csv(out, dtype={"query_id": str})
    assert len(probes) <= 20 and set(probes.columns) >= {"query_id", "text"}
    new = d.llm_names[4]
    col = dict(zip(d.query_ids, d.scores[:, 4]))
    answers = pd.DataFrame({"query_id": probes["query_id"],
                            "score": [col[q] for q in probes["query_id"]], "cost": 0.001})
    answers.to_csv(tmp_path / "answers.csv", index=False)
    rc = main(["onboard", str(tmp / "art"), "--llm", new, "--scores", str(tmp_path / "answers.csv"),
               "--data", str(tmp / "data.csv"), "--strategy", "informative",
               "--out", str(tmp_path / "new")])
    assert rc == 0
    art = load_router(tmp_path / "new")
    assert art.llm_names == d.llm_names
    prov = {p["name"]: p["provenance"] for p in json.loads((tmp_path / "new" / "manifest.json")
                                                          .read_text())["llms"]}
    assert prov[new]["n_probes"] == len(probes) and prov[new]["strategy"] == "informative"
    assert "date" in prov[new] and prov[d.llm_names[0]] == {"origin": "fit"}
    assert new in set(r["llm"] for r in art.route(["a query", "another one"], candidates=[new]))


@pytest.mark.parametrize("edit, msg", [
    (lambda a: a.assign(score=["x"] + list(a["score"][1:])), "not a finite number"),
    (lambda a: a.assign(query_id=["nope"] + list(a["query_id"][1:])), "unknown query 'nope'"),
    (lambda a: a.assign(score=[float("nan")] + list(a["score"][1:])), "not a finite number"),
    (lambda a: a.assign(text=["  "] + [None] * (len(a) - 1)), "row 2, column 'text': text '  ' is blank"),
])
def test_onboard_bad_answers_write_nothing(setup, tmp_path, capsys, edit, msg):
    tmp, d = setup
    answers = pd.DataFrame({"query_id": d.query_ids[:10], "score": 1.0, "cost": 0.01})
    edit(answers).to_csv(tmp_path / "answers.csv", index=False)
    rc = main(["onboard", str(tmp / "art"), "--llm", "new", "--scores", str(tmp_path / "answers.csv"),
               "--data", str(tmp / "data.csv"), "--out", str(tmp_path / "new")])
    assert rc == 2 and msg in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".new")]
    rc = main(["onboard", str(tmp / "art"), "--llm", d.llm_names[0], "--scores",
               str(tmp_path / "answers.csv"), "--data", str(tmp / "data.csv"),
               "--out", str(tmp_path / "new")])
    assert rc == 2 and not (tmp_path / "new").exists()


def test_evaluate_coldstart_protocol(setup, tmp_path):
    tmp, d = setup
    rc = main(["evaluate", "--data", str(tmp / "data.csv"), "--routers", "knn,best-single",
               "--protocol", "coldstart", "--cold-llms", "2", "--probes", "5,20",
               "--probe-strategy", "random,adaptive", "--seed", "0", "--out",
               str(tmp_path / "new" / "res"), "--no-progress"])
    assert rc == 0
    m = pd.read_csv(tmp_path / "new" / "res" / "metrics.csv")
    assert set(m["metric"]) == {"score_mae", "cell_auc", "mu_o_onboarded", "mu_o_full",
                                "mu_o_without", "route_gap"}
    # each router's baselines are its own rows (two routers' were one label, averaged together)
    assert {"knn", "probe-mean (knn)", "nearest-llm (knn)", "best-single",
            "probe-mean (best-single)", "nearest-llm (best-single)"} <= set(m["router"])
    s = pd.read_csv(tmp_path / "new" / "res" / "summary.csv")
    per = s[(s["metric"] == "mu_o_full") & (s["k"] == 5) & (s["strategy"] == "random")]
    n_cold = m["cold_llm"].nunique()
    assert (per.set_index("router")["n"].loc[["probe-mean (knn)", "probe-mean (best-single)"]]
            == n_cold).all()
    full = m[(m["metric"] == "mu_o_full") & (m["k"] == 5) & (m["strategy"] == "random")]
    for r in ("knn", "best-single"):  # a baseline's mu_o_full is its router's
        a = full[full["router"] == r].set_index("cold_llm")["value"]
        b = full[full["router"] == f"probe-mean ({r})"].set_index("cold_llm")["value"]
        pd.testing.assert_series_equal(a, b, check_names=False)
    gap = m.pivot_table(index=["router", "cold_llm", "strategy", "k"], columns="metric",
                        values="value").dropna()
    np.testing.assert_allclose(gap["route_gap"], gap["mu_o_full"] - gap["mu_o_onboarded"])
    assert (tmp_path / "new" / "res" / "coldstart_curves.png").stat().st_size > 1000
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["res"]     # no temporary left
    assert parse_cold_llms("2", d.llm_names) == parse_cold_llms("2", d.llm_names)


def test_probes_and_onboard_of_a_signed_artifact(setup, tmp_path, capsys, monkeypatch):
    """A signed artifact is verified by probes and onboard, needs its key to be onboarded
    into, and yields a signed artifact (never an unsigned copy)."""
    from recsys_router.export.artifact import ArtifactError
    tmp, d = setup
    old = d.subset(llms=d.llm_names[:4])
    signed = tmp_path / "signed"
    export_router(make_router("knn").fit(old), signed, train_data=old, sign_key="k1")
    monkeypatch.setenv("GOOD_KEY", "k1")
    monkeypatch.setenv("BAD_KEY", "k2")
    probes = tmp_path / "probes.csv"
    base = ["--data", str(tmp / "data.csv")]
    assert main(["probes", str(signed), *base, "--k", "10", "--out", str(probes),
                 "--sign-key-env", "BAD_KEY"]) == 2
    assert "signature" in capsys.readouterr().err and not probes.exists()
    assert main(["probes", str(signed), *base, "--k", "10", "--out", str(probes),
                 "--sign-key-env", "GOOD_KEY"]) == 0
    p = pd.read_csv(probes, dtype={"query_id": str})
    col = dict(zip(d.query_ids, d.scores[:, 4]))
    pd.DataFrame({"query_id": p["query_id"], "score": [col[q] for q in p["query_id"]],
                  "cost": 0.001}).to_csv(tmp_path / "answers.csv", index=False)
    onboard = ["onboard", str(signed), "--llm", d.llm_names[4], "--scores",
               str(tmp_path / "answers.csv"), *base, "--out", str(tmp_path / "new")]
    capsys.readouterr()
    assert main(onboard) == 2  # no key: refused, not an unsigned copy
    assert "is signed: pass its signing key" in capsys.readouterr().err
    assert main(onboard + ["--sign-key-env", "BAD_KEY"]) == 2
    assert not (tmp_path / "new").exists()
    assert main(onboard + ["--sign-key-env", "GOOD_KEY"]) == 0
    assert load_router(tmp_path / "new", sign_key="k1").llm_names == d.llm_names
    with pytest.raises(ArtifactError, match="signature"):
        load_router(tmp_path / "new", sign_key="k2")
