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


def test_quickstart_real_data_swap_runs_as_its_intro_says(tmp_path, monkeypatch):
    """The intro's recipe for real records (its load_dataset call, run from notebooks/ as
    Jupyter does) works: the old tip (swap the name, keep n_queries; ../shared/data) failed."""
    import re
    from conftest import SHARED_DATA, shared_path
    shared_path("routerbench_zs")
    nb_path = NOTEBOOKS[0].parent / "quickstart.ipynb"
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    intro = "".join(nb["cells"][0]["source"])
    (call,) = re.findall(r"`(load_dataset\(\"routerbench_zs\"[^`]*)`", intro)
    (keep,) = re.findall(r"`(data = data\.subset\([^`]*)`", intro)
    (split,) = re.findall(r"`(data\.split\(column=[^`]*)`", intro)
    # a repository checkout next to the shared data: <tmp>/repo/notebooks, <tmp>/shared/data
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(SHARED_DATA.resolve())
    (tmp_path / "repo" / "notebooks").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo" / "notebooks")
    monkeypatch.delenv("RECSYS_ROUTER_DATA", raising=False)
    first = "".join(nb["cells"][1]["source"])
    old_load = 'load_dataset("synthetic", n_queries=1000, n_llms=6, seed=0)'
    old_split = "data.split((0.8, 0.1, 0.1), seed=0)"
    assert old_load in first and old_split in first
    first = first.replace(old_load, call).replace(old_split, split)
    first = first.replace("print(data)\n", f"{keep}\nprint(data)\n", 1)
    nb["cells"][1]["source"] = [first]
    swapped = tmp_path / "swapped.ipynb"
    swapped.write_text(json.dumps(nb), encoding="utf-8")
    ns = run_notebook(swapped)
    from recsys_router import load_dataset
    full = load_dataset("routerbench_zs", data_dir=str(SHARED_DATA))
    done = np.isfinite(full.scores).all(axis=1) & np.isfinite(full.costs).all(axis=1)
    assert ns["data"].shape == (int(done.sum()), 11)
    split = full.queries["split"].astype(str).to_numpy()[done]
    assert (ns["train"].n_queries, ns["test"].n_queries) == \
        (int((split == "train").sum()), int((split == "test").sum()))   # the published split
