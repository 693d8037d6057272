"""CLI boundaries of artifacts: signing keys from the environment, one-line errors with exit
2, and no temp folder of a killed export surviving the next run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from recsys_router.cli import main
from recsys_router.export import load_router

ROOT = Path(__file__).resolve().parents[1]
DATA = ["--data", "synthetic", "--data-option", "n_queries=80", "--data-option", "n_llms=3"]


def _export(out: Path, *extra: str) -> int:
    return main(["export", "--router", "best-single", *DATA, "--out", str(out), "--seed", "0",
                 *extra])


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_export_signed_then_serve_and_calibrate_need_the_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ART_KEY", "k-123")
    assert _export(tmp_path / "a", "--sign-key-env", "ART_KEY") == 0
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert man["signature"]["alg"] == "hmac-sha256"
    assert load_router(tmp_path / "a", sign_key="k-123").llm_names
    capsys.readouterr()
    # calibrate: a signed artifact is not rewritten without its key
    calib = ["calibrate", str(tmp_path / "a"), *DATA, "--target-cost", "0.001"]
    assert main(calib) == 2
    assert "is signed" in _one_line_error(capsys)
    assert main([*calib, "--sign-key-env", "ART_KEY"]) == 0
    assert load_router(tmp_path / "a", sign_key="k-123").default_policy[0] == "wtp"
    capsys.readouterr()
    # serve with the wrong key: refused before anything listens
    monkeypatch.setenv("WRONG_KEY", "nope")
    assert main(["serve", str(tmp_path / "a"), "--sign-key-env", "WRONG_KEY", "--port", "1"]) == 2
    assert "signature mismatch" in _one_line_error(capsys)


def test_unset_key_variable_and_tampered_artifact_are_one_line_exit_2(tmp_path, monkeypatch,
                                                                     capsys):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert _export(tmp_path / "a", "--sign-key-env", "NO_SUCH_KEY_VAR") == 2
    assert "NO_SUCH_KEY_VAR" in _one_line_error(capsys)
    assert not (tmp_path / "a").exists()
    assert _export(tmp_path / "a") == 0
    capsys.readouterr()
    (tmp_path / "a" / "manifest.json").write_text("[1, 2]")
    for cmd in (["serve", str(tmp_path / "a"), "--port", "1"],
                ["calibrate", str(tmp_path / "a"), *DATA, "--target-cost", "0.001"]):
        assert main(cmd) == 2
        assert "manifest.json" in _one_line_error(capsys)


_SLOW_EXPORT = """
import sys, time
import numpy as np
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router
from recsys_router.registry import make_router
real = np.savez
def slow(*a, **k):
    real(*a, **k)
    print("writing", flush=True)
    time.sleep(60)
