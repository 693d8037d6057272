"""The one registration mechanism (recsys_router.registries.Registry) behind routers,
datasets and encoders; hostile names; every registered router has a contract test class."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from recsys_router.datasets import DATASETS, available_datasets, dataset_spec, load_dataset
from recsys_router.encoders import ENCODERS, HashingEncoder, get_encoder, register_encoder
from recsys_router.registries import MAX_NAME_LENGTH, Registry
from recsys_router.registry import ROUTERS, available_routers

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
HOSTILE = ["os:system", "subprocess:Popen", "builtins:eval", "../../etc/passwd",
           "recsys_router.models.mf_module:MFModule"]


def test_the_three_registries_are_one_mechanism():
    assert all(isinstance(r, Registry) for r in (ROUTERS, DATASETS, ENCODERS))
    assert (ROUTERS.kind, DATASETS.kind, ENCODERS.kind) == ("router", "dataset", "encoder")


def test_registry_names_aliases_and_errors():
    reg = Registry("thing", {"a": 1})
    reg.register("b", 2, aliases=("bee", "B2"))
    assert reg.get(" A ") == 1 and reg.get("bee") == 2 and reg.get("b2") == 2
    assert reg.names() == ["a", "b"] and "BEE" in reg and "c" not in reg
    with pytest.raises(ValueError, match="already registered"):
        reg.register("bee", 3)
    reg.register("bee", 3, overwrite=True)      # "bee" is now its own entry, not b's alias
    assert reg.get("bee") == 3 and reg.get("b") == 2 and reg.names() == ["a", "b", "bee"]
    reg.unregister("b")
    assert "b2" not in reg and reg.names() == ["a", "bee"]
    with pytest.raises(KeyError, match="unknown thing 'zzz'; available: a"):
        reg.get("zzz")
    for bad in ("", "   ", None, 42, "x" * (MAX_NAME_LENGTH + 1)):
        with pytest.raises(ValueError, match="thing name"):
            reg.key(bad)
        assert bad not in reg
    with pytest.raises(ValueError, match="package.module:attribute"):
        reg.register("c", "no_colon_here")


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_selects_nothing_and_imports_nothing(name):
    """A name from outside only selects among registered entries: nothing it spells is
    imported (checked in a fresh interpreter, so earlier imports do not hide one)."""
    code = (
        "import sys\n"
        "from recsys_router.registry import ROUTERS\n"
        "from recsys_router.datasets import DATASETS\n"
        "from recsys_router.encoders import ENCODERS\n"
        "before = set(sys.modules)\n"
        f"name = {name!r}\n"
        "for reg in (ROUTERS, DATASETS, ENCODERS):\n"
        "    try:\n"
        "        reg.get(name)\n"
        "    except KeyError as e:\n"
        "        assert 'unknown' in str(e) and 'available' in str(e), e\n"
        "    else:\n"
        "        raise SystemExit('resolved ' + name)\n"
        "new = set(sys.modules) - before\n"
        "assert not [m for m in new if m.split('.')[0] in ('subprocess', 'builtins', 'os')\n"
        "            or m.startswith('recsys_router.models')], new\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_hostile_dataset_names_are_clean_errors():
    for name in ("os:system", "x" * 5000):
        with pytest.raises(ValueError, match="unknown dataset|cannot tell"):
            load_dataset(name)
        assert dataset_spec(name) is None


def test_every_loader_module_registers_itself_once():
    """One place per dataset: each loader file's register() call; the registry finds them
    by importing the package's modules (no hand-kept list)."""
    import pkgutil

    import recsys_router.datasets as pkg
    names = available_datasets()
    assert {"synthetic", "generic", "routerbench_zs", "routerbench", "routereval", "embedllm",
            "llmrouter", "routerdc", "routellm_mmlu", "routellm_gsm8k",
            "routellm_mtbench"} <= set(names)
    by_module = {}
    for name, spec in DATASETS.items():
        by_module.setdefault(spec.loader.__module__, []).append(name)
    public = {f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)
              if not m.name.startswith("_")}
    assert set(by_module) <= public
    # the hub datasets say which files they read in that same call
    hub = {n: s.hub_files for n, s in DATASETS.items() if s.hub_repo}
    assert set(hub) == {"routerbench", "routereval", "embedllm"}
    assert hub["routerbench"] == ("routerbench_0shot.pkl",)
    assert all(files != ("*",) for files in hub.values())
    assert dataset_spec("SIMULATED") is DATASETS.raw("synthetic")   # aliases, any case


def test_encoders_by_name_and_registration():
    assert isinstance(get_encoder("HASHING", dim=16), HashingEncoder)
    assert ENCODERS.canonical("all-MiniLM-L6-v2") == "minilm"
    with pytest.raises(ValueError, match="needs a path"):
        get_encoder("precomputed:")
    with pytest.raises(ValueError, match="takes no ':' argument"):
        get_encoder("hashing:extra")
    register_encoder("hash8", lambda arg, **kw: HashingEncoder(dim=8, **kw))
    try:
        assert get_encoder("hash8").dim == 8
        with pytest.raises(ValueError, match="already registered"):
            register_encoder("hash8", lambda arg, **kw: None)
    finally:
        ENCODERS.unregister("hash8")
    assert "hash8" not in ENCODERS


def _contract_names_in(source: str) -> set[str]:
    """Router names built by ``make_router("<name>", ...)`` inside a ``RouterContract``
    subclass (direct or through another such class of the same file) of ``source``."""
    names = set()
    contract = {"RouterContract"}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(isinstance(b, ast.Name) and b.id in contract for b in node.bases):
            continue
        contract.add(node.name)
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "make_router"
                    and sub.args and isinstance(sub.args[0], ast.Constant)):
                names.add(str(sub.args[0].value).lower())
    return names


def _contract_router_names() -> set[str]:
    """:func:`_contract_names_in` over every ``tests/test_*.py`` (read, not run)."""
    out = set()
    for path in sorted(TESTS.glob("test_*.py")):
        out |= _contract_names_in(path.read_text())
    return out


def _builtin_router_names() -> set[str]:
    """Routers the package itself registers (test modules register toy routers of their own)."""
    from recsys_router.registry import ROUTERS
    return {n for n in available_routers()
            if isinstance(ROUTERS.raw(n), str) and ROUTERS.raw(n).startswith("recsys_router.")}


def test_every_registered_router_has_a_contract_test_class():
    builtin = _builtin_router_names()
    assert {"knn", "mf", "graph", "cost-aware", "logged"} <= builtin
    missing = sorted(builtin - _contract_router_names())
    assert not missing, (f"registered routers without a RouterContract test class: {missing}; "
                         "add `class TestX(RouterContract): router_factory = staticmethod("
                         "lambda: make_router(NAME, ...))` to a tests/test_*.py file")


def test_the_contract_scan_reads_only_contract_classes():
    src = ("class TestA(RouterContract):\n    router_factory = staticmethod(lambda: "
           "make_router('ZZ-A', k=1))\n"
           "class TestB(TestA):\n    router_factory = staticmethod(lambda: make_router('zz-c'))\n"
           "class NotContract:\n    f = make_router('zz-b')\n"
           "x = make_router('zz-d')\n")
    assert _contract_names_in(src) == {"zz-a", "zz-c"}
    assert {"knn", "mf", "graph", "cost-aware"} <= _contract_router_names()
