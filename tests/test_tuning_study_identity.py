"""A shared study tunes one thing: it records the router, the search space and the configs
it was created for and refuses a run of anything else; and a refused ``tune`` run (bad
``--storage``, heartbeat or ``--out``) says which option is wrong and creates nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution

from recsys_router.cli import main
from recsys_router.tuning import best_trial, open_study, tune, write_best_config
from tuning_data import synthetic_data_config

ROOT = Path(__file__).resolve().parents[1]
SEARCH = ROOT / "configs" / "search"


@pytest.fixture
def data_cfg(tmp_path):
    return synthetic_data_config(tmp_path / "data.yaml", dim=32, n_queries=200, n_llms=3, n_topics=2)


def _tune(router, search, cfg, url, out, n):
    return tune([cfg], SEARCH / search, router=router, n_trials=n, storage=url, study_name="shared",
                out_dir=out, seed=0, progress=False, plots=False)


def test_a_shared_study_refuses_another_router_search_space_or_config(tmp_path, data_cfg):
    url = f"sqlite:///{tmp_path / 's.db'}"          # absolute path: four slashes
    assert url.startswith("sqlite:////")
    res = _tune("knn", "knn.yaml", data_cfg, url, tmp_path / "knn", 2)
    attrs = res.study.user_attrs
    assert attrs["router"] == "knn" and len(attrs["search_space_hash"]) == 16
    with pytest.raises(ValueError, match=r"router knn, not svm; search space \(hash\) \w+, not \w+"):
        _tune("svm", "svm.yaml", data_cfg, url, tmp_path / "svm", 4)
    other = synthetic_data_config(tmp_path / "other.yaml", dim=32, n_queries=240, n_llms=3,
                                  n_topics=2)
    # other data too (240 queries): its fingerprint differs as well
    with pytest.raises(ValueError, match=r"created for another run: configs .*hash\) \w+, not \w+"
                                         r"; data \(fingerprint .*\) \w+, not \w+"
                                         r"; its trials cannot be mixed"):
        _tune("knn", "knn.yaml", other, url, tmp_path / "knn2", 4)
    study = optuna.load_study(study_name="shared", storage=url)
    assert len(study.trials) == 2                   # nothing was added by the refused runs
    assert not (tmp_path / "svm").exists() and not (tmp_path / "knn2").exists()
    res = _tune("knn", "knn.yaml", data_cfg, url, tmp_path / "knn", 3)   # the same run resumes
    assert res.n_run == 1 and len(res.study.trials) == 3


def test_the_cli_names_what_differs_in_one_line(tmp_path, data_cfg, capsys):
    url = f"sqlite:///{tmp_path / 's.db'}"
    base = ["tune", "-c", str(data_cfg), "--study-name", "shared", "--storage", url,
            "--no-plots", "--no-progress", "--n-trials"]
    assert main([*base, "1", "--router", "knn", "--search", str(SEARCH / "knn.yaml"),
                 "--out", str(tmp_path / "knn")]) == 0
    capsys.readouterr()
    assert main([*base, "2", "--router", "svm", "--search", str(SEARCH / "svm.yaml"),
                 "--out", str(tmp_path / "svm")]) == 2
    err = capsys.readouterr().err
    assert "router knn, not svm" in err and "--study-name" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "svm").exists()


def test_a_study_of_an_older_version_is_accepted_with_a_warning(tmp_path, data_cfg, caplog):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    old = optuna.create_study(study_name="shared", storage=url, direction="maximize")
    old.set_user_attr("metric", "val/mu_o")
    old.add_trial(optuna.trial.create_trial(   # a trial as an older recsys-router wrote it
        params={"params.k": 3}, distributions={"params.k": IntDistribution(1, 100, log=True)},
        value=0.5, user_attrs={"overrides": ["--params.k=3"], "config": "router: knn\n"}))
    with caplog.at_level(logging.WARNING, logger="recsys_router.tuning.study"):
        res = _tune("knn", "knn.yaml", data_cfg, url, tmp_path / "knn", 2)
    assert "made by an older recsys-router" in caplog.text
    assert res.n_run == 1 and res.study.user_attrs["router"] == "knn"
    with pytest.raises(ValueError, match="router knn, not svm"):   # recorded from now on
        _tune("svm", "svm.yaml", data_cfg, url, tmp_path / "svm", 3)


@pytest.mark.parametrize("extra, expect", [
    (["--storage", "foo://bar"], "--storage 'foo://bar': not a database URL"),
    (["--storage", "nourl"], "--storage must be a database URL"),
    (["--heartbeat-interval", "0"], "heartbeat interval must be a whole number"),
])
def test_a_refused_run_creates_no_out_folder(tmp_path, data_cfg, capsys, extra, expect):
    out = tmp_path / "o"
    rc = main(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(SEARCH / "knn.yaml"),
               "--n-trials", "1", "--no-plots", "--no-progress", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and expect in err and "Traceback" not in err, err
    if "foo" in extra:
        assert "NoSuchModuleError" in err and "sqlite:////absolute/path.db" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data.yaml"]


def test_out_naming_a_file_is_refused_by_name(tmp_path, data_cfg, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc = main(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(SEARCH / "knn.yaml"),
               "--n-trials", "1", "--no-plots", "--no-progress", "--out", str(afile)])
    err = capsys.readouterr().err
    assert rc == 2 and f"--out {afile} exists and is not a folder" in err and "Errno" not in err
    assert afile.read_text() == "x"


def _foreign_study(url, name="shared"):
    """A study another tool made: its own user attributes, a parameter knn's space lacks."""
    st = optuna.create_study(study_name=name, storage=url, direction="maximize")
    st.set_user_attr("owner", "some-other-tool")
    st.optimize(lambda t: 0.99 + 0 * t.suggest_float("lr", 1e-4, 1e-1, log=True), n_trials=2)
    return st


