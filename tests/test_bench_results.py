"""How the benchmark scripts write what they measured: result files through a temporary file
and a rename (a failed write keeps the previous file), README blocks between the markers the
README holds (with its mode kept, safe against a run made side by side), no row for what was
not measured, and no working folder left in the temporary directory."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import stat
import types
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Boom:
    """A cell whose text cannot be made: a write that fails part-way through."""

    def __str__(self):
        raise OSError("simulated failure mid-write")


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


# ---- bench_quality: results and README blocks


def test_quality_failed_write_keeps_the_previous_results(bench_script, tmp_path, capsys):
    bq = bench_script("bench_quality")
    good = pd.DataFrame({"router": ["knn"] * 200, "value": [0.5] * 200})
    bq.write(tmp_path, "folds_x", pd.DataFrame({"router": ["knn"]}),
             types.SimpleNamespace(notes=[], metrics=good), "# run 1")
    bad = pd.DataFrame({"router": ["knn"] * 200 + [_Boom()], "value": [0.7] * 201})
    with pytest.raises(OSError, match="mid-write"):
        bq.write(tmp_path, "folds_x", pd.DataFrame({"router": ["knn"]}),
                 types.SimpleNamespace(notes=[], metrics=bad), "# run 2")
    csv = pd.read_csv(tmp_path / "folds_x.csv")
    assert len(csv) == 200 and set(csv["value"]) == {0.5}  # run 1's file, whole
    assert (tmp_path / "folds_x.md").read_text().startswith("# run 1")  # its table beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folds_x.csv", "folds_x.md"]


def test_quality_readme_keeps_its_mode_and_another_runs_temp(bench_script, tmp_path):
    """The fixed temporary name README.md.tmp was shared by runs made side by side: one run
    overwrote and renamed away the other's half-written file."""
    bq = bench_script("bench_quality")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n")
    os.chmod(readme, 0o640)
    other = tmp_path / "README.md.tmp"
    other.write_text("another run's half-written README")
    bq.update_readme(readme, "r/folds_a", "table a\n")
    assert other.read_text() == "another run's half-written README"
    assert readme.read_text() == ("intro\n\n<!-- bench_quality: r/folds_a -->\ntable a\n"
                                  "<!-- /bench_quality: r/folds_a -->\n")
    assert _mode(readme) == 0o640


def _updates(path: str, key: str, n: int, q) -> None:
    import bench_quality
    errors = []
    for i in range(n):
        try:
            bench_quality.update_readme(Path(path), key, f"table {key} {i}\n")
        except Exception as e:  # noqa: BLE001 - reported to the test
            errors.append(f"{type(e).__name__}: {e}")
    q.put((key, errors))


def test_quality_readme_updates_side_by_side_lose_nothing(bench_script, tmp_path):
    bench_script("bench_quality")  # imported here, inherited by the forked writers
    readme = tmp_path / "README.md"
    readme.write_text("intro\n" + "x" * 1_000_000 + "\n")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_updates, args=(str(readme), k, 25, q)) for k in ("o/a", "o/b")]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert results == {"o/a": [], "o/b": []}
    text = readme.read_text()
    for k in ("o/a", "o/b"):  # each run's last table, once
        assert text.count(f"<!-- bench_quality: {k} -->") == 1 and f"table {k} 24\n" in text
    assert text.startswith("intro\n" + "x" * 1_000_000 + "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


# ---- bench_coldstart: the README's own markers, checked before the run


def _readme_commands() -> list[tuple[str, list[str]]]:
    """(--out, datasets) of every bench_coldstart command in benchmarks/README.md."""
    text = (ROOT / "benchmarks" / "README.md").read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        if "benchmarks/bench_coldstart.py" in line and "--out" in line:
            out = re.search(r"--out (\S+)", line).group(1)
            found.append((out, re.search(r"--datasets (\S+)", line).group(1).split(",")))
    return found


def test_coldstart_readme_commands_have_their_blocks(bench_script):
    bc = bench_script("bench_coldstart")
    commands = _readme_commands()
    assert len(commands) >= 6  # the README's coldstart commands were found
    body = (ROOT / "benchmarks" / "README.md").read_text()
    for out, datasets in commands:
        assert bc.missing_markers(body, out, datasets) == [], (out, datasets)


def test_coldstart_readme_block_is_replaced_with_mode_kept(bench_script, tmp_path):
    bc = bench_script("bench_coldstart")
    out = "benchmarks/results/coldstart-A-cruxeval"
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n<!-- coldstart: {out} cruxeval -->\nold\n"
                      f"<!-- /coldstart: {out} cruxeval -->\nb\n")
    os.chmod(readme, 0o644)
    bc._write_readme(readme, "NEW", out, "cruxeval")
    assert readme.read_text() == (f"a\n<!-- coldstart: {out} cruxeval -->\nNEW\n"
                                  f"<!-- /coldstart: {out} cruxeval -->\nb\n")
    assert _mode(readme) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


