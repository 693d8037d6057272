"""benchmarks/bench_graph_route.py: both forms agree before they are timed, the table has a
single-query and a batch row per size with the ratio of its two columns, and bad arguments
are refused."""

from __future__ import annotations

import pytest


@pytest.fixture
def route_script(bench_script):
    return bench_script("bench_graph_route")


def test_one_small_run_prints_both_rows_per_size(route_script, capsys):
    route_script.main(["--seed", "0", "--sizes", "60,80", "--batch", "7", "--calls", "2",
                       "--dim", "8", "--llms", "3"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| prediction |") and len(lines) == 1 + 4
    assert [ln.split(" | ")[0] for ln in lines[1:]] == [
        "| 60 train queries, 1 new query", "| 60 train queries, batch of 7",
        "| 80 train queries, 1 new query", "| 80 train queries, batch of 7"]
    for i, ln in enumerate(lines[1:]):
        cells = ln.strip("| ").split(" | ")
        whole, kept, ratio = (float(v) for v in cells[1:4])
        assert whole > 0 and kept > 0
        assert ratio == pytest.approx(whole / kept, rel=0.05, abs=0.06)
        assert (cells[5] == "-") == (i % 2 == 1)               # route() on the 1-query rows


@pytest.mark.parametrize("bad", [["--sizes", "10"], ["--sizes", "a,b"], ["--calls", "0"],
                                 ["--batch", "0"], ["--llms", "1"]])
def test_bad_arguments_are_refused(route_script, bad, capsys):
    with pytest.raises(SystemExit):
        route_script.main(bad)
    assert "--" in capsys.readouterr().err
