"""benchmarks/bench_data_checks.py and bench_json_depth.py run end to end at a small size and
print one row per check with a positive time and ratio (speed itself is their output, never
asserted here)."""

from __future__ import annotations


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()[1:]]


def test_data_checks_prints_every_check(bench_script, capsys):
    script = bench_script("bench_data_checks")
    assert script.main(["--seed", "0", "--queries", "300", "--llms", "4", "--split-queries", "500",
                        "--tasks", "20", "--rows", "50", "--cols", "7", "--repeat", "1"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert [r[0] for r in rows] == ["labels", "labels", "labels", "stratify", "float32",
                                    "scalar", "scalar"]
    assert [r[1] for r in rows[:3]] == ["(category)", "(str)", "(object)"]
    assert [r[1] for r in rows[5:]] == ["(str)", "(mixed)"]
    assert all(float(r[-1]) > 0 and float(r[-3]) >= 0 for r in rows)   # ratio, check seconds


def test_json_depth_bench_prints_each_text(bench_script, capsys):
    script = bench_script("bench_json_depth")
    assert script.main(["--max-mib", "1", "--seed", "0"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert len(rows) >= 2 and all(r[1] == "1" and float(r[2]) > 0 for r in rows)
