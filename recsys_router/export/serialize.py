"""Pickle-free serialisation of fitted routers: a JSON tree plus named numpy arrays.

Any fitted router (and what it holds: scikit-learn estimators, torch modules, fitted
encoders, numpy generators) is turned into a JSON-able tree whose leaves are plain
values or references to arrays stored separately (``.npz`` loaded with
``allow_pickle=False``). Objects are rebuilt only from classes in an allow-list of
module prefixes, by creating an empty instance and restoring its attributes: nothing
in an artifact is executed, and no arbitrary class can be named.

Attributes that must not be stored (large models rebuilt from a name, caches, modules
holding non-data helpers such as torch_geometric's inspectors) are listed by a class in
``_transient_attrs_``; they are skipped on save. A class may also define
``_transient_state_()`` returning plain data (arrays, tensors, numbers) that is stored in
their place; on load, ``_restore_transient(state)`` is called with that data (or
``_restore_transient()`` without arguments when the class stores none) to rebuild them.
"""

from __future__ import annotations

import importlib
import math
from collections import OrderedDict

import numpy as np

__all__ = ["to_tree", "from_tree", "ALLOWED_MODULE_PREFIXES", "SerializationError", "allow_module"]

ALLOWED_MODULE_PREFIXES = ("recsys_router.", "sklearn.", "torch.nn.",
                           "torch_geometric.nn.", "implicit.", "scipy.sparse.", "numpy.random.",
                           "collections.", "pandas.")


_EXTRA_PREFIXES: list[str] = []


def allow_module(prefix: str) -> None:
    """Add a module prefix (e.g. your plug-in package ``"myrouters."``) to the allow-list."""
    if prefix not in _EXTRA_PREFIXES:
        _EXTRA_PREFIXES.append(prefix)


class SerializationError(ValueError):
    """An object cannot be saved, or an artifact names something that cannot be loaded."""


def _qualname(obj) -> str:
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _allowed(path: str) -> bool:
    mod = path.split(":", 1)[0] + "."
    return any(mod.startswith(p) for p in (*ALLOWED_MODULE_PREFIXES, *_EXTRA_PREFIXES))


#: plain types an artifact may name as a value (e.g. a ``dtype=np.float32`` parameter);
#: they are returned as classes, never instantiated
_PLAIN_TYPES = {f"builtins:{t.__qualname__}": t for t in (int, float, bool, str, complex)}
_PLAIN_TYPES.update({f"numpy:{t.__name__}": t for t in (
    np.float16, np.float32, np.float64, np.longdouble, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128)})


def to_tree(obj, arrays: dict, path: str = "root"):
    """Encode ``obj`` into a JSON-able tree, moving arrays into ``arrays`` (name -> ndarray).

    Example
    -------
    >>> arrays = {}
    >>> to_tree({"w": np.zeros(2), "k": 3}, arrays)
    {'__dict__': {'w': {'__ndarray__': 'root.w'}, 'k': 3}}
    >>> sorted(arrays)
    ['root.w']
    """
    import torch  # local: torch is heavy and not needed for plain-numpy routers

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else {"__float__": repr(f)}
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, torch.Tensor):
        arr = obj.detach().cpu().numpy()
        arrays[path] = np.ascontiguousarray(arr)
        kind = "parameter" if isinstance(obj, torch.nn.Parameter) else "tensor"
        return {"__tensor__": path, "kind": kind, "requires_grad": bool(obj.requires_grad),
                "dtype": str(obj.dtype).replace("torch.", "")}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object or obj.dtype.kind in "US":
            return {"__strarray__": [None if v is None else str(v) for v in obj.ravel().tolist()],
                    "shape": list(obj.shape)}
        arrays[path] = np.ascontiguousarray(obj)
        return {"__ndarray__": path}
    if isinstance(obj, (torch.dtype, torch.device)):
        return {"__torchattr__": str(obj)}
    if isinstance(obj, type):
        name = f"{obj.__module__}:{obj.__qualname__}"
        if obj in _PLAIN_TYPES.values():
            name = next(k for k, v in _PLAIN_TYPES.items() if v is obj)
        return {"__type__": name}
    if isinstance(obj, (set, frozenset)):
        return {"__set__": [to_tree(v, arrays, f"{path}.{i}") for i, v in enumerate(sorted(obj, key=repr))],
                "frozen": isinstance(obj, frozenset)}
    if isinstance(obj, (list, tuple)):
        items = [to_tree(v, arrays, f"{path}.{i}") for i, v in enumerate(obj)]
        return items if isinstance(obj, list) else {"__tuple__": items}
    if isinstance(obj, dict):
        keys = list(obj.keys())
        if all(isinstance(k, str) for k in keys):
            enc = {k: to_tree(v, arrays, f"{path}.{k}") for k, v in obj.items()}
            return {"__odict__": enc} if isinstance(obj, OrderedDict) else {"__dict__": enc}
        return {"__items__": [[to_tree(k, arrays, f"{path}.k{i}"), to_tree(v, arrays, f"{path}.v{i}")]
                              for i, (k, v) in enumerate(obj.items())]}
    if isinstance(obj, np.random.Generator):
        return {"__generator__": obj.bit_generator.state}
    if isinstance(obj, np.random.RandomState):
        st = obj.get_state()
        arrays[path] = st[1]
        return {"__randomstate__": path, "rest": [st[0], int(st[2]), int(st[3]), float(st[4])]}
    if isinstance(obj, np.dtype):
        return {"__dtype__": obj.str}
    import pandas as pd
    if isinstance(obj, pd.DataFrame):
        cols = {str(c): to_tree(obj[c].to_numpy(), arrays, f"{path}.{c}") for c in obj.columns}
        return {"__dataframe__": cols, "columns": [str(c) for c in obj.columns]}
    if isinstance(obj, pd.Index):
        return {"__index__": to_tree(obj.to_numpy(), arrays, path)}
    from scipy import sparse
    if sparse.issparse(obj):
        csr = sparse.csr_matrix(obj)
        return {"__csr__": [to_tree(csr.data, arrays, path + ".data"),
                            to_tree(csr.indices, arrays, path + ".indices"),
                            to_tree(csr.indptr, arrays, path + ".indptr")], "shape": list(csr.shape)}
    qn = _qualname(obj)
    if hasattr(obj, "__dict__") and _allowed(qn):
        skip = set(getattr(type(obj), "_transient_attrs_", ()))
        state = {k: v for k, v in vars(obj).items() if k not in skip}
        node = {"__object__": qn, "state": to_tree(state, arrays, path)}
        extra = getattr(obj, "_transient_state_", None)
        if callable(extra):
            node["transient"] = to_tree(extra(), arrays, path + ".__transient__")
        return node
    raise SerializationError(f"cannot serialise {qn} at {path}: not a plain value, array, or object of "
                             f"an allowed module ({', '.join(ALLOWED_MODULE_PREFIXES)})")


