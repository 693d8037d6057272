"""``--seed`` of ``judge simulate``, ``serve`` and ``replay`` reaches the routers (as ``evaluate
--seed`` does); records keep it, and a stored run replays with the seed it was made with."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import uvicorn

from recsys_router.cli import main
from recsys_router.datasets.resolve import resolve_dataset
from recsys_router.judge.replay import recorded_seed, replay
from recsys_router.judge.simulate import simulate_tournament
from recsys_router.judge.store import JudgeStore
from recsys_router.models.baselines.simple import RandomRouter

DATA = ["--data", "synthetic", "-o", "n_queries=200", "-o", "n_llms=4"]


def synthetic():
    return resolve_dataset("synthetic", stack=True, n_queries=200, n_llms=4)


def random_pick(data, seed: int) -> dict[str, str]:
    """What a uniformly random router seeded with ``seed`` picks for every query (all LLMs feasible)."""
    r = RandomRouter(seed=seed).fit(data)
    return dict(zip(data.query_ids, r.route(data)))


def test_simulate_seed_reaches_the_random_router():
    data = synthetic()
    runs = {s: simulate_tournament(data, ["random", "best-single"], n=40, seed=s).records for s in (7, 8)}
    for s, recs in runs.items():
        want = random_pick(data, s)
        assert [r.router_choices["random"] for r in recs] == [want[r.query_id] for r in recs]
        assert {r.metadata["router_seed"] for r in recs} == {s}
    # the routers' own default (seed 0) would have picked otherwise on some of these queries
    default = random_pick(data, 0)
    assert any(default[r.query_id] != r.router_choices["random"] for r in runs[7])
    again = simulate_tournament(data, ["random", "best-single"], n=40, seed=7).records
    assert [r.router_choices for r in again] == [r.router_choices for r in runs[7]]


def test_router_params_seed_wins_over_the_command_seed():
    data = synthetic()
    recs = simulate_tournament(data, ["random", "best-single"], n=30, seed=7,
                               router_params={"random": {"seed": 3}}).records
    want = random_pick(data, 3)
    assert [r.router_choices["random"] for r in recs] == [want[r.query_id] for r in recs]


def test_cli_seeds_differ_and_replay_reproduces_the_stored_run(tmp_path, capsys):
    data = synthetic()
    picks = {}
    for s in (7, 8):
        db = tmp_path / f"j{s}.db"
        assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "40", "--seed", str(s),
                     "--db", str(db)]) == 0
        recs = JudgeStore(db).records()
        want = random_pick(data, s)
        assert [r.router_choices["random"] for r in recs] == [want[r.query_id] for r in recs]
        picks[s] = {r.query_id: r.router_choices["random"] for r in recs}
    other = random_pick(data, 8)  # seed 8 would have picked otherwise on some of seed 7's queries
    assert any(picks[7][q] != other[q] for q in picks[7])
    capsys.readouterr()
    # replay without --seed: the recorded seed (7), so a second `random` picks what the stored one did
    out = tmp_path / "rp.csv"
    assert main(["judge", "replay", "--db", str(tmp_path / "j7.db"), *DATA, "--router", "random", "--name", "r2",
                 "--out", str(out)]) == 0
    assert "seed the stored records were made with (7)" in capsys.readouterr().err
    lb = pd.read_csv(out).set_index("router")
    for col in ("pref_score", "win_rate", "participation", "n_participating"):
        assert lb.loc["r2", col] == lb.loc["random", col], col
    recs = JudgeStore(tmp_path / "j7.db").records()
    same = replay("random", recs, name="r2", train=data, seed=recorded_seed(recs))
    assert all(r.router_choices["r2"] == r.router_choices["random"] for r in same)
    other = replay("random", recs, name="r2", train=data, seed=8)
    assert any(r.router_choices["r2"] != r.router_choices["random"] for r in other)


def test_replay_of_an_old_database_keeps_the_default_seeds(tmp_path, capsys):
    """Records made before the router seed was recorded: their routers ran with their own
    defaults (seed 0 for random), and replay keeps them (and the split seed 0)."""
    data = synthetic()
    res = simulate_tournament(data, ["random", "best-single"], n=40, seed=7,
                              router_params={"random": {"seed": 0}})  # what seed 7 gave the routers before
    old = [dataclasses.replace(r, metadata={k: v for k, v in r.metadata.items() if k != "router_seed"})
           for r in res.records]
    db = tmp_path / "old.db"
    with JudgeStore(db) as st:
        st.add_many(old)
    assert recorded_seed(old) is None
    out = tmp_path / "rp.csv"
    assert main(["judge", "replay", "--db", str(db), *DATA, "--router", "random", "--name", "r2",
                 "--out", str(out)]) == 0
    assert "carry no common router seed" in capsys.readouterr().err
    lb = pd.read_csv(out).set_index("router")
    assert lb.loc["r2", "pref_score"] == lb.loc["random", "pref_score"]
    assert all(r.router_choices["r2"] == r.router_choices["random"]
               for r in replay("random", old, name="r2", train=data))


def test_recorded_seed_refuses_a_malformed_value():
    rec = simulate_tournament(synthetic(), ["random", "best-single"], n=2, seed=1).records[0]
    for bad in ("7", -1, 1.5, True, 2 ** 40):
        r = dataclasses.replace(rec, metadata={**rec.metadata, "router_seed": bad})
        with pytest.raises(ValueError, match=f"record {rec.record_id}: metadata\\['router_seed'\\]"):
            recorded_seed([r])
    mixed = [rec, dataclasses.replace(rec, metadata={**rec.metadata, "router_seed": 2})]
    assert recorded_seed(mixed) is None and recorded_seed([rec]) == 1


def test_serve_seed_reaches_the_routers_and_the_records(tmp_path, monkeypatch):
    (tmp_path / "backends.yaml").write_text("backends:\n" + "".join(
        f"  sim-llm-{i}: {{base_url: 'http://127.0.0.1:9/v1', model: m{i}}}\n" for i in range(4)))
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.setdefault("app", app))
    for s in (5, 6):
        assert main(["judge", "serve", *DATA, "--routers", "random,best-single", "--db", str(tmp_path / "j.db"),
                     "--backends", str(tmp_path / "backends.yaml"), "--seed", str(s)]) == 0
        session = seen.pop("app").state.session
        assert session.routers["random"].get_params()["seed"] == s and session.router_seed == s
        assert session.store.count() == 0
    # what a vote stores: the payload's metadata carries the router seed
    monkeypatch.setattr("recsys_router.judge.web.app.ask_backend",
                        lambda b, text, history: {"text": f"answer of {b['model']}", "latency": 0.1,
                                                  "prompt_tokens": None, "completion_tokens": None})
    duel = session.new_duel(session.data.query_ids[0])
    rev = session.vote(duel["token"], "A")
    (rec,) = session.store.records()
    assert rec.record_id == rev["record_id"] and rec.metadata["router_seed"] == 6