def test_coldstart_missing_markers_fail_before_the_run(bench_script, tmp_path, monkeypatch,
                                                       capsys):
    bc = bench_script("bench_coldstart")

    def must_not_load():
        raise AssertionError("the run started before the README markers were checked")
    monkeypatch.setitem(bc.DATASETS, "cruxeval", must_not_load)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- coldstart: o cruxeval -->\n<!-- /coldstart: o cruxeval -->\n")
    with pytest.raises(SystemExit) as exc:
        bc.main(["--datasets", "cruxeval,bfcl_v1", "--out", "o", "--readme", str(readme)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "no block for bfcl_v1" in err and "<!-- coldstart: o bfcl_v1 -->" in err
    assert "cruxeval;" not in err  # its block is there


# ---- the shared writers (bench_coldstart, bench_feedback, bench_scale use them)


def test_failed_csv_write_keeps_the_old_file(bench_script, tmp_path):
    bc = bench_script("bench_checks")
    target = tmp_path / "regret.csv"
    bc.to_csv_atomic(pd.DataFrame({"x": [1, 2]}), target)
    with pytest.raises(OSError, match="mid-write"):
        bc.to_csv_atomic(pd.DataFrame({"x": [3, _Boom()]}), target)
    assert target.read_text() == "x\n1\n2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["regret.csv"]


def test_scale_json_goes_through_a_rename(bench_script, tmp_path, monkeypatch):
    bs = bench_script("bench_scale")
    seen = []
    real = bs.write_text_atomic
    monkeypatch.setattr(bs, "write_text_atomic", lambda p, t: (seen.append(p), real(p, t)))
    assert bs.main(["--skip-full", "--skip-scaling", "--json", str(tmp_path / "s.json")]) == 0
    assert seen == [tmp_path / "s.json"] and (tmp_path / "s.json").read_text().startswith("{")


# ---- bench_scale: no row for the pool that was not run


def test_scale_without_pool_all_prints_no_pool_all_rows(bench_script, capsys):
    bs = bench_script("bench_scale")
    assert bs.main(["--seed", "0", "--skip-full", "--routers", "best-single", "--scale-llms",
                    "10,20", "--scale-queries", "60", "--scale-pools", "3"]) == 0
    out = capsys.readouterr().out
    assert "| stage |" in out and "| total |" in out
    assert not [line for line in out.splitlines() if line.startswith("|") and "pool all" in line]
    assert "--scale-pools has no 'all' pool" in out


def test_scale_per_llm_reference_is_empty_without_pool_all(bench_script):
    bs = bench_script("bench_scale")
    assert bs._per_llm_reference(pd.DataFrame({"pool": [3, 5], "protocol": ["routereval"] * 2})) \
        == {}


# ---- bench_serve / bench_serve_isolation: working folders removed, also on error


@pytest.mark.parametrize("script,starter", [("bench_serve", "_serve"),
                                            ("bench_serve_isolation", "_start")])
def test_serve_benchmarks_remove_their_folder_on_error(bench_script, tmp_path, monkeypatch,
                                                       script, starter):
    mod = bench_script(script)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmpdir))
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))

    def fail(*a, **k):
        raise RuntimeError("server did not start")
    monkeypatch.setattr(mod, starter, fail)
    with pytest.raises(RuntimeError, match="did not start"):
        mod.main(["--requests", "3", "--clients", "2"] if script.endswith("isolation")
                 else ["--requests", "3", "--concurrency", "1", "--encoders", "hashing"])
    assert list(tmpdir.iterdir()) == []
    assert os.environ["RECSYS_ROUTER_CACHE"] == str(tmp_path / "cache")
