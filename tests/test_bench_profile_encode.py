"""benchmarks/profile_encode.py: its split forward pass is the encoder's own (equal outputs, a
time for every operation), its table's shares add up to the call, and bad arguments are
refused."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def profile_script(bench_script):
    return bench_script("profile_encode")


def test_split_forward_equals_hidden_and_times_every_operation(profile_script):
    from recsys_router.encoders import bf16_minilm
    model = bf16_minilm._model(packed=bf16_minilm.bf16_support()[0])
    ids = torch.tensor([[101, 7592, 2088, 102, 0, 0, 0, 0], [101, 2023, 2003, 1037, 3231, 1012,
                                                              2307, 102]])
    mask = (ids != 0).long()
    clock = dict.fromkeys(profile_script._OPS, 0.0)
    with torch.inference_mode():
        split = profile_script._split_forward(model, ids, mask, clock)
        assert torch.equal(split, model.hidden(ids, mask))
    assert all(t > 0 for t in clock.values()), clock


def test_one_small_run_prints_shares_that_add_up(profile_script, capsys):
    profile_script.main(["--seed", "0", "--shapes", "2x16,1x32", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = [ln.strip("| ").split(" | ") for ln in out.splitlines() if ln.startswith("| 2x16")]
    assert len(rows) == len(profile_script._OPS) + 1 and rows[-1][1] == "**all**"
    ms = [float(r[2]) for r in rows[:-1]]
    assert sum(ms) == pytest.approx(float(rows[-1][2]), abs=0.01 * len(ms))
    shares = [int(r[3].rstrip("%")) for r in rows[:-1]]
    assert abs(sum(shares) - 100) <= len(shares)          # rounded percentages
    notes = [ln for ln in out.splitlines() if ln.startswith("- ")]
    assert [n.split(":")[0] for n in notes] == ["- 2x16", "- 1x32"]
    assert all("x faster)" in n for n in notes)


@pytest.mark.parametrize("bad", [["--shapes", "8y256"], ["--shapes", "0x256"],
                                 ["--shapes", "8x4"], ["--repeats", "0"]])
def test_bad_arguments_are_refused(profile_script, bad, capsys):
    with pytest.raises(SystemExit) as err:
        profile_script.main(bad)
    assert "--" in str(err.value)
