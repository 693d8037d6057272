"""Every notebook's code cells run top to bottom without error (no Jupyter needed), and the
quick tour's numbers are checked against values recomputed here by hand."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def run_notebook(path: Path) -> dict:
    """Execute a notebook's code cells in order; return the namespace they leave."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    ns: dict = {"__name__": "__notebook__"}
    for k, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        exec(compile(src, f"{path.name}[cell {k}]", "exec"), ns)  # noqa: S102 (our own notebook)
    return ns


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_notebook(path), path.name


def test_quickstart_numbers_by_hand(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = run_notebook(NOTEBOOKS[0].parent / "quickstart.ipynb")
    data, train, test, knn = ns["data"], ns["train"], ns["test"], ns["knn"]
    assert data.shape == (1000, 6) and (train.n_queries, test.n_queries) == (800, 100)
    # argmax routing: each choice is the LLM of highest predicted score
    pred = knn.predict_scores(test)
    choices = ns["choices"]
    np.testing.assert_array_equal(pred[np.arange(len(choices)), choices], pred.max(axis=1))
    # RouterEval numbers: mean score of the chosen LLMs, entropy (bits) of the choice shares
    s = test.scores
    assert ns["re_m"]["mu_o"] == pytest.approx(np.mean(s[np.arange(len(choices)), choices]))
    share = np.bincount(choices, minlength=test.n_llms) / len(choices)
    share = share[share > 0]
    assert ns["re_m"]["e_p"] == pytest.approx(-(share * np.log2(share)).sum())
    # under the median-cost budget, every pick costs at most the budget (kNN predicts each
    # LLM's mean train cost)
    budget = float(np.median(train.mean_costs()))
    cost_of = dict(zip(train.llm_names, train.mean_costs()))
    assert all(cost_of[name] <= budget + 1e-12 for name in ns["cheap"])
    assert 0.0 <= ns["rb"]["aiq"] <= 1.0 and 0.0 <= ns["ob"]["nauc"] <= 1.0
    # the reloaded artifact answers raw texts with pool LLMs under the same budget
    assert [r["llm"] in cost_of and cost_of[r["llm"]] <= budget + 1e-12 for r in ns["res"]] \
        == [True, True]


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ should hold at least the quick-tour notebook"
