"""evaluate --auto N: inner Optuna search on the training queries only."""

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate
from recsys_router.fallback import realised_scores, stratified_holdout
from recsys_router.registry import make_router
from recsys_router.tuning.inner import SEARCH_DIR, AutoTunedRouter, flat_key, search_space_path


def _space(tmp_path, text, name="knn"):
    (tmp_path / f"{name}.yaml").write_text(text)
    return str(tmp_path)


def test_the_best_setting_on_held_out_training_queries_is_chosen(tmp_path):
    d = make_synthetic(300, 4, 3, seed=2)
    folder = _space(tmp_path, "params.k: {type: categorical, choices: [1, 60]}\n")
    r = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=6, seed=0,
                        search_dir=folder, objective="mu_o", inner_folds=1).fit(d)
    assert r.inner_folds_ == 1
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
    assert r.skipped_keys_ == []
    assert r.router_.fitted_ and r.router_.x_train_.shape[0] == 300    # refitted on all
    assert "trials; chosen" in r.summary() and "held-out mean score" in r.summary()


def test_cheap_routers_score_each_setting_on_every_training_query_by_inner_folds(tmp_path):
    """inner_folds="auto" gives a cheap router (knn) five folds: a setting's score is the
    mean realised score of the held-out predictions of all five, each model fitted on the
    other four, computed here by hand from a second fold assignment."""
    d = make_synthetic(200, 4, 3, seed=5)
    folder = _space(tmp_path, "params.k: {type: categorical, choices: [1, 40]}\n")
    r = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=4, seed=3,
                        search_dir=folder, objective="mu_o").fit(d)
    assert r.cheap_fit and r.inner_folds_ == 5
    # the folds by hand: each task shuffled with the seed, dealt round-robin, continuing
    rng = np.random.default_rng(3)
    keys = np.array([str(t) for t in d.tasks], dtype=object)
    fold_of, offset = np.empty(d.n_queries, dtype=int), 0
    for t in sorted(set(keys)):
        rows = rng.permutation(np.flatnonzero(keys == t))
        fold_of[rows] = (np.arange(len(rows)) + offset) % 5
        offset += len(rows)

    def pooled(k):
        got = []
        for f in range(5):
            tr, va = np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)
            m = make_router("knn", encoder="hashing", k=k).fit(d.subset(tr))
            pred = m.predict_scores(d.subset(va))
            for i, row in enumerate(va):     # the observed LLM with the top prediction
                obs = np.flatnonzero(~np.isnan(d.scores[row]))
                got.append(d.scores[row, obs[np.argmax(pred[i, obs])]])
        return float(np.mean(got))
    scores = {k: pooled(k) for k in (1, 10, 40)}
    assert r.default_score_ == pytest.approx(scores[10])
    for t in r.trials_:
        assert t["score"] == pytest.approx(scores[t["params"]["k"]])
    assert "5-fold held-out mean score" in r.summary()
    # a router whose fit is not cheap keeps one held-out split under "auto"
    assert not AutoTunedRouter("mf", {"encoder": "hashing"}).cheap_fit


@pytest.mark.parametrize("bad", [0, 21, -1, 2.5, True, "5", "all", None])
def test_inner_folds_must_be_auto_or_a_small_integer(bad):
    d = make_synthetic(60, 3, 2, seed=0)
    with pytest.raises(ValueError, match="inner_folds: expected 'auto' or an integer in"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=1, inner_folds=bad).fit(d)


def _nauc_by_hand(pred_s, pred_c, s, c):
    """held_out_nauc written out query by query and budget by budget (a second implementation)."""
    pred_s, pred_c = np.asarray(pred_s, float), np.asarray(pred_c, float).copy()
    s, c = np.asarray(s, float), np.asarray(c, float)
    obs = ~np.isnan(s)
    keep = [i for i in range(len(s)) if obs[i].any()]
    for i in keep:   # as evaluate's masks: an unobserved LLM a hair dearer than any observed
        top = max(pred_c[i, j] for j in range(s.shape[1]) if obs[i, j])
        for j in range(s.shape[1]):
            if not obs[i, j]:
                pred_c[i, j] = top + max(abs(top) * 1e-6, 1e-12)
    budgets = np.unique(pred_c[keep])
    if budgets.size > 100:
        budgets = np.quantile(budgets, np.linspace(0, 1, 100))
    pts = []
    for b in budgets:
        qs, cs = [], []
        for i in keep:
            js = [j for j in range(s.shape[1]) if obs[i, j]]
            fit = [j for j in js if pred_c[i, j] <= b]
            if fit:   # highest predicted score; ties to the cheaper predicted cost, then index
                j = min(fit, key=lambda j: (-pred_s[i, j], pred_c[i, j], j))
            else:     # nothing fits: the cheapest predicted (ties: higher score, then index)
                j = min(js, key=lambda j: (pred_c[i, j], -pred_s[i, j], j))
            qs.append(s[i, j])
            cs.append(c[i, j])
        pts.append((np.mean(cs), np.mean(qs)))
    front, best = [], -np.inf
    for x, y in sorted(pts, key=lambda p: p[0]):
        if y > best:
            front.append((x, y))
            best = y
    means = [np.mean(s[keep, j][obs[keep, j]]) if obs[keep, j].any() else -np.inf
             for j in range(s.shape[1])]
    top = max(means)
    j_best = min((j for j in range(s.shape[1]) if means[j] == top),
                 key=lambda j: (np.mean(c[keep, j][obs[keep, j]]), j))
    bs_cost = np.mean(c[keep, j_best][obs[keep, j_best]])
    pts = sorted(front + [(bs_cost, pts[-1][1])], key=lambda p: p[0])
    mx = max(p[0] for p in pts)
    xs = [p[0] / mx for p in pts]
    return sum((xs[k] - xs[k - 1]) * (pts[k][1] + pts[k - 1][1]) / 2 for k in range(1, len(pts)))


