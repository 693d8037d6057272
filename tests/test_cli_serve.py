"""``recsys-router export | calibrate | serve`` end to end: registry routers, Lightning configs
and checkpoints, tune's best_config.yaml, calibration recomputed by hand, and a real
``recsys-router serve`` subprocess routing real queries over HTTP and proxying chat
completions (streaming and not) to a fake OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn
from conftest import SHARED_DATA

from recsys_router.cli import main
from recsys_router.export import load_router
from serve_helpers import free_port, wait_up
from test_serving import _fake_openai

ROOT = Path(__file__).resolve().parents[1]
SIM = ["--data", "synthetic", "--data-option", "n_queries=240", "--data-option", "n_llms=4",
       "--data-option", "n_topics=3", "--data-option", "seed=3"]


def _sim():
    from recsys_router.datasets.resolve import resolve_dataset
    return resolve_dataset("synthetic", n_queries=240, n_llms=4, n_topics=3, seed=3)


def test_export_registry_router_metrics_by_hand(tmp_path, capsys):
    out = tmp_path / "bsm"
    assert main(["export", "--router", "best-single", *SIM, "--split-fractions", "0.6,0.2,0.2", "--seed", "1",
                 "--out", str(out)]) == 0
    man = json.loads((out / "manifest.json").read_text())
    parts = _sim().split((0.6, 0.2, 0.2), seed=1)
    best = int(np.argmax(np.nanmean(parts["train"].scores, axis=0)))
    te = parts["test"]
    assert man["metrics"]["test/mu_o"] == pytest.approx(float(te.scores[:, best].mean()))
    assert man["metrics"]["test/mean_cost"] == pytest.approx(float(te.costs[:, best].mean()), rel=1e-6)
    assert man["training_data"]["n_queries"] == parts["train"].n_queries
    assert "test/mu_o" in capsys.readouterr().out
    assert main(["export", "--router", "best-single", *SIM, "--out", str(out)]) == 2  # exists
    assert main(["export", "--router", "knn", "--param", "k=3", *SIM, "--out", str(out),
                 "--overwrite"]) == 0
    assert load_router(out).router.k == 3
    assert main(["export", "--router", "knn", "--out", str(tmp_path / "x")]) == 2  # no data
    assert main(["export", "--router", "knn", "--param", "kk=3", *SIM, "--out", str(tmp_path / "x")]) == 2
    assert main(["export", "--router", "knn", *SIM, "--policy", "wtp", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("router", ["knn", "zero"])
def test_calibrate_recomputed(tmp_path, capsys, router):
    out = tmp_path / router
    assert main(["export", "--router", router, *SIM, "--out", str(out)]) == 0
    d = _sim()
    lo, hi = np.sort(np.nanmean(d.costs, axis=0))[[0, -1]]
    target = float(lo + 0.4 * (hi - lo))
    assert main(["calibrate", str(out), *SIM, "--target-cost", str(target), "--policy", "budget"]) == 0
    art = load_router(out)
    name, value = art.default_policy
    cal = art.manifest["default_policy"]["calibration"]
    assert name == "budget" and cal["target"] == target and cal["cost_source"] == "true"
    # recompute the achieved mean true cost of the stored policy
    choice = art.router.route_indices(d, budget=value)
    achieved = float(d.costs[np.arange(d.n_queries), choice].mean())
    assert achieved == pytest.approx(cal["achieved"])
    assert f"{cal['achieved']:.6g}" in capsys.readouterr().out
    # nothing cheaper than the cheapest LLM or dearer than the dearest can be reached
    assert lo - 1e-9 <= achieved <= hi + 1e-9
    llm = d.llm_names[-1]
    assert main(["calibrate", str(out), *SIM, "--target-share", f"{llm}=0.5"]) == 0
    art = load_router(out)
    res = art.route(d)
    share = np.mean([r["llm"] == llm for r in res])
    assert res[0]["policy"] == "wtp" and share == pytest.approx(
        art.manifest["default_policy"]["calibration"]["achieved"])
    assert main(["calibrate", str(out), *SIM, "--target-share", "nope=0.5"]) == 2


def test_export_lightning_config_and_checkpoint(tmp_path, monkeypatch):
    import torch
    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    data_cfg = tmp_path / "data.yaml"
    data_cfg.write_text(
        "data:\n  class_path: recsys_router.datamodules.routing_datamodule.RoutingDataModule\n  init_args:\n"
        "    dataset: synthetic\n    dataset_options: {n_queries: 200, n_llms: 4, n_topics: 3, seed: 0}\n"
        "    encoder: hashing\n    encoder_options: {dim: 32}\n    split_ratios: [0.7, 0.15, 0.15]\n"
        "    mode: listwise\ntrainer:\n  max_epochs: 1\n  accelerator: cpu\n"
        "  enable_progress_bar: false\n")
    a = tmp_path / "from_cfg"
    assert main(["export", "-c", str(ROOT / "configs/models/mf.yaml"), "-c", str(data_cfg),
                 "--out", str(a)]) == 0
    ckpt = next(tmp_path.glob("lightning_logs/version_*/checkpoints/last.ckpt"))
    b = tmp_path / "from_ckpt"
    assert main(["export", "--ckpt", str(ckpt), "--out", str(b)]) == 2  # a pickle: refused
    assert not b.exists()
    assert main(["export", "--ckpt", str(ckpt), "--trust-pickle", "--out", str(b)]) == 0
    ra, rb = load_router(a), load_router(b)
    texts = [f"question {i} about topic {i % 3}" for i in range(30)]
    assert [r["llm"] for r in ra.route(texts)] == [r["llm"] for r in rb.route(texts)]
    np.testing.assert_allclose(rb.predict(texts)[0], ra.predict(texts)[0], rtol=1e-6)
    assert "test/mu_o" in ra.manifest["metrics"] and "val/mu_o" in rb.manifest["metrics"]
    assert main(["export", "--ckpt", str(tmp_path / "none.ckpt"), "--out", str(tmp_path / "c")]) == 2


# ---------------------------------------------------------------- HTTP end to end
@pytest.fixture
def fake_backend():
    app = _fake_openai("fake")
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    deadline = time.time() + 10
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    yield app, port
    srv.should_exit = True
    th.join(5)


def _real_or_sim(tmp_path):
    """routerbench_zs (published train/test split) when the shared data is there, else SIMULATED."""
    rb = SHARED_DATA / "routerbench_zs"
    if rb.exists():
        from recsys_router.datasets.resolve import resolve_dataset
        data = resolve_dataset(str(rb), stack=True)
        return ["--data", str(rb)], ["--split-column", "split"], data, data.subset(
            np.flatnonzero(data.queries["split"].to_numpy() == "test"))
    d = _sim()
    return SIM, [], d, d


def test_flow_tune_export_calibrate_serve(tmp_path, fake_backend, monkeypatch):
    """The issue's 'done when': tune -> export best -> calibrate -> serve -> route + proxy."""
    monkeypatch.chdir(tmp_path)
    data_args, split_args, data, test = _real_or_sim(tmp_path)
    path = data_args[1] if data_args[1] != "synthetic" else "synthetic"
    (tmp_path / "data.yaml").write_text(
        "data:\n  class_path: recsys_router.datamodules.routing_datamodule.RoutingDataModule\n  init_args:\n"
        f"    dataset: {path}\n    encoder: hashing\n    split_ratios: [0.8, 0.1, 0.1]\n    seed: 0\n"
        + ("    dataset_options: {n_queries: 240, n_llms: 4, n_topics: 3, seed: 3}\n"
           if path == "synthetic" else ""))
    assert main(["tune", "--router", "knn", "-c", str(tmp_path / "data.yaml"), "--search",
                 str(ROOT / "configs/search/knn.yaml"), "--n-trials", "2", "--out",
                 str(tmp_path / "tuning"), "--no-plots", "--no-progress"]) == 0
    best = tmp_path / "tuning" / "best_config.yaml"
    art_dir = tmp_path / "art"
    assert main(["export", "-c", str(best), *data_args, *split_args, "--out", str(art_dir)]) == 0
    lo, hi = np.sort(np.nanmean(test.costs, axis=0))[[0, -1]]
    target = float((lo + hi) / 2)
    assert main(["calibrate", str(art_dir), *data_args, *(["--split", "test"] if split_args else []),
                 "--target-cost", str(target), "--policy", "wtp"]) == 0
    art = load_router(art_dir)
    assert art.default_policy[0] == "wtp"
    names = art.llm_names
    (tmp_path / "backends.yaml").write_text("backends:\n" + "".join(
        f"  {json.dumps(n)}: {{base_url: 'http://127.0.0.1:{fake_backend[1]}/v1', model: m{i}}}\n"
        for i, n in enumerate(names)))
    port = free_port()
    env = dict(os.environ, RECSYS_ROUTER_API_KEY="k3y", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from recsys_router.cli import main; "
                             "sys.exit(main())", "serve", str(art_dir),
                             "--port", str(port), "--backends", str(tmp_path / "backends.yaml"),
                             "--max-batch", "64"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc, 90.0)
        h = {"Authorization": "Bearer k3y"}
        texts = list(dict.fromkeys(test.texts))[:40]
        assert httpx.post(url + "/route", json={"query": texts[0]}).status_code == 401
        r = httpx.post(url + "/route", json={"queries": texts}, headers=h, timeout=60)
        assert r.status_code == 200, r.text
        got = r.json()["results"]
        want = art.route(texts)
        assert [g["llm"] for g in got] == [w["llm"] for w in want]
        assert got[0]["policy"] == "wtp" and got[0]["policy_value"] == art.default_policy[1]
        np.testing.assert_allclose([g["scores"][names[0]] for g in got],
                                   [w["scores"][names[0]] for w in want], rtol=1e-9)
        one = httpx.post(url + "/route", json={"query": texts[1], "budget": float(lo)},
                         headers=h, timeout=30).json()
        assert one["llm"] == art.route([texts[1]], budget=float(lo))[0]["llm"]
        assert httpx.get(url + "/llms", headers=h).json()["default_policy"]["name"] == "wtp"
        # OpenAI-compatible proxy, plain and streaming
        msg = {"model": "router", "messages": [{"role": "user", "content": texts[2]}]}
        c = httpx.post(url + "/v1/chat/completions", json=msg, headers=h, timeout=30)
        llm = want[2]["llm"]
        assert c.status_code == 200 and c.headers["x-recsys-router-llm"] == llm
        assert c.json()["model"] == llm and c.json()["choices"][0]["message"]["content"] == "fake says hi"
        assert fake_backend[0].state.seen[-1][0]["model"] == f"m{names.index(llm)}"
        with httpx.stream("POST", url + "/v1/chat/completions", json={**msg, "stream": True},
                          headers=h, timeout=30) as s:
            assert s.headers["x-recsys-router-llm"] == llm
            lines = [ln for ln in s.iter_lines() if ln.startswith("data:")]
        assert lines[-1] == "data: [DONE]"
        assert "".join(json.loads(ln[5:])["choices"][0]["delta"]["content"]
                       for ln in lines[:-1]).strip() == "fake says hi"
        m = httpx.get(url + "/metrics", headers=h).text
        assert 'recsys_router_requests_total{endpoint="/route",status="401"} 1' in m
    finally:
        proc.terminate()
        proc.wait(15)
