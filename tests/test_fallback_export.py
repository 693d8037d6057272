"""A fitted safe-fallback router and an --auto-tuned router export, load and route exactly as
fitted; ``recsys-router export --fallback`` writes one."""

import numpy as np
import pytest

from recsys_router.cli import main
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.export.build import build_router
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.registry import make_router
from recsys_router.tuning.inner import AutoTunedRouter


@pytest.fixture(scope="module")
def data():
    return make_synthetic(240, 4, 3, seed=2)


def _same_decisions(fitted, artifact, data):
    loaded = load_router(artifact)
    assert np.array_equal(loaded.router.predict_scores(data), fitted.predict_scores(data))
    assert (loaded.router.route(data) == fitted.route(data)).all()
    return loaded


def test_fallback_router_round_trip_gives_identical_decisions(data, tmp_path):
    r = SafeFallbackRouter(make_router("knn", k=5, encoder="hashing"), min_task_queries=5).fit(data)
    # make sure every kind of decision is in the artifact: one task on each baseline
    tasks = sorted(r.fallback_["tasks"])
    assert len(tasks) == 3
    r.fallback_["tasks"].update({tasks[0]: "task-best", tasks[1]: "best-single",
                                 tasks[2]: "router"})
    rows = r.fallback_rows(data)
    assert {"router", "task-best", "best-single"} <= set(rows)
    loaded = _same_decisions(r, export_router(r, tmp_path / "fb", train_data=data), data)
    back = loaded.router
    assert isinstance(back, SafeFallbackRouter) and type(back.router_).__name__ == "KNNRouter"
    assert back.fallback_ == r.fallback_ and (back.fallback_rows(data) == rows).all()
    # the baseline rows really are the baselines: a task-best query gets its task's best LLM
    t0 = np.flatnonzero(np.asarray(data.tasks) == tasks[0])
    sub = data.scores[t0]
    best = data.llm_names[int(np.nanmean(sub, axis=0).argmax())]
    assert set(back.route(data.subset(t0))) == {best}
    # serving path: raw texts (no task) follow the all-queries decision
    assert loaded.route(["some query text"])[0]["llm"] in data.llm_names


def test_auto_tuned_router_round_trip(data, tmp_path):
    r = AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=3, seed=0).fit(data)
    loaded = _same_decisions(r, export_router(r, tmp_path / "auto", train_data=data), data)
    assert loaded.router.best_params_ == r.best_params_ and len(loaded.router.trials_) == 3


@pytest.mark.parametrize("n_trials, n_queries", [(0, 240), (2, 12)])
def test_auto_tuned_router_without_a_search_round_trips(data, tmp_path, n_trials, n_queries):
    # no trials, or too few queries to hold any out: no held-out score exists (NaN)
    train = data.subset(list(range(n_queries)))
    r = AutoTunedRouter("knn", {"k": 3, "encoder": "hashing"}, n_trials=n_trials).fit(train)
    assert np.isnan(r.default_score_) and np.isnan(r.best_score_)
    loaded = _same_decisions(r, export_router(r, tmp_path / "auto", train_data=train), train)
    back = loaded.router
    assert np.isnan(back.default_score_) and np.isnan(back.best_score_)
    assert back.best_params_ == {} and back.summary() == r.summary()


def test_fallback_around_auto_round_trip(data, tmp_path):
    built = build_router(router="linearr", data="synthetic", seed=0, fallback=True, auto=2,
                         data_options={"n_queries": 200, "n_llms": 3})
    r = built.router
    assert isinstance(r, SafeFallbackRouter) and isinstance(r.router_, AutoTunedRouter)
    _same_decisions(r, export_router(r, tmp_path / "both", train_data=built.train), built.test)


def test_fallback_needs_a_registry_router(tmp_path):
    with pytest.raises(ValueError, match="registry routers only"):
        build_router(ckpt=str(tmp_path / "x.ckpt"), fallback=True)


def test_cli_export_fallback_then_load(tmp_path, capsys):
    out = tmp_path / "art"
    rc = main(["export", "--router", "knn", "--data", "synthetic", "-o", "n_queries=200",
               "--seed", "0", "--fallback", "--out", str(out)])
    assert rc == 0
    assert "exported SafeFallbackRouter" in capsys.readouterr().out
    art = load_router(out)
    assert type(art.router).__name__ == "SafeFallbackRouter"
    assert art.router.fallback_["enabled"] and "overall" in art.router.fallback_


@pytest.mark.parametrize("auto, message", [("-1", "n_trials must be in [0, 1000], got -1"),
                                           ("5000", "n_trials must be in [0, 1000], got 5000")])
def test_cli_export_refuses_a_hostile_auto_and_writes_nothing(tmp_path, capsys, auto, message):
    out = tmp_path / "art"
    rc = main(["export", "--router", "knn", "--data", "synthetic", "-o", "n_queries=60",
               "--seed", "0", "--auto", auto, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_export_refuses_a_hostile_routereval_scale_size(tmp_path, capsys):
    out = tmp_path / "art"
    rc = main(["export", "--router", "best-single", "--data", "synthetic-routereval",
               "-o", "n_queries=-5", "--seed", "0", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "n_queries must be an integer >= 1, got -5" in err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("wrapper", ["fallback", "auto"])
def test_inner_folds_is_bounded_when_given_and_when_stored(data, wrapper):
    """Both wrappers take ``inner_folds`` through one check (``check_inner_folds``): more than
    MAX_INNER_FOLDS folds (a fit per fold) is refused at fit, and a stored artifact whose
    ``params.inner_folds`` is hostile is refused on load, naming the field."""
    from recsys_router.inner_validation import MAX_INNER_FOLDS
    from recsys_router.router_state import router_from_state, router_to_state
    from recsys_router.state import StateError

    def make(**kw):
        if wrapper == "fallback":
            return SafeFallbackRouter(make_router("knn", k=5, encoder="hashing"),
                                      min_task_queries=5, **kw)
        return AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=1, seed=0, **kw)

    with pytest.raises(ValueError, match=rf"inner_folds: expected 'auto' or an integer in "
                                         rf"\[1, {MAX_INNER_FOLDS}\], got '{MAX_INNER_FOLDS + 1}'"):
        make(inner_folds=MAX_INNER_FOLDS + 1).fit(data)
    doc, arrays = router_to_state(make(inner_folds=2).fit(data))
    assert router_from_state(doc, arrays, "ok.json").inner_folds == 2
    for bad in (MAX_INNER_FOLDS + 1, 0, True, "os.system", [2]):
        hostile = {**doc, "params": {**doc["params"], "inner_folds": bad}}
        with pytest.raises(StateError, match=r"params\.inner_folds: expected"):
            router_from_state(hostile, arrays, "bad.json")
