"""Declared state of the LLM pool bookkeeping every router carries (item cold start).

``llm_names_`` (the pool), ``mean_costs_`` (per fitted column), ``llm_prices_`` (per pool
LLM), ``core_llms_`` (the fitted columns, once the pool changed on a router without a
native ``add_llm``), ``llm_info_`` (provenance of onboarded LLMs) and ``probe_llms_`` (the
kNN probe head of each LLM added to such a router: its probe scores and unit embeddings
as arrays ``probe_llms_/<i>/scores``, ``probe_llms_/<i>/emb`` and, for weighted probes,
``probe_llms_/<i>/weights``, its mean score and cost as JSON).

Shape symbols: ``n_pool`` is the pool size, ``n_llms`` the number of fitted columns
(``core_llms_`` when set, else the pool).

Example
-------
>>> spec = pool_spec()
>>> sorted(spec)[:3]
['core_llms_', 'llm_info_', 'llm_names_']
"""

from __future__ import annotations

import numpy as np

from . import (BOOL, FLOAT, INT, JSON_ANY, STR, Arr, DictOf, ListOf, Opt, Part,
                     StateError, check_state, check_value)

__all__ = ["pool_spec", "pool_dims", "heads_state", "heads_from_state"]

_MAX_LLMS = 100_000
_HEAD = {"index": INT, "mean": FLOAT, "cost": Opt(FLOAT), "has_emb": BOOL,
         "has_weights": BOOL}


def pool_spec() -> dict:
    """The declared pool pieces (see the module docstring)."""
    return {"llm_names_": ListOf(STR, max_len=_MAX_LLMS),
            "mean_costs_": Arr("float64", ("n_llms",), optional=True, missing=True),
            "llm_prices_": Arr("float64", ("n_pool",), optional=True, missing=True),
            "core_llms_": Opt(ListOf(STR, max_len=_MAX_LLMS)),
            "llm_info_": Opt(DictOf(DictOf(JSON_ANY, 100), _MAX_LLMS)),
            "probe_llms_": Part(optional=True)}


def _distinct(names, where: str) -> list[str]:
    names = check_value(ListOf(STR, max_len=_MAX_LLMS), names, where)
    if not names or len(set(names)) != len(names):
        raise StateError(f"{where}: LLM names must be distinct and non-empty")
    return names


def pool_dims(fields: dict, where: str) -> dict:
    """``{"n_pool", "n_llms"}`` from a state's ``llm_names_`` and ``core_llms_`` (checked)."""
    if not isinstance(fields, dict):
        raise StateError(f"{where}: state must be an object")
    names = _distinct(fields.get("llm_names_"), f"{where}: llm_names_")
    core = fields.get("core_llms_")
    if core is not None:
        core = _distinct(core, f"{where}: core_llms_")
    return {"n_pool": len(names), "n_llms": len(core) if core is not None else len(names)}


def heads_state(router) -> tuple[dict, dict]:
    """``(JSON, arrays)`` of the router's probe heads (``probe_llms_``)."""
    info, arrays = {}, {}
    for i, (name, head) in enumerate((getattr(router, "probe_llms_", None) or {}).items()):
        cost = head.get("cost")
        info[name] = {"index": i, "mean": float(head["mean"]), "has_emb": "emb" in head,
                      "has_weights": "weights" in head,
                      "cost": None if cost is None or not np.isfinite(cost) else float(cost)}
        arrays[f"probe_llms_/{i}/scores"] = np.asarray(head["scores"], np.float64)
        if "weights" in head:
            arrays[f"probe_llms_/{i}/weights"] = np.asarray(head["weights"], np.float64)
        if "emb" in head:
            arrays[f"probe_llms_/{i}/emb"] = np.asarray(head["emb"], np.float64)
    return info, arrays


def heads_from_state(router, info, arrays: dict, where: str) -> dict:
    """The probe heads stored by :func:`heads_state`, validated (names in the pool and not
    fitted columns, one scores array and optional embeddings per head)."""
    if info is None:
        info = {}
    if not isinstance(info, dict):
        raise StateError(f"{where}: probe_llms_ must be an object")
    mine = {k: (v.dtype, v.shape) for k, v in arrays.items() if k.startswith("probe_llms_/")}
    core = set(router.core_llms_ or router.llm_names_) if router.core_llms_ else set()
    heads, claimed = {}, set()
    for name, h in info.items():
        if isinstance(h, dict) and "has_weights" not in h:  # artifacts from before probe weights
            h = {**h, "has_weights": False}
        v = check_state(_HEAD, h, {}, {}, f"probe_llms_.{name}.")
        if name not in router.llm_names_ or name in core:
            raise StateError(f"{where}: probe head {name!r} is not an added LLM of the pool")
        spec = {"scores": Arr("float64", ("n",)),
                "emb": Arr("float64", ("n", "d"), optional=not v["has_emb"]),
                "weights": Arr("float64", ("n",), optional=not v["has_weights"])}
        prefix = f"probe_llms_/{v['index']}/"
        check_state(spec, {}, {k: s for k, s in mine.items() if k.startswith(prefix)}, {}, prefix)
        head = {"scores": arrays[prefix + "scores"], "mean": v["mean"],
                "cost": np.nan if v["cost"] is None else v["cost"]}
        if v["has_emb"]:
            head["emb"] = arrays[prefix + "emb"]
        if v["has_weights"]:
            w = arrays[prefix + "weights"]
            if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
                raise StateError(f"{where}: probe head {name!r} has weights that are not finite "
                                 "numbers >= 0 with a positive sum")
            head["weights"] = w
        claimed.update(k for k in mine if k.startswith(prefix))
        heads[name] = head
    if set(mine) - claimed:
        raise StateError(f"{where}: arrays {sorted(set(mine) - claimed)[:3]} belong to no probe head")
    return heads
