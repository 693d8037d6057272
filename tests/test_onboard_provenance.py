"""What ``onboard`` records (training data kept, an ``onboarded`` entry per LLM, the source's
metrics moved to ``source_metrics``), and probe scores of artifacts that record no training
score range (written before ``score_range``): [0, 1] unless the operator gives the range."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from recsys_router.cli import main
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.export.artifact import data_fingerprint
from recsys_router.registry import make_router
from recsys_router.serving import ServiceConfig, create_app

KEY = {"Authorization": "Bearer s3cret"}
METRICS = {"test/mu_o": 0.625, "test/n_queries": 30.0}


@pytest.fixture()
def art(tmp_path):
    d = make_synthetic(150, 4, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    export_router(make_router("knn").fit(old), tmp_path / "art", train_data=old, metrics=METRICS)
    texts = [str(t) for t in d.texts[:20]]
    return tmp_path, old, texts


def _answers(path, texts, scores):
    pd.DataFrame({"text": texts, "score": scores, "cost": 1e-6}).to_csv(path, index=False)
    return path


def _man(path):
    return json.loads((path / "manifest.json").read_text())


def _strip_score_range(path):
    """An artifact as written before the manifest recorded score_range (unsigned: the files'
    checksums cover state.json and weights.npz only, so nothing else to recompute)."""
    man = _man(path)
    del man["score_range"]
    (path / "manifest.json").write_text(json.dumps(man))


def test_onboard_records_provenance_and_moves_stale_metrics(art):
    tmp, old, texts = art
    ans = _answers(tmp / "answers.csv", texts, [1.0, 0.0] * 10)
    src_sha = hashlib.sha256((tmp / "art" / "manifest.json").read_bytes()).hexdigest()
    assert main(["onboard", str(tmp / "art"), "--llm", "new", "--scores", str(ans),
                 "--out", str(tmp / "onb")]) == 0
    man = _man(tmp / "onb")
    td = man["training_data"]                      # was None
    assert {k: td[k] for k in ("name", "fingerprint", "n_queries", "n_llms")} == {
        "name": old.name, "fingerprint": data_fingerprint(old), "n_queries": 150, "n_llms": 3}
    (entry,) = td["onboarded"]
    assert entry["llm"] == "new" and entry["n_probes"] == 20 and entry["weighted"] is False
    assert entry["probes_file"] == "answers.csv"
    assert entry["probes_sha256"] == hashlib.sha256(ans.read_bytes()).hexdigest()
    assert entry["source_manifest_sha256"] == src_sha
    assert entry["score_range"] == [0.0, 1.0] and entry["score_range_from"] == "artifact"
    assert man["metrics"] == {}                    # were the source's, copied as this router's
    assert man["source_metrics"]["metrics"] == METRICS
    assert man["source_metrics"]["n_llms"] == 3
    assert "do not describe this router" in man["source_metrics"]["note"]
    # onboarding again appends, and keeps the metrics last measured (on the 3-LLM router)
    assert main(["onboard", str(tmp / "onb"), "--llm", "newer", "--scores", str(ans),
                 "--out", str(tmp / "onb2")]) == 0
    man2 = _man(tmp / "onb2")
    assert [e["llm"] for e in man2["training_data"]["onboarded"]] == ["new", "newer"]
    assert man2["training_data"]["fingerprint"] == data_fingerprint(old)
    assert man2["metrics"] == {} and man2["source_metrics"] == man["source_metrics"]
    assert load_router(tmp / "onb2").llm_names[-2:] == ["new", "newer"]


def test_plain_export_has_no_provenance_fields(art):
    tmp, _, _ = art
    man = _man(tmp / "art")
    assert "source_metrics" not in man and "onboarded" not in man["training_data"]
    assert man["metrics"] == METRICS


def test_served_artifact_without_score_range_holds_probes_to_0_1(art):
    tmp, _, texts = art
    _strip_score_range(tmp / "art")
    loaded = load_router(tmp / "art")
    assert getattr(loaded.router, "score_range_", None) is None
    c = TestClient(create_app(loaded, ServiceConfig(api_key="s3cret")))
    bad = [{"text": t, "score": 7.0 if i == 0 else 1.0, "cost": 1e-6} for i, t in enumerate(texts)]
    got = c.post("/llms", json={"name": "x", "probes": bad}, headers=KEY)
    assert got.status_code == 422                  # was 201: the 7 took all traffic
    assert "outside [0, 1]" in got.text and "--score-range" in got.text
    good = [dict(p, score=0.5) for p in bad]
    assert c.post("/llms", json={"name": "x", "probes": good}, headers=KEY).status_code == 201


def test_serve_score_range_option_for_an_old_artifact(art, monkeypatch):
    import uvicorn
    tmp, _, texts = art
    _strip_score_range(tmp / "art")
    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    assert main(["serve", str(tmp / "art"), "--api-key", "s3cret", "--score-range", "0,10"]) == 0
    c = TestClient(apps[0])
    probes = [{"text": t, "score": 7.0, "cost": 1e-6} for t in texts]
    assert c.post("/llms", json={"name": "x", "probes": probes}, headers=KEY).status_code == 201
    # scale of (0, 10): widened by its width each side, so -10 to 20; 25 is off it
    far = [dict(p, score=25.0) for p in probes]
    got = c.post("/llms", json={"name": "y", "probes": far}, headers=KEY)
    assert got.status_code == 422 and "[-10, 20] (training scores 0-10)" in got.text


def test_onboard_old_artifact_needs_range_for_other_scales(art, capsys):
    tmp, _, texts = art
    _strip_score_range(tmp / "art")
    ans = _answers(tmp / "a7.csv", texts, [7.0] + [1.0] * 19)
    assert main(["onboard", str(tmp / "art"), "--llm", "n", "--scores", str(ans),
                 "--out", str(tmp / "o1")]) == 2   # was 0
    err = capsys.readouterr().err
    assert "a7.csv" in err and "score 7.0" in err and "--score-range LOW,HIGH" in err
    assert not (tmp / "o1").exists()
    assert main(["onboard", str(tmp / "art"), "--llm", "n", "--scores", str(ans),
                 "--score-range", "0,10", "--out", str(tmp / "o2")]) == 0
    man = _man(tmp / "o2")
    assert man["score_range"] == [0.0, 10.0]       # the operator's range, kept for POST /llms
    assert man["training_data"]["onboarded"][0]["score_range_from"] == "option"
    # a [0, 1] file onboards without the option: the range it was held to is recorded as assumed
    ok = _answers(tmp / "a1.csv", texts, [1.0, 0.0] * 10)
    assert main(["onboard", str(tmp / "art"), "--llm", "n", "--scores", str(ok),
                 "--out", str(tmp / "o3")]) == 0
    entry = _man(tmp / "o3")["training_data"]["onboarded"][0]
    assert (entry["score_range"], entry["score_range_from"]) == ([0.0, 1.0], "default")
    assert _man(tmp / "o3")["score_range"] is None


def test_score_range_option_refused_where_the_artifact_records_one(art, capsys):
    tmp, _, texts = art
    ans = _answers(tmp / "a.csv", texts, [1.0] * 20)
    assert main(["onboard", str(tmp / "art"), "--llm", "n", "--scores", str(ans),
                 "--score-range", "0,10", "--out", str(tmp / "o")]) == 2
    assert "records its training score range [0, 1]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["onboard", str(tmp / "art"), "--llm", "n", "--scores", str(ans),
              "--score-range", "10,0", "--out", str(tmp / "o")])
    assert "expected LOW < HIGH" in capsys.readouterr().err
