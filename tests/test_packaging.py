"""Packaging: models/ and datamodules/ install as recsys_router.models / recsys_router.datamodules.

The repository keeps the design card's folders at the root; ``pyproject.toml`` maps them
under the ``recsys_router`` namespace, so nothing generic lands in a user's site-packages.
Their doctests run under those names in ``test_doctests_models.py``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"recsys_router": "recsys_router", "models": "recsys_router.models",
           "datamodules": "recsys_router.datamodules"}


def _declared() -> tuple[list[str], dict]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return cfg["packages"], cfg["package-dir"]


def test_every_package_folder_is_declared_under_the_namespace():
    packages, mapping = _declared()
    assert mapping == {"recsys_router": "recsys_router", "recsys_router.models": "models",
                       "recsys_router.datamodules": "datamodules"}
    found = set()
    for folder, prefix in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((prefix, *rel)))
    assert found == set(packages)
    assert not any(p.split(".")[0] in ("models", "datamodules") for p in packages)


def test_namespaced_modules_import_from_the_root_folders():
    mf = importlib.import_module("recsys_router.models.mf_module")
    dm = importlib.import_module("recsys_router.datamodules.routing_datamodule")
    assert Path(mf.__file__).resolve().parent == ROOT / "models"
    assert Path(dm.__file__).resolve().parent == ROOT / "datamodules"
    assert "models" not in sys.modules and "datamodules" not in sys.modules


@pytest.mark.slow
def test_wheel_holds_only_the_recsys_router_namespace(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                          "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    if out.returncode != 0 and "Could not find a version" in out.stderr:
        pytest.skip(f"cannot build a wheel offline here: {out.stderr.strip()[-200:]}")
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"recsys_router"}
    assert "recsys_router/models/mf_module.py" in names
    assert "recsys_router/datamodules/routing_datamodule.py" in names