def test_held_out_nauc_matches_a_query_by_query_computation():
    from recsys_router.tuning.inner import held_out_nauc
    rng = np.random.default_rng(3)
    for trial in range(6):
        n, m = 40, 5
        s = rng.integers(0, 2, (n, m)).astype(float)
        c = rng.choice([0.5, 1.0, 2.0, 4.0, 8.0], size=(n, m))
        ps = rng.random((n, m))
        pc = c * rng.uniform(0.8, 1.2, (n, m)) if trial % 2 else np.broadcast_to(
            c.mean(axis=0), (n, m)).copy()
        if trial >= 2:                      # reduced pools, and one query with no LLM at all
            s[rng.random((n, m)) < 0.3] = np.nan
            s[0] = np.nan
            s[1, 1:] = np.nan
            s[1, 0] = 1.0
        got = held_out_nauc(ps, pc, s, c)
        assert got == pytest.approx(_nauc_by_hand(ps, pc, s, c), abs=1e-12), trial
    with pytest.raises(ValueError, match="finite cost"):
        c2 = c.copy()
        c2[~np.isnan(s)] = np.nan
        held_out_nauc(ps, pc, s, c2)
    with pytest.raises(ValueError, match="no held-out query"):
        held_out_nauc(ps, pc, np.full_like(s, np.nan), c)


def test_the_objective_follows_the_costs_unless_set():
    d = make_synthetic(240, 4, 3, seed=4)            # simulated USD costs on every cell
    assert d.costs is not None
    bare = d.subset()
    bare.costs = None
    tuned = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2, seed=0,
                            objective="auto").fit(d)
    assert tuned.objective_ == "nauc" and "held-out nAUC" in tuned.summary()
    # the defaults' nAUC on the pooled predictions of the five inner folds (knn's fit is
    # cheap), recomputed on the same folds by the second implementation
    from recsys_router.inner_validation import stratified_folds
    assert tuned.inner_folds_ == 5
    parts = {"s": [], "c": [], "ps": [], "pc": []}
    for tr, va in stratified_folds(d.tasks, 5, 0):
        m = make_router("knn", encoder="hashing", k=10).fit(d.subset(tr))
        held = d.subset(va)
        for key, v in (("s", held.scores), ("c", held.costs), ("ps", m.predict_scores(held)),
                       ("pc", m.predict_costs(held))):
            parts[key].append(v)
    p = {k: np.concatenate(v) for k, v in parts.items()}
    expect = _nauc_by_hand(p["ps"], p["pc"], p["s"], p["c"])
    assert tuned.default_score_ == pytest.approx(expect, abs=1e-12)
    one = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2, seed=0,
                          inner_folds=1).fit(d)
    from recsys_router.fallback import stratified_holdout as holdout
    tr, va = holdout(d.tasks, 0.2, 0)
    m = make_router("knn", encoder="hashing", k=10).fit(d.subset(tr))
    held = d.subset(va)
    assert one.default_score_ == pytest.approx(_nauc_by_hand(
        m.predict_scores(held), m.predict_costs(held), held.scores, held.costs), abs=1e-12)
    plain = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2,
                            seed=0, objective="auto").fit(bare)
    assert plain.objective_ == "mu_o"
    default = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2, seed=0).fit(d)
    assert default.objective_ == "nauc" and default.default_score_ == tuned.default_score_
    by_mu = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2, seed=0,
                            objective="mu_o").fit(d)
    assert by_mu.objective_ == "mu_o" and by_mu.default_score_ != tuned.default_score_
    forced = AutoTunedRouter("knn", {"encoder": "hashing", "k": 10}, n_trials=2, seed=0,
                             objective="nauc").fit(d)
    assert forced.objective_ == "nauc" and forced.default_score_ == tuned.default_score_
    with pytest.raises(ValueError, match="needs a finite cost"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=1, objective="nauc").fit(bare)
    with pytest.raises(ValueError, match="objective must be one of"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=1, objective="auc").fit(d)


