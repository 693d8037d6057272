"""``evaluate --protocol coldstart``: a probe count larger than a cold LLM's observed training
queries is skipped with a note (in the output and config.json), and refused when no count
fits, instead of silently giving no onboarded rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from recsys_router.cli import main
from recsys_router.datasets.resolve import resolve_dataset
from recsys_router.evaluation.protocols._base import train_test_parts

ARGS = ["evaluate", "--data", "synthetic", "-o", "n_queries=150", "-o", "n_llms=3", "--routers", "knn",
        "--protocol", "coldstart", "--cold-llms", "1", "--probe-strategy", "random", "--seed", "0",
        "--no-progress", "--no-plots"]


def _pool():
    """The cold LLM's observed training queries, computed as the protocol splits the data."""
    data = resolve_dataset("synthetic", stack=True, n_queries=150, n_llms=3)
    train, _ = train_test_parts(data, None, 0)
    return train


def test_too_many_probes_is_a_note_or_an_error(tmp_path, capsys):
    train = _pool()
    out = tmp_path / "a"
    assert main([*ARGS, "--probes", "10,100000", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    (cold,) = cfg["cold_llms"]
    n = int(np.isfinite(train.scores[:, train.llm_names.index(cold)]).sum())
    note = f"--probes 100000 skipped for LLM {cold!r}: only {n} observed training queries to probe"
    assert cfg["notes"] == [note] and f"note: {note}" in capsys.readouterr().out
    assert set(pd.read_csv(out / "metrics.csv")["k"]) == {0, 10}
    bad = tmp_path / "b"
    assert main([*ARGS, "--probes", "100000", "--out", str(bad)]) == 2
    assert (f"--probes 100000: LLM {cold!r} has only {n} observed training queries to probe"
            in capsys.readouterr().err)
    assert not bad.exists()
