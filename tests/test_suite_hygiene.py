"""The suite cannot pass by skipping: no test file importorskips the project's own modules
or a declared dependency (a broken import must fail, not skip)."""

from __future__ import annotations

import ast
import re
from importlib.metadata import requires
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _declared_modules() -> set[str]:
    """Top-level import names of the project and of every dependency it declares (the
    installed metadata of pyproject.toml: ``dependencies`` and every extra)."""
    names = {"recsys_router"}
    for req in requires("recsys-router") or []:
        dist = re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]
        names.add(dist.lower().replace("-", "_"))
    # distributions whose import name differs from the distribution name
    names |= {"sklearn", "yaml", "psycopg", "pytorch_lightning", "torch_geometric",
              "prometheus_client", "jsonargparse"}
    return names


def importorskips(source: str) -> list[str]:
    """Module names passed as a literal to ``pytest.importorskip`` in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                and node.args and isinstance(node.args[0], ast.Constant)):
            out.append(str(node.args[0].value))
    return out


def test_no_importorskip_of_the_project_or_a_dependency():
    declared = _declared_modules()
    bad = []
    for path in sorted(TESTS.glob("*.py")):
        for mod in importorskips(path.read_text()):
            top = mod.split(".")[0].lower()
            if top in declared or top in ("models", "datamodules"):
                bad.append(f"{path.name}: importorskip({mod!r})")
    assert not bad, bad


def test_the_scan_finds_importorskip_calls():
    src = 'a = pytest.importorskip("recsys_router.export")\nb = pytest.importorskip("torch")\n'
    assert importorskips(src) == ["recsys_router.export", "torch"]
    declared = _declared_modules()
    assert {"recsys_router", "torch", "selenium", "sklearn", "optuna"} <= declared
