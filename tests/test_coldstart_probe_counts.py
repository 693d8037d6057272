"""``evaluate --protocol coldstart``: a probe count larger than a cold LLM's observed training
queries is skipped with a note (in the output and config.json), and refused when no count
fits, instead of silently giving no onboarded rows; ``informative`` gives K probes when k-means
leaves clusters empty, and every row records the probes used (``n_probes``)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.coldstart.protocol import coldstart_rows
from recsys_router.coldstart.selection import select_probes
from recsys_router.data import RoutingData
from recsys_router.datasets.resolve import resolve_dataset
from recsys_router.evaluation.protocols._base import train_test_parts
from recsys_router.registry import make_router

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


def _two_profiles(n_a=5, n_b=1):
    """``n_a`` queries with profile (1, 0) over the pool, ``n_b`` with (0, 1)."""
    s = np.array([[1.0, 0.0]] * n_a + [[0.0, 1.0]] * n_b)
    return RoutingData([f"q{i}" for i in range(len(s))], ["a", "b"], s)


def test_informative_tops_up_to_k_from_the_largest_cluster():
    # 2 distinct profiles, k=3: k-means leaves one cluster empty; the third probe comes from
    # the 5-query cluster (5 / 1 candidates per probe > 1 / 1). Candidates per probe: 5/2,
    # 5/2 and 1, summing to the 6 candidates; mean-1 weights are those times 3/6
    d = _two_profiles()
    r = make_router("best-single").fit(d)
    rows, w = select_probes(r, d, 3, "informative", return_weights=True)
    assert len(rows) == 3 and len(set(rows.tolist())) == 3
    by_row = dict(zip(rows.tolist(), w.tolist()))
    assert sorted(by_row)[-1] == 5 and by_row[5] == pytest.approx(0.5)
    assert [by_row[i] for i in rows.tolist() if i != 5] == pytest.approx([1.25, 1.25])


def test_protocol_rows_record_the_probes_used():
    d = _two_profiles(30, 30)
    d = RoutingData(d.queries, ["a", "b", "new"],
                    np.hstack([d.scores, d.scores[:, :1]]))
    tr, te = d.subset(np.arange(0, 60, 2)), d.subset(np.arange(1, 60, 2))
    out = coldstart_rows(tr, te, lambda: make_router("best-single"), router="best-single",
                         cold_llms=["new"], ks=[8], strategies=["informative"], progress=False)
    onboarded = out[out["k"] == 8]
    assert set(onboarded["n_probes"]) == {8}
    assert set(out.loc[out["k"] == 0, "n_probes"]) == {30}
