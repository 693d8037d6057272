"""The import layering of ARCHITECTURE.md, enforced: every module of the package (``models/``
and ``datamodules/`` as ``recsys_router.models`` / ``recsys_router.datamodules``) belongs to a
layer of the table between ``<!-- layers -->`` markers, and imports (at module level or inside
functions) only modules of its own layer or lower ones, except the pairs listed between
``<!-- layer-exceptions -->`` markers. The table is read from ARCHITECTURE.md itself, so the
document and the check cannot drift apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "ARCHITECTURE.md"
SOURCES = {"recsys_router": ROOT / "recsys_router", "recsys_router.models": ROOT / "models",
           "recsys_router.datamodules": ROOT / "datamodules"}


def _block(marker: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {marker} -->(.*?)<!-- /{marker} -->", text, re.S)
    assert m, f"ARCHITECTURE.md has no <!-- {marker} --> block"
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[0]) <= set("-: ") and cells[0] not in ("layer", "module"):
            rows.append(cells)
    return rows


def layers() -> list[tuple[str, list[str]]]:
    """(layer, module prefixes) from the top layer down."""
    return [(name, re.findall(r"`([\w.]+)`", mods)) for name, mods, *_ in _block("layers")]


def exceptions() -> set[tuple[str, str]]:
    return {(re.sub(r"`", "", a), re.sub(r"`", "", b)) for a, b, *_ in _block("layer-exceptions")}


def modules() -> dict[str, Path]:
    out = {}
    for base, folder in SOURCES.items():
        for f in sorted(folder.rglob("*.py")):
            rel = f.relative_to(folder).with_suffix("").parts
            if base == "recsys_router" and rel[0] in ("models", "datamodules"):
                continue
            parts = list(rel[:-1]) if rel[-1] == "__init__" else list(rel)
            out[".".join([base, *parts])] = f
    return out


def imports(name: str, path: Path) -> set[str]:
    """Every ``recsys_router`` module imported anywhere in the file (relative ones resolved)."""
    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # submodules imported by name
    known = modules()
    return {m for m in found if m in known}


ROOT_PACKAGE = "recsys_router"


def layer_of(module: str, table) -> int | None:
    """The layer whose longest prefix covers ``module``. The package's own name covers only
    ``recsys_router/__init__.py``, never its submodules: a new module without a row of its own
    has no layer, and ``test_every_module_has_a_layer`` says so."""
    best, rank = -1, None
    for k, (_, prefixes) in enumerate(table):
        for p in prefixes:
            covers = module == p or (p != ROOT_PACKAGE and module.startswith(p + "."))
            if covers and len(p) > best:
                best, rank = len(p), k
    return rank


def test_every_module_has_a_layer():
    table = layers()
    assert len(table) >= 4
    missing = [m for m in modules() if layer_of(m, table) is None]
    assert not missing, (f"modules without a layer: {missing}; add them to the layer table of "
                         "ARCHITECTURE.md")


def test_no_module_imports_a_higher_layer():
    table, allowed = layers(), exceptions()
    bad = []
    for name, path in modules().items():
        mine = layer_of(name, table)
        if mine is None:  # reported by test_every_module_has_a_layer
            continue
        for target in imports(name, path):
            theirs = layer_of(target, table)
            if theirs is not None and theirs < mine and not any(
                    (name == a or name.startswith(a + ".")) and
                    (target == b or target.startswith(b + ".")) for a, b in allowed):
                bad.append(f"{name} ({table[mine][0]}) imports {target} ({table[theirs][0]})")
    assert not bad, "imports against the layering of ARCHITECTURE.md:\n" + "\n".join(sorted(bad))


def test_a_module_without_a_row_has_no_layer():
    """The api row (the package's name) does not catch modules nobody placed."""
    table = layers()
    assert [name for name, _ in table if ROOT_PACKAGE in _] == ["api"]
    assert table[layer_of(ROOT_PACKAGE, table)][0] == "api"
    assert layer_of("recsys_router.brand_new_module", table) is None
    assert layer_of("recsys_router.brand_new_pkg.sub", table) is None
    # a placed package still covers its submodules
    assert table[layer_of("recsys_router.evaluation.brand_new", table)][0] == "workflows"
    assert table[layer_of("recsys_router.models.brand_new", table)][0] == "routers"


def test_the_check_sees_a_violation(tmp_path):
    """The checker itself: a core module importing the CLI is reported."""
    fake = tmp_path / "data.py"
    fake.write_text("def f():\n    from .cli import main\n    from recsys_router.evaluation import evaluate\n")
    found = imports("recsys_router.data", fake)
    assert found == {"recsys_router.cli", "recsys_router.evaluation"}
    table = layers()
    assert layer_of("recsys_router.cli", table) < layer_of("recsys_router.data", table)
    assert layer_of("recsys_router.cli.args", table) == layer_of("recsys_router.cli", table)


@pytest.mark.parametrize("a, b", sorted(exceptions()))
def test_every_exception_is_still_needed(a, b):
    """An exception that no import uses any more is removed from the document."""
    used = any(b == t or t.startswith(b + ".")
               for name, path in modules().items() if name == a or name.startswith(a + ".")
               for t in imports(name, path))
    assert used, f"ARCHITECTURE.md allows {a} -> {b}, but no such import is left: remove the row"