np.savez = slow
d = make_synthetic(40, 3, 2, seed=0)
export_router(make_router("best-single").fit(d), sys.argv[1], train_data=d)
"""


def test_killed_export_leaves_nothing_that_survives_the_next_run(tmp_path, capsys):
    out = tmp_path / "art"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_EXPORT, str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing", proc.stderr.read()
        leftovers = [p.name for p in tmp_path.iterdir()]
        assert len(leftovers) == 1 and leftovers[0].startswith(".art.tmp-")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert [p.name for p in tmp_path.iterdir()] == leftovers  # kill -9: nothing cleaned up
    assert _export(out) == 0  # the next export of the target removes the dead one's folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]
    # the next load does too (a folder left by a dead export of an existing artifact)
    stale = tmp_path / f".art.tmp-{proc.pid}-zz9"
    stale.mkdir()
    (stale / "weights.npz").write_bytes(b"partial")
    load_router(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]
    # a temp folder of a live process (this one) is left alone
    live = tmp_path / f".art.tmp-{os.getpid()}-abc"
    live.mkdir()
    load_router(out)
    assert live.exists()


@pytest.mark.parametrize("name", ["cascade", "oracle", "r_o", " Oracle "])
def test_export_refuses_routers_that_read_the_true_scores(tmp_path, capsys, name):
    # their artifact loaded but no request could be served (serve and route(texts) refused it);
    # refused before any data is read: the dataset named here does not exist
    out = tmp_path / "art"
    code = main(["export", "--router", name, "--data", str(tmp_path / "absent.csv"), "--out", str(out)])
    err = _one_line_error(capsys)
    assert code == 2 and f"--router {name}: " in err and "could not be served" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name,param,cls", [("task-residual", "base=oracle", "TaskResidualRouter"),
                                            ("cost-aware", "base=r_o", "CostAwareRouter"),
                                            ("cost-aware", "base=cascade", "CostAwareRouter")])
def test_export_refuses_a_wrapper_around_a_ground_truth_router(tmp_path, capsys, name, param, cls):
    # was exported (held-out mu_o 1.0 in its manifest, read from the true scores) and served
    # the same scores for every query
    out = tmp_path / "art"
    code = main(["export", "--router", name, "--param", param, "--data", str(tmp_path / "absent.csv"),
                 "--out", str(out)])
    err = _one_line_error(capsys)
    assert code == 2 and f"--router {name}: {cls} routes from the true scores" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_export_refuses_a_config_wrapping_a_ground_truth_router_before_fitting(tmp_path, capsys):
    # the config's params were not used by the check before fitting: the data was read and the
    # wrapper fitted (seconds to hours) before the refusal
    cfg = tmp_path / "best.yaml"
    cfg.write_text("router: task-residual\nparams: {base: oracle, alpha: 0.5}\n")
    out = tmp_path / "art"
    code = main(["export", "-c", str(cfg), "--data", str(tmp_path / "absent.csv"), "--out", str(out)])
    err = _one_line_error(capsys)
    assert code == 2 and f"{cfg}: router 'task-residual': TaskResidualRouter routes from the true " \
        "scores" in err, err
    assert not out.exists()


def test_wrappers_report_their_inner_routers_use_of_the_true_scores():
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.fallback import SafeFallbackRouter
    from recsys_router.registry import make_router
    d = make_synthetic(80, 3, 2, seed=0)
    for inner, truth in (("oracle", True), ("r_o", True), ("cascade", True), ("best-single", False),
                         ("knn", False)):
        for wrapper in (make_router("task-residual", base=inner, alpha=0.5),
                        make_router("cost-aware", base=inner, penalty=0.0),
                        SafeFallbackRouter(make_router(inner))):
            assert wrapper.uses_ground_truth is truth, (type(wrapper).__name__, inner)
    fitted = make_router("task-residual", base="oracle", alpha=0.5).fit(d)
    assert fitted.router_.uses_ground_truth and fitted.uses_ground_truth
    # a wrapped wrapper, and a base the registry does not hold (an artifact path: its fitted
    # copy answers once built)
    assert make_router("cost-aware", base="task-residual", base_params={"base": "oracle"}).uses_ground_truth is True
    assert make_router("cost-aware", base="task-residual", base_params={"base": "knn"}).uses_ground_truth is False
    assert make_router("task-residual", base="./no-such-artifact").uses_ground_truth is False


def test_export_refuses_a_config_naming_a_ground_truth_router(tmp_path, capsys):
    cfg = tmp_path / "best.yaml"
    cfg.write_text("router: cascade\n")  # as a tune best_config.yaml names its router
    out = tmp_path / "art"
    code = main(["export", "-c", str(cfg), "--data", str(tmp_path / "absent.csv"), "--out", str(out)])
    err = _one_line_error(capsys)  # refused before fitting: nothing printed before the error
    assert code == 2 and f"{cfg}: router 'cascade': CascadeRouter routes from the true scores" in err, err
    assert not out.exists()
    # a router that routes from text alone still exports (and evaluate keeps the others in-process)
    assert _export(out) == 0 and (out / "manifest.json").exists()


def test_export_refuses_a_ground_truth_router_given_as_an_artifact(tmp_path, capsys):
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.registry import make_router
    d = make_synthetic(60, 3, 2, seed=0)
    src = export_router(make_router("cascade").fit(d), tmp_path / "casc", train_data=d)  # the library still writes it
    out = tmp_path / "again"
    assert main(["export", "--router", str(src), *DATA, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "CascadeRouter routes from the true scores" in err and not out.exists()