def test_a_study_of_another_tool_is_refused_and_left_as_it_was(tmp_path, data_cfg, capsys):
    url = f"sqlite:///{tmp_path / 'foreign.db'}"
    _foreign_study(url)
    rc = main(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(SEARCH / "knn.yaml"),
               "--n-trials", "4", "--storage", url, "--study-name", "shared", "--no-plots",
               "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "study 'shared'" in err and "was not made by recsys-router tune" in err
    assert "['lr']" in err and "not in the search space" in err
    st = optuna.load_study(study_name="shared", storage=url)
    assert st.user_attrs == {"owner": "some-other-tool"}       # no metric, no identity stamped
    assert [t.params for t in st.trials] == [{"lr": t.params["lr"]} for t in st.trials]
    assert len(st.trials) == 2 and not (tmp_path / "o").exists()


def test_a_study_whose_completed_trials_lack_the_trial_attributes_is_refused(tmp_path):
    """Parameter names that fit the space are not enough: the trial attributes are needed."""
    st = optuna.storages.InMemoryStorage()
    s = optuna.create_study(study_name="x", storage=st)
    s.add_trial(optuna.trial.create_trial(
        params={"params.k": 5}, distributions={"params.k": IntDistribution(1, 100, log=True)},
        value=0.9))
    ident = {"router": "knn", "search_space_hash": "a", "config_hash": "b"}
    with pytest.raises(ValueError, match=r"study 'x' in InMemoryStorage was not made by recsys-router"
                                         r" tune \(COMPLETE trial 0 has no config/overrides"):
        open_study("x", st, direction="minimize", identity=ident, search_keys=["params.k"])
    empty = optuna.create_study(study_name="y", storage=st)   # no trials: nothing to mix with
    empty.set_user_attr("owner", "other")
    assert open_study("y", st, direction="minimize", identity=ident,
                      search_keys=["params.k"]).user_attrs["router"] == "knn"


def test_best_config_is_the_best_of_this_tools_trials(tmp_path):
    """A trial without this tool's attributes (0.99) never wins over this tool's trials."""
    st = optuna.create_study(direction="maximize")
    dist = {"x": FloatDistribution(0, 1)}
    st.add_trial(optuna.trial.create_trial(params={"x": 0.1}, distributions=dist, value=0.99))
    for i, v in enumerate((0.3, 0.7, 0.5)):
        st.add_trial(optuna.trial.create_trial(
            params={"x": v}, distributions=dist, value=v,
            user_attrs={"overrides": [f"--x={v}"], "config": f"x: {v}\nn: {i}\n"}))
    assert st.best_trial.number == 0                          # what Optuna alone would pick
    assert best_trial(st).number == 2 and best_trial(st).value == 0.7
    path = write_best_config(st, tmp_path, "val/mu_o")
    assert path.read_text().splitlines()[1:] == ["# overrides: [\"--x=0.7\"]", "x: 0.7", "n: 1"]
    low = optuna.create_study(direction="minimize")
    low.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=-5.0))
    assert best_trial(low) is None and write_best_config(low, tmp_path / "n") is None
