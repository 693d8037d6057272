"""benchmarks/bench_graph_parts.py: its reference forms equal the current ones (the script
asserts it before timing), its table has one row per part, and bad counts are refused."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def parts_script(bench_script):
    return bench_script("bench_graph_parts")


def test_the_old_pair_heads_are_the_concatenated_heads(parts_script):
    # the reference written in the script, against the heads written out per pair
    g = torch.Generator().manual_seed(0)
    h, n_l, n_q = 3, 2, 4
    shapes = ((n_q, h), (h, n_l * 2 * h), (n_l * 2 * h,))
    hu, m, bias = (torch.randn(s, generator=g) for s in shapes)
    w2, b2 = torch.randn(2, h, generator=g), torch.randn(2, generator=g)
    got = parts_script.old_pair_heads(hu, m, bias, w2, b2)
    pre = torch.relu(hu @ m + bias).view(n_q, n_l, 2, h)
    for i in range(n_q):
        for j in range(n_l):
            for t in range(2):
                want = float(pre[i, j, t] @ w2[t] + b2[t])
                assert got[i, j, t].item() == pytest.approx(want, rel=1e-5, abs=1e-5)


def test_one_round_prints_every_part(parts_script, capsys):
    parts_script.main(["--seed", "0", "--calls", "1", "--repeats", "1"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| part |") and len(lines) == 1 + 10
    for ln in lines[1:]:
        old, new, ratio = (float(v) for v in ln.strip("| ").split(" | ")[1:])
        assert old > 0 and new > 0 and ratio == pytest.approx(old / new, rel=0.05, abs=0.01)


@pytest.mark.parametrize("bad", [["--calls", "0"], ["--repeats", "-1"]])
def test_bad_counts_are_refused(parts_script, bad, capsys):
    with pytest.raises(SystemExit) as e:
        parts_script.main(bad)
    assert e.value.code == 2 and "must be >= 1" in capsys.readouterr().err
