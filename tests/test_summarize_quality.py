"""benchmarks/summarize_quality.py: paired fold differences checked by hand on a tiny file,
and hostile result files rejected with a one-line error naming the file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.summarize_quality import fold_values, main  # noqa: E402

HEAD = "dataset,protocol,pool,group,fold,router,metric,value\n"


def _write(path: Path, table: dict[str, list[float]], extra: str = "") -> Path:
    rows = [HEAD]
    for router, values in table.items():
        for f, v in enumerate(values):
            rows.append(f"d,routereval,all,all,{f},{router},mu_o,{v}\n")
            rows.append(f"d,routereval,all,all,{f},{router},v_b,9\n")  # another metric: ignored
        rows.append(f"d,routereval,all,all,mean,{router},mu_o,123\n")  # summary rows: ignored
    path.write_text("".join(rows) + extra)
    return path


def test_defaults_and_auto_tables_by_hand(tmp_path, capsys):
    _write(tmp_path / "folds_d.csv", {
        "best-single": [0.60, 0.70, 0.80], "task-best": [0.62, 0.70, 0.78],
        "mf": [0.64, 0.71, 0.79],    # mean 0.7133: the best CF router
        "als": [0.50, 0.60, 0.70],   # mean 0.6000: the worst
        "knn": [0.90, 0.90, 0.90]})  # not a CF router: never "best CF"
    _write(tmp_path / "folds_d_a.csv", {"mf": [0.66, 0.71, 0.82], "knn": [0.90, 0.89, 0.90],
                                         "best-single": [0.60, 0.70, 0.80]})
    main(["--out", str(tmp_path), "--datasets", "d,absent", "--auto-tag", "_a"])
    out = capsys.readouterr().out
    # mf - best-single per fold: +0.04, +0.01, -0.01 -> mean 0.0133, sd 0.02517
    # mf - task-best per fold: +0.02, +0.01, +0.01 -> mean 0.0133, sd 0.00577
    # als - best-single: -0.10 each fold -> mean -0.1, sd 0
    assert ("| d | 3 | 0.7000 | 0.7000 | mf 0.7133 | +0.0133 ± 0.0252 | +0.0133 ± 0.0058 "
            "| knn 0.9000 | 1 of 2 | als -0.1000 ± 0.0000 |") in out
    # auto: mf +0.02, 0, +0.03 -> mean 0.0167, sd 0.01528; knn 0, -0.01, 0 -> -0.0033, 0.00577
    assert "| d | mf | 0.7133 | 0.7300 | +0.0167 ± 0.0153 |" in out
    assert "| d | knn | 0.9000 | 0.8967 | -0.0033 ± 0.0058 |" in out
    assert "best-single | 0.7000 | 0.7000" not in out.split("--auto")[-1]


@pytest.mark.parametrize("extra, match", [
    ("d,routereval,all,all,3,mf,mu_o,__import__('os')\n", "row 16: value .* not a finite"),
    ("d,routereval,all,all,3,mf,mu_o,inf\n", "not a finite number"),
])
def test_hostile_values_are_rejected_naming_file_and_row(tmp_path, extra, match):
    p = _write(tmp_path / "folds_d.csv", {"best-single": [0.6] * 3, "mf": [0.7] * 3}, extra)
    with pytest.raises(ValueError, match=match) as e:
        fold_values(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_missing_column_and_empty_file_are_rejected(tmp_path):
    p = tmp_path / "folds_d.csv"
    p.write_text("router,metric,value\nmf,mu_o,0.5\n")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['fold', 'group'"):
        fold_values(p)
    p.write_text(HEAD + "d,routereval,all,all,mean,mf,mu_o,0.5\n")
    with pytest.raises(ValueError, match="no per-fold rows"):
        fold_values(p)


def test_mismatched_folds_between_runs_are_an_error(tmp_path):
    _write(tmp_path / "folds_d.csv", {"best-single": [0.6] * 3, "mf": [0.7] * 3})
    _write(tmp_path / "folds_d_a.csv", {"mf": [0.7] * 2})
    with pytest.raises(ValueError, match=r"d: the --auto run has folds \[0, 1\]"):
        main(["--out", str(tmp_path), "--datasets", "d", "--auto-tag", "_a"])


def test_runs_are_joined_router_by_router(tmp_path, capsys):
    _write(tmp_path / "folds_d_new.csv", {"best-single": [0.6, 0.7], "graph": [0.61, 0.69]})
    _write(tmp_path / "folds_d_old.csv", {"best-single": [0.6, 0.7], "graph": [0.5, 0.69],
                                          "mf": [0.7, 0.8]})
    main(["--out", str(tmp_path), "--datasets", "d", "--tag", "_new,_old"])
    out = capsys.readouterr().out
    # mf joins from the second run and is the best CF router: +0.1 both folds
    assert "| d | 2 | 0.6500 | - | mf 0.7500 | +0.1000 ± 0.0000 |" in out
    assert ("routers joined from folds_d_old.csv: mf; shared routers, largest |difference| "
            "over folds: best-single 0, graph 0.11") in out


def _note(fold, router, verdict, base, diff, se):
    return (f"- fold {fold}: {router} safe fallback: fell back on 0 of 2 tasks; all-queries "
            f"verdict {verdict} (all 50 held-out queries: router - {base} = {diff}, SE {se}); "
            "other queries: router\n")


def test_kept_leads_by_hand(tmp_path, capsys):
    _write(tmp_path / "folds_d.csv", {"best-single": [0.60, 0.70, 0.80],
                                      "task-best": [0.65, 0.70, 0.80],
                                      "mf": [0.58, 0.72, 0.80], "knn": [0.61, 0.70, 0.80]})
    (tmp_path / "folds_d.md").write_text(
        "### d\n"
        + _note(0, "mf", "router", "best-single", "+0.0100", "0.0200")   # 0.5 SE: listed
        + _note(1, "mf", "router", "task-best", "+0.0300", "0.0200")     # 1.5 SE: not
        + _note(2, "mf", "best-single", "best-single", "-0.0100", "0.0200")  # fell back: not
        + _note(0, "knn", "router", "best-single", "+0.0000", "0.0000")  # SE 0 (a tie): not
        + _note(1, "knn", "router", "task-best", "+0.0050", "0.0100")    # 0.5 SE: listed
        + "- fold 2: mf safe fallback: __import__('os') all-queries verdict router\n")  # no match
    main(["--out", str(tmp_path), "--datasets", "d", "--kept-leads", "1"])
    out = capsys.readouterr().out
    # mf fold 0: test 0.58 - 0.60 = -0.02; knn fold 1 against task-best: 0.70 - 0.70 = 0
    assert "| d | mf | 0 | +0.0100 | 0.0200 | best-single | -0.0200 |" in out
    assert "| d | knn | 1 | +0.0050 | 0.0100 | task-best | +0.0000 |" in out
    assert out.count("| d | ") == 3   # the defaults row and the two listed router-folds
    # only CF routers in the summary: mf's one router-fold, below its baseline
    assert "CF routers: 1 router-folds; on the test fold 1 below the baseline, 0 tied, 0 above; " \
           "mean -0.0200" in out


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_kept_leads_must_be_positive_and_finite(tmp_path, bad):
    _write(tmp_path / "folds_d.csv", {"best-single": [0.6], "mf": [0.6]})
    with pytest.raises(SystemExit, match="--kept-leads must be a finite number > 0"):
        main(["--out", str(tmp_path), "--datasets", "d", "--kept-leads", bad])


def test_several_auto_runs_and_another_metric(tmp_path, capsys):
    # one --auto run per router, joined; --metric nauc reads the orbit protocol's rows only
    def nauc_file(path, table):
        rows = [HEAD]
        for router, values in table.items():
            for f, v in enumerate(values):
                rows.append(f"d,orbit,all,all,{f},{router},nauc,{v}\n")
                rows.append(f"d,routereval,all,all,{f},{router},mu_o,0.5\n")   # not read
                rows.append(f"d,routereval,all,all,{f},{router},nauc,7\n")     # other protocol
        path.write_text("".join(rows))
    nauc_file(tmp_path / "folds_d.csv", {"best-single": [0.5, 0.6], "task-best": [0.5, 0.6],
                                         "mf": [0.70, 0.80], "graph": [0.60, 0.60]})
    nauc_file(tmp_path / "folds_d_a1.csv", {"best-single": [0.5, 0.6], "mf": [0.74, 0.80]})
    nauc_file(tmp_path / "folds_d_a2.csv", {"best-single": [0.5, 0.6], "graph": [0.50, 0.60]})
    main(["--out", str(tmp_path), "--datasets", "d", "--auto-tag", "_a1,_a2", "--metric", "nauc"])
    out = capsys.readouterr().out
    assert "nauc at the defaults" in out and "against the defaults, nauc" in out
    # mf: +0.04, 0.00 -> mean +0.0200, sd 0.0283; graph: -0.10, 0.00 -> -0.0500, sd 0.0707
    assert "| d | mf | 0.7500 | 0.7700 | +0.0200 ± 0.0283 |" in out
    assert "| d | graph | 0.6000 | 0.5500 | -0.0500 ± 0.0707 |" in out
    assert "folds_d_a2.csv: graph" in out
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--datasets", "d", "--metric", "__import__"])
