"""POST /llms and DELETE /llms/{name}: key required, all or nothing, effective without restart."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router
from recsys_router.serving import ServiceConfig, create_app

KEY = {"Authorization": "Bearer s3cret"}


@pytest.fixture()
def served(tmp_path):
    d = make_synthetic(150, 4, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    export_router(make_router("knn").fit(old), tmp_path / "art", train_data=old)
    art = load_router(tmp_path / "art")
    texts = [str(t) for t in d.texts[:20]]
    probes = [{"text": t, "score": 1.0, "cost": 1e-6} for t in texts]
    return art, probes


def test_add_route_remove_without_restart(served):
    art, probes = served
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    before = c.get("/llms", headers=KEY).json()["llms"]
    r = c.post("/llms", json={"name": "fresh", "probes": probes, "strategy": "random"}, headers=KEY)
    assert r.status_code == 201, r.text
    r = c.post("/llms", json={"name": "org/model-2", "probes": probes}, headers=KEY)
    assert r.status_code == 201, r.text          # provider-prefixed names, as in real pools
    assert c.delete("/llms/org/model-2", headers=KEY).status_code == 200
    listed = {x["name"]: x for x in c.get("/llms", headers=KEY).json()["llms"]}
    assert listed["fresh"]["provenance"]["n_probes"] == 20
    assert listed["fresh"]["provenance"]["strategy"] == "random"
    assert all(x["provenance"] == {"origin": "fit"} for x in before)
    got = c.post("/route", json={"query": "some question", "candidates": ["fresh"]}, headers=KEY)
    assert got.status_code == 200 and got.json()["llm"] == "fresh"
    assert c.get("/health").json()["n_llms"] == 4
    assert c.delete("/llms/fresh", headers=KEY).status_code == 200
    assert [x["name"] for x in c.get("/llms", headers=KEY).json()["llms"]] == [x["name"] for x in before]
    assert c.post("/route", json={"query": "q", "candidates": ["fresh"]}, headers=KEY).status_code == 400
    assert c.delete("/llms/fresh", headers=KEY).status_code == 404


def test_removed_llms_leave_the_chosen_counter(served):
    """Every name ever added and removed stayed in recsys_router_chosen_total (unbounded labels)."""
    art, probes = served
    app = create_app(art, ServiceConfig(api_key="s3cret"))
    with TestClient(app) as c:
        _removed_llms_leave_the_chosen_counter(app, c, art, probes)


def _removed_llms_leave_the_chosen_counter(app, c, art, probes):
    first = art.llm_names[0]
    assert c.post("/route", json={"query": "q", "candidates": [first]}, headers=KEY).json()["llm"] == first
    for k in range(3):
        name = f"gone-{k}"
        assert c.post("/llms", json={"name": name, "probes": probes}, headers=KEY).status_code == 201
        got = c.post("/route", json={"query": "q", "candidates": [name]}, headers=KEY).json()
        assert got["llm"] == name and app.state.stats.chosen[name] == 1
        old = app.state.served.current
        assert c.delete(f"/llms/{name}", headers=KEY).status_code == 200
        assert name not in app.state.stats.chosen
        # a request that took its snapshot before the delete finishes after it: not counted
        late = c.portal.call(app.state.route_texts, ["q"], None, None, [name], old)
        assert late[0]["llm"] == name and name not in app.state.stats.chosen
    m = c.get("/metrics", headers=KEY).text
    assert "gone-" not in m and f'recsys_router_chosen_total{{llm="{first}"}} 1' in m


def test_pool_changes_refused_without_a_configured_key(served):
    art, probes = served
    c = TestClient(create_app(art))
    got = c.post("/llms", json={"name": "x", "probes": probes})
    assert got.status_code == 403
    assert c.delete(f"/llms/{art.llm_names[0]}").status_code == 403
    # the hint names options that exist (it named a --api-key-env that serve does not have)
    from recsys_router.cli import build_parser
    from recsys_router.cli.serve import API_KEY_ENV
    hint = got.text
    serve_help = build_parser().parse_args(["serve", "x"]).__dict__
    assert "serve --api-key KEY" in hint and f"${API_KEY_ENV}" in hint and "api_key" in serve_help
    assert "--api-key-env" not in hint
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    assert c.post("/llms", json={"name": "x", "probes": probes}).status_code == 401
    assert len(c.get("/llms", headers=KEY).json()["llms"]) == 3


@pytest.mark.parametrize("body, code", [
    ({"name": "x", "probes": "P[:1]"}, 422),                    # too few for the router
    ({"name": "EXISTING", "probes": "P"}, 409),
    ({"name": "x", "probes": "P", "price_in": -1}, 422),
    ({"name": "x", "probes": "EMPTY"}, 422),
    ({"name": "x", "probes": "NAN"}, 422),
    ({"name": "x", "probes": "DUP"}, 422),
    ({"name": "x", "probes": "SOMECOST"}, 422),
    ({"name": "x" * 300, "probes": "P"}, 422),
    ({"name": "x", "probes": "SOMEWEIGHT"}, 422),               # a weight for some probes only
    ({"name": "x", "probes": "NEGWEIGHT"}, 422),
    ({"name": "x", "probes": "NANWEIGHT"}, 422),
    ({"name": "x", "probes": "ZEROWEIGHTS"}, 422),
    ({"name": "x", "probes": "STRWEIGHT"}, 422),
    ({"name": "x", "probes": "BOOLSCORE"}, 422),                # true was read as 1.0
    ({"name": "x", "probes": "STRCOST"}, 422),                  # "1e-6" was read as a number
    ({"name": "x", "probes": "P", "price_in": "1"}, 422),
    ({"name": "x", "probes": "P", "strategy": "random\nforged: yes"}, 422),  # a line break
    ({"name": "x", "probes": "P", "strategy": "random\x1b[2J"}, 422),        # an escape
    ({"name": "x", "probes": "P", "strategy": "   "}, 422),                   # blank
])
def test_bad_adds_change_nothing(served, body, code):
    art, probes = served
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    p = {"P": probes, "P[:1]": probes[:1], "EMPTY": [], "NAN": [{"text": "a", "score": "NaN"}] + probes,
         "DUP": probes + probes[:1],
         "SOMECOST": [{"text": "zz", "score": 1.0}] + probes,
         "SOMEWEIGHT": [{**probes[0], "weight": 2.0}] + probes[1:],
         "NEGWEIGHT": [{**x, "weight": -1.0 if i == 3 else 1.0} for i, x in enumerate(probes)],
         "NANWEIGHT": [{**x, "weight": "NaN" if i == 3 else 1.0} for i, x in enumerate(probes)],
         "ZEROWEIGHTS": [{**x, "weight": 0.0} for x in probes],
         "STRWEIGHT": [{**x, "weight": "heavy"} for x in probes],
         "BOOLSCORE": [{**x, "score": True} for x in probes],
         "STRCOST": [{**x, "cost": "1e-6"} for x in probes]}.get(body["probes"], body["probes"])
    body = {**body, "probes": p, "name": art.llm_names[0] if body["name"] == "EXISTING" else body["name"]}
    before = c.post("/route", json={"queries": ["a", "b c"]}, headers=KEY).json()
    r = c.post("/llms", json=body, headers=KEY)
    assert r.status_code == code, r.text
    assert len(c.get("/llms", headers=KEY).json()["llms"]) == 3
    assert c.post("/route", json={"queries": ["a", "b c"]}, headers=KEY).json()["results"][0]["llm"] \
        == before["results"][0]["llm"]


def test_huge_finite_probe_costs_keep_get_llms_working(served):
    # twenty costs of 3e38 (each a finite float32): their float32 mean overflowed to infinity,
    # which went into the published manifest and made GET /llms a 500 for every client
    art, probes = served
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")), raise_server_exceptions=False)
    big = [{**p, "cost": 3e38} for p in probes]
    assert c.post("/llms", json={"name": "dear", "probes": big}, headers=KEY).status_code == 201
    r = c.get("/llms", headers=KEY)
    assert r.status_code == 200, r.text
    listed = {x["name"]: x for x in r.json()["llms"]}
    assert listed["dear"]["mean_cost"] == pytest.approx(float(np.float32(3e38)), rel=1e-9)
    got = c.post("/route", json={"query": "some question", "wtp": 1.0}, headers=KEY)
    assert got.status_code == 200 and got.json()["llm"] != "dear"


def test_infinite_mean_cost_is_422_and_not_published(served):
    # prices near float64's maximum: the scaled mean cost is infinite, refused before publishing
    art, probes = served
    assert art.router.llm_prices_ is not None  # the price path is the one exercised
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")), raise_server_exceptions=False)
    free = [{"text": p["text"], "score": p["score"]} for p in probes]
    r = c.post("/llms", json={"name": "inf", "probes": free, "price_in": 1.7e308,
                              "price_out": 1.7e308}, headers=KEY)
    assert r.status_code == 422 and "not a finite number" in r.json()["error"]
    r = c.get("/llms", headers=KEY)
    assert r.status_code == 200 and [x["name"] for x in r.json()["llms"]] == art.llm_names


def test_weighted_add_matches_the_library(served):
    """POST /llms with probe weights gives the predictions of add_llm(..., weights=)."""
    art, probes = served
    probes = [{**x, "score": float(i % 3) / 2, "weight": 1.0 + (i % 4)} for i, x in enumerate(probes)]
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    r = c.post("/llms", json={"name": "w", "probes": probes}, headers=KEY)
    assert r.status_code == 201, r.text
    assert c.get("/llms", headers=KEY).json()["llms"][-1]["provenance"]["weighted"] is True
    lib = copy.deepcopy(art.router).add_llm(
        "w", {x["text"]: x["score"] for x in probes}, {x["text"]: x["cost"] for x in probes},
        weights=[x["weight"] for x in probes])
    plain = copy.deepcopy(art.router).add_llm(
        "w", {x["text"]: x["score"] for x in probes}, {x["text"]: x["cost"] for x in probes})
    qs = ["some question", "another one here"]
    got = c.post("/route", json={"queries": qs, "candidates": ["w"]}, headers=KEY).json()["results"]
    data = RoutingData(pd.DataFrame({"query_id": ["a", "b"], "text": qs}), lib.llm_names_,
                       np.full((2, len(lib.llm_names_)), np.nan))
    want = lib.predict_scores(data)[:, -1]
    base = plain.predict_scores(data)[:, -1]
    assert not np.allclose(want, base)
    np.testing.assert_allclose([g["scores"]["w"] for g in got], want, rtol=1e-6)


def test_route_during_pool_changes_sees_one_whole_pool(served, monkeypatch):
    """/route requests in flight while POST /llms and DELETE /llms alternate: each answer is
    200 and equals, scores and all, what the pool before or after a change gives alone."""
    import asyncio
    import time

    import httpx

    from recsys_router.export.exported import ExportedRouter
    real = ExportedRouter.predict

    started = [0]   # model calls begun

    def slow(self, texts):  # a model call long enough for the pool to change during it
        started[0] += 1
        time.sleep(0.05)
        return real(self, texts)
    monkeypatch.setattr(ExportedRouter, "predict", slow)
    art, probes = served
    app = create_app(art, ServiceConfig(api_key="s3cret", batch_wait_ms=1.0))
    texts = [f"question number {i} about topic {i % 7}" for i in range(24)]

    async def route(cl, t):
        r = await cl.post("/route", json={"query": t}, headers=KEY)
        assert r.status_code == 200, r.text
        return r.json()

    async def change(cl, add: bool, in_flight=None):
        while in_flight is not None and started[0] < in_flight:  # a model call is running
            await asyncio.sleep(0.001)
        r = (await cl.post("/llms", json={"name": "fresh", "probes": probes}, headers=KEY) if add
             else await cl.delete("/llms/fresh", headers=KEY))
        assert r.status_code == (201 if add else 200), r.text

    async def run():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as cl:
            before = {t: (await route(cl, t))["scores"] for t in texts}       # the pool alone
            await change(cl, True)
            after = {t: (await route(cl, t))["scores"] for t in texts}        # pool + fresh alone
            await change(cl, False)

            got = []
            for k in range(8):  # each wave: the routes start, then the pool changes under them
                wave = [route(cl, t) for t in texts] + [change(cl, k % 2 == 0, started[0] + 1)]
                got += (await asyncio.gather(*wave))[:-1]
            return before, after, got

    before, after, got = asyncio.run(run())
    assert set(after[texts[0]]) == set(before[texts[0]]) | {"fresh"} and len(before[texts[0]]) == 3
    seen = {"before": 0, "after": 0}
    for t, res in zip(texts * 8, got):
        state = "before" if res["scores"] == before[t] else "after"
        assert res["scores"] == (before if state == "before" else after)[t], res
        assert res["llm"] in res["scores"]
        seen[state] += 1
    assert seen["before"] and seen["after"], seen   # the changes really overlapped the requests


def test_a_loaded_artifact_holds_probe_scores_to_its_training_scale(served, tmp_path, capsys):
    """The artifact records its training scores' range (manifest ``score_range``), so a
    served or onboarded knn artifact refuses a probe score of 7 among 0/1 scores (it took all
    traffic before: only routers that fitted in this process knew the range)."""
    import json

    from recsys_router.cli import main
    art, probes = served
    assert art.manifest["score_range"] == [0.0, 1.0]
    assert art.router.score_range_ == (0.0, 1.0)
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    bad = [dict(p, score=7.0) if i == 0 else p for i, p in enumerate(probes)]
    got = c.post("/llms", json={"name": "x", "probes": bad}, headers=KEY)
    assert got.status_code == 422 and "off the scale of the router's training scores [0, 1]" in got.text
    assert c.post("/llms", json={"name": "x", "probes": probes}, headers=KEY).status_code == 201
    # onboarding keeps it in the new artifact, without --data
    pd.DataFrame({"text": [p["text"] for p in probes], "score": 1.0, "cost": 1e-6}).to_csv(
        tmp_path / "answers.csv", index=False)
    assert main(["onboard", str(tmp_path / "art"), "--llm", "y", "--scores",
                 str(tmp_path / "answers.csv"), "--out", str(tmp_path / "new")]) == 0
    man = json.loads((tmp_path / "new" / "manifest.json").read_text())
    assert man["score_range"] == [0.0, 1.0]
    pd.DataFrame({"text": [p["text"] for p in probes], "score": [7.0] + [1.0] * 19,
                  "cost": 1e-6}).to_csv(tmp_path / "answers7.csv", index=False)
    assert main(["onboard", str(tmp_path / "art"), "--llm", "z", "--scores",
                 str(tmp_path / "answers7.csv"), "--out", str(tmp_path / "new7")]) == 2
    assert "off the pool's score scale [0, 1]" in capsys.readouterr().err


@pytest.fixture()
def mf_served(tmp_path):
    d = make_synthetic(150, 4, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    export_router(make_router("mf", dim=8, max_epochs=1, encoder_options={"dim": 32}).fit(old),
                  tmp_path / "mf", train_data=old)
    return load_router(tmp_path / "mf"), [str(t) for t in d.texts[:20]]


@pytest.mark.parametrize("kind", ["knn", "mf"])
@pytest.mark.parametrize("tiny", [1e-320, 5e-324])
def test_equal_tiny_probe_weights_add_as_weights_of_one(served, mf_served, kind, tiny):
    # n / sum(weights) overflowed: knn published an all-NaN LLM whose provenance probe_mean
    # was NaN (GET /llms a 500 for every client); mf was a bare 500 (LBFGS overflow)
    art, texts = mf_served if kind == "mf" else (served[0], [p["text"] for p in served[1]])
    scores = {t: float(i % 2) for i, t in enumerate(texts)}
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")), raise_server_exceptions=False)
    probes = [{"text": t, "score": s, "cost": 1e-6, "weight": tiny} for t, s in scores.items()]
    r = c.post("/llms", json={"name": "tiny", "probes": probes}, headers=KEY)
    assert r.status_code == 201, r.text
    ones = copy.deepcopy(art.router).add_llm("tiny", scores, {t: 1e-6 for t in texts},
                                             weights=[1.0] * len(texts))
    qs = ["some question", "another one here", texts[0]]
    got = c.post("/route", json={"queries": qs}, headers=KEY).json()["results"]
    data = RoutingData(pd.DataFrame({"query_id": ["a", "b", "c"], "text": qs}), ones.llm_names_,
                       np.full((3, len(ones.llm_names_)), np.nan))
    want = ones.predict_scores(data)[:, -1]
    assert np.isfinite(want).all()
    np.testing.assert_allclose([g["scores"]["tiny"] for g in got], want, rtol=1e-6)
    listed = c.get("/llms", headers=KEY)
    assert listed.status_code == 200, listed.text
    prov = listed.json()["llms"][-1]["provenance"]
    assert prov["probe_mean"] == pytest.approx(0.5) == ones.llm_info_["tiny"]["probe_mean"]


def test_a_non_finite_provenance_value_is_422_and_not_published(served, monkeypatch):
    """Whatever produces it (here the old overflowing weight normalisation), a NaN or infinite
    provenance value is a 422 naming the field; the pool and GET /llms stay as they were."""
    import recsys_router.coldstart.pool as pool
    art, probes = served
    monkeypatch.setattr(pool, "probe_weights", lambda name, d, w: np.full(d.n_queries, np.inf))
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")), raise_server_exceptions=False)
    r = c.post("/llms", json={"name": "nan", "probes": probes}, headers=KEY)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "provenance.probe_mean of 'nan' is not a finite number; 'nan' was not added"
    listed = c.get("/llms", headers=KEY)
    assert listed.status_code == 200 and [x["name"] for x in listed.json()["llms"]] == art.llm_names
    assert c.get("/health").json()["n_llms"] == 3


@pytest.mark.parametrize("body_change, field", [
    (lambda b: {**b, "backnd": {"base_url": "http://h/v1"}}, "backnd"),
    (lambda b: {**b, "probes": [{**b["probes"][0], "wieght": 2.0}] + b["probes"][1:]}, "wieght"),
], ids=["request", "probe"])
def test_a_misspelt_field_of_post_llms_is_a_422_naming_it(served, body_change, field):
    """An unknown field of POST /llms (or of one probe) was ignored: a misspelt 'backend' or
    'weight' added the LLM without it. It is a 422 naming the field; nothing is added."""
    art, probes = served
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    before = c.get("/llms", headers=KEY).json()["llms"]
    r = c.post("/llms", json=body_change({"name": "fresh", "probes": probes}), headers=KEY)
    assert r.status_code == 422 and field in r.text
    assert c.get("/llms", headers=KEY).json()["llms"] == before


def test_removing_an_llm_runs_off_the_event_loop(served, monkeypatch):
    """DELETE /llms ran the router's removal on the event loop (an add ran in a thread), so a
    large router's removal stalled every request meanwhile; it runs in a worker thread now."""
    import asyncio
    art, _ = served
    c = TestClient(create_app(art, ServiceConfig(api_key="s3cret")))
    on_loop, real = [], type(art.router).remove_llm

    def spy(self, name):
        try:
            asyncio.get_running_loop()
            on_loop.append(True)     # called from the event loop's own thread
        except RuntimeError:
            on_loop.append(False)    # a worker thread: no loop runs there
        return real(self, name)
    monkeypatch.setattr(type(art.router), "remove_llm", spy)
    assert c.delete(f"/llms/{art.router.llm_names_[0]}", headers=KEY).status_code == 200
    assert on_loop == [False]
