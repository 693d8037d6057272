"""The suite cannot pass by skipping: no test file importorskips the project's own modules
or a declared dependency (a broken import must fail, not skip); no function, test or method
is defined twice in one scope (the second silently replaces the first)."""

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


def root_folder_imports(source: str) -> list[str]:
    """Modules imported as top-level ``models`` / ``datamodules`` (the folders install only as
    ``recsys_router.models`` / ``recsys_router.datamodules``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        out += [n for n in names if n.split(".")[0] in ("models", "datamodules")]
    return out


def test_tests_import_models_only_through_the_package():
    bad = [f"{p.relative_to(TESTS)}: {m}" for p in sorted(TESTS.rglob("*.py"))
           for m in root_folder_imports(p.read_text())]
    assert not bad, bad


def test_the_scan_finds_root_folder_imports():
    src = ("import models.mf_module\nfrom datamodules._datasets import X\n"
           "from recsys_router.models import y\nfrom .models import z\n")
    assert root_folder_imports(src) == ["models.mf_module", "datamodules._datasets"]


ROOT = TESTS.parent
_SKIP_DECORATORS = ("setter", "getter", "deleter", "overload", "register")


def redefinitions(source: str) -> list[str]:
    """``name (lines a, b)`` for each function defined twice in one module or class body: the
    second silently replaces the first (a test written twice runs once). Property setters,
    ``typing.overload`` and registration decorators are meant to repeat a name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Module, ast.ClassDef)):
            continue
        seen: dict[str, int] = {}
        for item in node.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(k in ast.unparse(d) for d in item.decorator_list for k in _SKIP_DECORATORS):
                continue
            if item.name in seen:
                out.append(f"{item.name} (lines {seen[item.name]}, {item.lineno})")
            seen[item.name] = item.lineno
    return out


def test_no_function_is_defined_twice_in_one_scope():
    files = [p for d in ("recsys_router", "models", "datamodules", "tests", "benchmarks")
             for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 100
    bad = [f"{p.relative_to(ROOT)}: {r}" for p in files for r in redefinitions(p.read_text())]
    assert not bad, bad


def test_the_scan_finds_redefinitions():
    src = ("def f(): pass\ndef f(): pass\nclass A:\n    def g(self): pass\n"
           "    @property\n    def h(self): pass\n    @h.setter\n    def h(self, v): pass\n"
           "    def g(self): pass\n")
    assert redefinitions(src) == ["f (lines 1, 2)", "g (lines 4, 9)"]