def _import(path: str):
    if not _allowed(path):
        raise SerializationError(f"artifact names class {path!r}, outside the allowed modules "
                                 f"{ALLOWED_MODULE_PREFIXES}; refusing to load it")
    mod, _, qual = path.partition(":")
    obj = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def from_tree(tree, arrays):
    """Decode a tree made by :func:`to_tree`; ``arrays`` maps names to arrays."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [from_tree(v, arrays) for v in tree]
    if not isinstance(tree, dict) or len(tree) == 0:
        raise SerializationError(f"malformed artifact node: {str(tree)[:80]}")
    if "__ndarray__" in tree:
        return _array(arrays, tree["__ndarray__"])
    if "__tensor__" in tree:
        import torch
        t = torch.from_numpy(np.array(_array(arrays, tree["__tensor__"])))
        if tree.get("kind") == "parameter":
            return torch.nn.Parameter(t, requires_grad=tree.get("requires_grad", True))
        return t.requires_grad_(tree.get("requires_grad", False)) if t.is_floating_point() else t
    if "__strarray__" in tree:
        return np.array(tree["__strarray__"], dtype=object).reshape(tree["shape"])
    if "__float__" in tree:
        return float(tree["__float__"])
    if "__tuple__" in tree:
        return tuple(from_tree(v, arrays) for v in tree["__tuple__"])
    if "__set__" in tree:
        items = [from_tree(v, arrays) for v in tree["__set__"]]
        return frozenset(items) if tree.get("frozen") else set(items)
    if "__dict__" in tree:
        return {k: from_tree(v, arrays) for k, v in tree["__dict__"].items()}
    if "__odict__" in tree:
        return OrderedDict((k, from_tree(v, arrays)) for k, v in tree["__odict__"].items())
    if "__items__" in tree:
        return {from_tree(k, arrays): from_tree(v, arrays) for k, v in tree["__items__"]}
    if "__generator__" in tree:
        st = tree["__generator__"]
        bitgen = getattr(np.random, st["bit_generator"])()
        bitgen.state = st
        return np.random.Generator(bitgen)
    if "__randomstate__" in tree:
        rs = np.random.RandomState()
        r = tree["rest"]
        rs.set_state((r[0], _array(arrays, tree["__randomstate__"]), r[1], r[2], r[3]))
        return rs
    if "__dtype__" in tree:
        return np.dtype(tree["__dtype__"])
    if "__torchattr__" in tree:
        import torch
        s = tree["__torchattr__"]
        return getattr(torch, s.replace("torch.", "")) if s.startswith("torch.") else torch.device(s)
    if "__type__" in tree:
        mod, _, qual = tree["__type__"].partition(":")
        if mod == "numpy" and isinstance(getattr(np, qual, None), type) \
                and issubclass(getattr(np, qual), np.generic):
            return getattr(np, qual)  # numpy scalar types (e.g. a vectoriser's dtype=np.float64)
        return _import(tree["__type__"])
    if "__dataframe__" in tree:
        import pandas as pd
        cols = {c: from_tree(tree["__dataframe__"][c], arrays) for c in tree["columns"]}
        return pd.DataFrame(cols, columns=tree["columns"])
    if "__index__" in tree:
        import pandas as pd
        return pd.Index(from_tree(tree["__index__"], arrays))
    if "__csr__" in tree:
        from scipy import sparse
        data, ind, ptr = (from_tree(v, arrays) for v in tree["__csr__"])
        return sparse.csr_matrix((data, ind, ptr), shape=tuple(tree["shape"]))
    if "__object__" in tree:
        cls = _import(tree["__object__"])
        obj = cls.__new__(cls)
        obj.__dict__.update(from_tree(tree["state"], arrays))
        restore = getattr(obj, "_restore_transient", None)
        if "transient" in tree:
            if not callable(restore):
                raise SerializationError(f"{tree['__object__']} stored transient state but has no "
                                         "_restore_transient(state) to rebuild it")
            restore(from_tree(tree["transient"], arrays))
        elif callable(restore):
            restore()
        return obj
    raise SerializationError(f"malformed artifact node with keys {sorted(tree)[:5]}")


def _array(arrays, name: str) -> np.ndarray:
    if name not in arrays:
        raise SerializationError(f"artifact is missing array {name!r} (incomplete weights file)")
    return arrays[name]
