"""Every notebook's code cells run top to bottom without error (no Jupyter needed)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    ns: dict = {"__name__": "__notebook__"}
    for k, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        exec(compile(src, f"{path.name}[cell {k}]", "exec"), ns)  # noqa: S102 (our own notebook)


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ should hold at least the quick-tour notebook"
