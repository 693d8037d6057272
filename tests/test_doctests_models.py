"""The docstring examples of ``recsys_router.models`` and ``recsys_router.datamodules``.

pytest's ``--doctest-modules`` (pyproject's ``addopts``) only walks ``testpaths``; the
root folders ``models/`` and ``datamodules/`` are not there, because pytest would import
them as top-level ``models``/``datamodules`` packages (the design installs them only under
``recsys_router``, and a second copy of ``RouterModule`` then fails ``issubclass`` checks
such as ``resolve_module_class``'s). So this file runs their examples under the installed
names: one case per module, found on disk (nothing is imported to list them), failing with
doctest's own report.

A module, or an example, that needs an optional heavy backend which is not installed
(``BACKENDS``) is skipped with the backend named; any other import error fails.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

PACKAGES = ("recsys_router.models", "recsys_router.datamodules")
#: third-party packages whose absence skips (not fails) a module's doctests
BACKENDS = frozenset({"torch_geometric", "implicit", "onnx", "onnxruntime",
                      "sentence_transformers", "optuna", "optuna_integration"})
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: an example's first line, as doctest's parser reads it (``>>>`` then a space or line end)
PROMPT = re.compile(r"^[ \t]*>>>(?: |$)", re.M)


def _folder(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


def _walk(package: str, folder: Path):
    """``package`` and every module and subpackage below it, from the files on disk."""
    yield package
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda i: i.name):
        name = f"{package}.{info.name}"
        if info.ispkg:
            yield from _walk(name, folder / info.name)
        else:
            yield name


def _modules() -> list[str]:
    return [name for pkg in PACKAGES for name in _walk(pkg, _folder(pkg))]


MODULES = _modules()


def _missing_backend(exc: BaseException) -> str | None:
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if top in BACKENDS:
            return top
    return None


class _Runner(doctest.DocTestRunner):
    """Records which optional backends an example found missing."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.missing: set[str] = set()

    def report_unexpected_exception(self, out, test, example, exc_info):
        backend = _missing_backend(exc_info[1])
        if backend is not None:
            self.missing.add(backend)
        super().report_unexpected_exception(out, test, example, exc_info)


def test_walk_finds_every_module_file():
    # independently of pkgutil: every .py file under the two folders, as a dotted name
    expected = set()
    for pkg in PACKAGES:
        folder = _folder(pkg)
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            expected.add(".".join((pkg, *parts)))
    assert set(MODULES) == expected
    assert len(MODULES) == len(set(MODULES))
    assert len([m for m in MODULES if m.startswith("recsys_router.models")]) >= 40
    assert len([m for m in MODULES if m.startswith("recsys_router.datamodules")]) >= 3
    for known in ("recsys_router.models.base.lightning_router", "recsys_router.models.losses",
                  "recsys_router.datamodules.routing_datamodule"):
        assert known in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        backend = _missing_backend(exc)
        if backend is None:
            raise
        pytest.skip(f"{name} needs the optional backend {backend!r}, which is not installed")
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    found = sum(len(t.examples) for t in tests)
    # an example the finder cannot reach (a nested function, a comment) would never run
    written = len(PROMPT.findall(Path(module.__file__).read_text(encoding="utf-8")))
    assert found == written, (f"{name}: the source has {written} '>>>' example(s), "
                              f"doctest finds {found}")
    runner = _Runner(optionflags=FLAGS)
    report: list[str] = []
    failed = tried = 0
    missing: set[str] = set()
    for test in sorted(tests, key=lambda t: t.lineno or 0):
        runner.missing = set()
        result = runner.run(test, out=report.append)
        tried += result.attempted
        if runner.missing:      # this docstring's later examples fail for the same reason
            missing |= runner.missing
        else:
            failed += result.failed
    assert failed == 0, (f"{failed} of {tried} example(s) failed in {name}:\n"
                         + "".join(report))
    if missing:
        pytest.skip(f"{name}'s examples need the optional backend(s) {sorted(missing)}, "
                    f"which are not installed")
