"""bench_train's --start list, --baseline-ref checkout and child rows, hostile values included."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def bench_train(bench_script):
    return bench_script("bench_train")


def test_parse_starts_keeps_the_order(bench_train):
    assert bench_train.parse_starts("warm, cold") == ["warm", "cold"]
    assert bench_train.parse_starts("imported") == ["imported"]


@pytest.mark.parametrize("text", ["", ",", "hot", "cold,cold", "cold;rm -rf /", "__import__('os')"])
def test_parse_starts_refuses_unknown_or_repeated(bench_train, text):
    with pytest.raises(SystemExit, match="--start: expected a comma-separated list"):
        bench_train.parse_starts(text)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch, bench_train):
    """A two-commit repository: the first without benchmarks/bench_train.py, the second with."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.invalid")
    _git(root, "config", "user.name", "t")
    (root / "README").write_text("first\n")
    _git(root, "add", "README")
    _git(root, "commit", "-qm", "first")
    first = _git(root, "rev-parse", "HEAD")
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "bench_train.py").write_text("print('old child')\n")
    _git(root, "add", "benchmarks")
    _git(root, "commit", "-qm", "second")
    monkeypatch.setattr(bench_train, "ROOT", root)
    return root, first, _git(root, "rev-parse", "HEAD")


def test_checkout_extracts_the_commit(bench_train, repo, tmp_path):
    _, _, second = repo
    dest = tmp_path / "out"
    assert bench_train.checkout(second[:9], dest) == second
    assert (dest / "benchmarks" / "bench_train.py").read_text() == "print('old child')\n"
    assert not (dest / ".git").exists()


def test_checkout_refuses_a_commit_without_the_script(bench_train, repo, tmp_path):
    _, first, _ = repo
    with pytest.raises(SystemExit, match="has no benchmarks/bench_train.py"):
        bench_train.checkout(first, tmp_path / "out")


@pytest.mark.parametrize("ref", ["", "--upload-pack=touch /tmp/pwned", "-h", "HEAD~99",
                                 "no-such-branch", "HEAD\n--output=/tmp/x", "a b"])
def test_checkout_refuses_option_like_or_unknown_refs(bench_train, repo, tmp_path, ref):
    dest = tmp_path / "out"
    with pytest.raises(SystemExit, match="--baseline-ref: "):
        bench_train.checkout(ref, dest)
    assert not dest.exists()   # refused before anything is written


def test_run_child_reads_the_last_json_line(bench_train):
    code = "import json; print('noise'); print(json.dumps({'model': 'x', 'records': 3}))"
    row = bench_train.run_child([sys.executable, "-c", code], {}, 60, "label")
    assert row["model"] == "label" and row["records"] == 3
    assert row["process_cpu_s"] >= 0


def test_run_child_reports_failures_and_timeouts(bench_train):
    bad = bench_train.run_child([sys.executable, "-c", "raise SystemExit('boom: no data')"],
                                {}, 60, "m")
    assert bad == {"model": "m", "error": "boom: no data"}
    slow = bench_train.run_child([sys.executable, "-c", "import time; time.sleep(30)"],
                                 {}, 0.5, "m")
    assert slow == {"model": "m", "error": "timeout after 0 s"}


def test_baseline_table_ratios(bench_train, capsys):
    """Ratios by hand: 100/20 = 5.0 by wall; 40/8 = 5.0 by process CPU."""
    rows = [{"model": "graph (warm)", "records_per_s": 100.0, "process_cpu_s": 8.0},
            {"model": "mf", "error": "failed"}]
    base = {"graph": {"model": "graph @ abc", "records_per_s": 20.0, "process_cpu_s": 40.0}}
    bench_train.print_baseline_table(rows, base, "abc")
    out = capsys.readouterr().out
    assert "| graph (warm) | 100 | 20 | 5.0 | 8.0 | 40.0 | 5.0 |" in out
    assert "| mf |" not in out


def test_baseline_ref_refuses_defaults_before_any_work(bench_train, monkeypatch):
    monkeypatch.setattr(bench_train, "build", lambda *a: pytest.fail("data was simulated"))
    with pytest.raises(SystemExit, match="cannot be combined with --defaults"):
        bench_train.main(["--defaults", "--baseline-ref", "HEAD", "--models", "mf"])