def test_bad_requests_fail_cleanly(tmp_path):
    d = make_synthetic(60, 3, 2, seed=0)
    with pytest.raises(ValueError, match="n_trials"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=-1).fit(d)
    with pytest.raises(FileNotFoundError, match="no search space for router 'knn'"):
        search_space_path("knn", tmp_path)
    folder = _space(tmp_path, "params.k: {type: banana}\n")
    with pytest.raises(Exception, match="type"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=2, search_dir=folder).fit(d)
    # a search file is data: a key naming code is just an unknown parameter, refused by name
    folder = _space(tmp_path, "params.__class__: {type: categorical, choices: [os.system]}\n")
    with pytest.raises(ValueError, match=r"takes no parameter for search key\(s\) params.__class__"):
        AutoTunedRouter("knn", {"encoder": "hashing", "k": 3}, n_trials=2,
                        search_dir=folder).fit(d)


def test_a_search_key_the_router_does_not_take_is_refused_not_dropped(tmp_path):
    d = make_synthetic(60, 3, 2, seed=0)
    folder = _space(tmp_path, "params.k: {type: int, low: 1, high: 9}\n"
                              "params.temprature: {type: float, low: 0.1, high: 1.0}\n")
    with pytest.raises(ValueError, match=r"search key\(s\) params.temprature \(as 'temprature'\)"):
        AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=2, search_dir=folder).fit(d)


@pytest.mark.parametrize("path", sorted(SEARCH_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_search_key_reaches_its_router(path):
    name = path.stem.replace("_", "-")
    probe = make_router(name)
    _, mapping, skipped = AutoTunedRouter(name)._space(probe)
    assert skipped == [] and set(mapping.values()) <= set(probe.get_params())


def test_the_utility_temperature_is_a_router_parameter_that_reaches_the_loss():
    for name in ("mf", "two-tower"):
        r = make_router(name, loss="utility", temperature=0.3)
        assert r.get_params()["temperature"] == 0.3
        assert r.module_kwargs()["loss"].temperature == 0.3
        assert make_router(name).module_kwargs()["loss"].temperature == 0.0   # the default


def test_flat_keys():
    assert flat_key("model.init_args.loss.init_args.kind") == "loss"
    assert flat_key("model.init_args.hidden") == "hidden" and flat_key("params.k") == "k"


def test_evaluate_auto_writes_the_chosen_parameters_in_the_notes():
    d = make_synthetic(200, 4, 3, seed=1)
    res = evaluate(d, EvalConfig(["best-single", "knn"], protocols=["routereval"],
                                 split=(0.8, 0.2), seed=0, auto=2, encoder="hashing"),
                   progress=False)
    note = [n for n in res.notes if "knn --auto 2:" in n]
    # the simulated data has costs: the default objective ("auto") is nAUC there
    assert note and "2 trials; chosen" in note[0] and "5-fold held-out nAUC" in note[0]
    assert not any("best-single --auto" in n for n in res.notes)
    res = evaluate(d, EvalConfig(["knn"], protocols=["routereval"], split=(0.8, 0.2), seed=0,
                                 auto=2, auto_objective="mu_o", encoder="hashing",
                                 auto_folds=1),
                   progress=False)
    note = [n for n in res.notes if "knn --auto 2:" in n]
    assert note and "(held-out mean score" in note[0]


def test_cli_auto_objective_is_a_choice(tmp_path, capsys):
    from recsys_router.cli import main
    with pytest.raises(SystemExit):
        main(["evaluate", "--data", "synthetic", "--routers", "knn", "--auto", "1",
              "--auto-objective", "os.system", "--out", str(tmp_path / "o")])
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "21", "3.0", "auto;rm", "__import__('os')"])
def test_cli_auto_folds_is_auto_or_a_small_whole_number(value, tmp_path, capsys):
    from recsys_router.cli import main
    with pytest.raises(SystemExit):
        main(["evaluate", "--data", "synthetic", "--routers", "knn", "--auto", "1",
              "--auto-folds", value, "--out", str(tmp_path / "o")])
    assert ("argument --auto-folds: expected 'auto' or a whole number of inner folds"
            in capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_cli_auto_folds_reaches_the_search(tmp_path, capsys):
    from recsys_router.cli import main
    out = tmp_path / "o"
    assert main(["evaluate", "--data", "synthetic", "--routers", "knn", "--auto", "2",
                 "--auto-folds", "3", "--encoder", "hashing", "--no-plots", "--no-progress",
                 "--seed", "0", "--out", str(out)]) == 0
    assert "3-fold held-out" in capsys.readouterr().err


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
