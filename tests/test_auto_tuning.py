"""evaluate --auto N: inner Optuna search on the training queries only."""

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate
from recsys_router.fallback import realised_scores, stratified_holdout
from recsys_router.registry import make_router
from recsys_router.tuning.inner import AutoTunedRouter, flat_key, search_space_path


def _space(tmp_path, text, name="knn"):
    (tmp_path / f"{name}.yaml").write_text(text)
    return str(tmp_path)


def test_the_best_setting_on_held_out_training_queries_is_chosen(tmp_path):
    d = make_synthetic(300, 4, 3, seed=2)
    folder = _space(tmp_path, "params.k: {type: categorical, choices: [1, 60]}\n"
                              "params.no_such_thing: {type: int, low: 1, high: 3}\n")
    r = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=6, seed=0,
                        search_dir=folder).fit(d)
    # independent check: the same split, each k (and the defaults, k=10) scored by hand
    tr, va = stratified_holdout(d.tasks, 0.2, 0)
    truth = d.scores[va].astype(float)

    def held_out(k):
        m = make_router("knn", encoder="hashing", k=k).fit(d.subset(tr))
        return float(np.nanmean(realised_scores(m.predict_scores(d.subset(va)), truth)))
    scores = {k: held_out(k) for k in (1, 10, 60)}
    assert r.default_score_ == pytest.approx(scores[10])
    best = max((1, 60), key=lambda k: scores[k])
    if scores[best] > scores[10]:
        assert r.best_params_ == {"k": best} and r.router_.k == best
    else:
        assert r.best_params_ == {} and r.router_.k == 10
    assert r.skipped_keys_ == ["params.no_such_thing"]
    assert r.router_.fitted_ and r.router_.x_train_.shape[0] == 300    # refitted on all
    assert "trials; chosen" in r.summary()


def test_bad_requests_fail_cleanly(tmp_path):
    d = make_synthetic(60, 3, 2, seed=0)
    with pytest.raises(ValueError, match="n_trials"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=-1).fit(d)
    with pytest.raises(FileNotFoundError, match="no search space for router 'knn'"):
        search_space_path("knn", tmp_path)
    folder = _space(tmp_path, "params.k: {type: banana}\n")
    with pytest.raises(Exception, match="type"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=2, search_dir=folder).fit(d)
    # a search file is data: a key naming code is just an unknown parameter, skipped
    folder = _space(tmp_path, "params.__class__: {type: categorical, choices: [os.system]}\n")
    r = AutoTunedRouter("knn", {"encoder": "hashing", "k": 3}, n_trials=2,
                        search_dir=folder).fit(d)
    assert r.skipped_keys_ == ["params.__class__"] and r.trials_ == [] and r.router_.k == 3


def test_flat_keys():
    assert flat_key("model.init_args.loss.init_args.kind") == "loss"
    assert flat_key("model.init_args.hidden") == "hidden" and flat_key("params.k") == "k"


def test_evaluate_auto_writes_the_chosen_parameters_in_the_notes():
    d = make_synthetic(200, 4, 3, seed=1)
    res = evaluate(d, EvalConfig(["best-single", "knn"], protocols=["routereval"],
                                 split=(0.8, 0.2), seed=0, auto=2, encoder="hashing"),
                   progress=False)
    note = [n for n in res.notes if "knn --auto 2:" in n]
    assert note and "2 trials; chosen" in note[0]
    assert not any("best-single --auto" in n for n in res.notes)


def test_the_fallback_around_a_tuned_cheap_router_holds_out_every_query():
    # knn fits in seconds, so its search does too: the safe fallback around the tuned knn gets
    # the five inner folds (every training query held out once), as it does around plain knn;
    # a tuned Lightning router keeps one held-out part
    from recsys_router.fallback import SafeFallbackRouter
    assert AutoTunedRouter("knn").cheap_fit and not AutoTunedRouter("mf").cheap_fit
    d = make_synthetic(200, 4, 3, seed=1)
    fb = SafeFallbackRouter(AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=1),
                            seed=0).fit(d)
    assert (fb.fallback_["inner_folds"], fb.fallback_["n_val"]) == (5, 200)
