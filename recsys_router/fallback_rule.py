"""The safe fallback's rule applied to held-out realised scores: the all-queries verdict, each
task's departure from it, and the check of a kept router's top choice.

Used by :class:`~recsys_router.fallback.SafeFallbackRouter` (whose module docstring states
the rule in words); pure functions of the per-query realised scores of the three choices
(``got``: ``"router"``, ``"best-single"``, ``"task-best"``, one array each, aligned with
``keys``, the queries' task labels, ``""`` for none). Every comparison is
:func:`~recsys_router.inner_validation.paired_decision`; its reason in words comes from
:mod:`recsys_router.fallback_text`.

Example
-------
Six held-out queries of one task where the router leads both baselines by 0.5 on every
query (difference with no spread, so its SE is 0 and the router is kept at any ``z``):

>>> import numpy as np
>>> got = {"router": np.full(6, 1.0), "best-single": np.full(6, 0.5),
...        "task-best": np.full(6, 0.5)}
>>> fb = decide_all(got, np.array(["a"] * 6, dtype=object), 6, z=1.645, min_task_queries=30,
...                 verdict_z=-1.0)
>>> fb["default"], fb["tasks"], fb["means"]["a"]["pooled"]
('router', {'a': 'router'}, True)
"""

from __future__ import annotations

import numpy as np

from .fallback_text import diff_text, why
from .inner_validation import group_rows, paired_decision

__all__ = ["decide_all", "decide_top"]


def decide_all(got: dict, keys: np.ndarray, n_val: int, z: float, min_task_queries: int,
               verdict_z: float, n_folds: int = 1) -> dict:
    """The verdict over all held-out queries and every task's decision.

    Parameters
    ----------
    got : dict
        Realised scores per query of ``"router"``, ``"best-single"`` and ``"task-best"``.
    keys : ndarray
        Each query's task label (``""``: none; such queries count only in the verdict).
    n_val : int
        Held-out queries (recorded).
    z : float
        Standard errors of the task departures and of the baseline choice.
    min_task_queries : int
        Held-out queries a task needs to be decided on its own (smaller ones follow the
        verdict).
    verdict_z : float
        Standard errors by which the baseline must beat the router on all queries for the
        verdict to fall back (negative: the router must lead by that many).
    n_folds : int
        Inner folds the scores come from (recorded).

    Returns
    -------
    dict
        The ``fallback_`` record: ``enabled``, ``tasks``, ``default``, ``means``,
        ``overall``, ``n_val``, ``z``, ``verdict_z``, ``min_task_queries``, ``inner_folds``.
    """
    z, n_min, vz = float(z), int(min_task_queries), float(verdict_z)
    overall = paired_decision(got["router"], got["best-single"], got["task-best"], z,
                              z_keep=vz)
    default = "router" if overall is None else overall["decision"]
    if overall is not None:
        overall["why"] = why(overall, z, "all held-out queries", vz)
    prefer = "best-single" if overall is None else overall["baseline"]
    means, tasks = {}, {}
    for t, rows in zip(*group_rows(keys)):
        if t == "":
            continue
        m = paired_decision(got["router"][rows], got["best-single"][rows],
                            got["task-best"][rows], z, prefer=prefer)
        if m is None:
            continue
        m["pooled"] = m["n"] < n_min
        m["own_decision"], m["departs"] = m["decision"], False
        if m["pooled"]:
            m["why"] = (f"{m['n']} < {n_min} held-out queries: follows the all-queries "
                        f"verdict ({default})")
        elif (m["decision"] != "router") if default == "router" else m["router_better"]:
            # significant evidence of its own against the verdict, either way
            m["departs"], m["why"] = True, why(m, z, "its own held-out queries")
        else:
            m["why"] = (f"no significant evidence of its own against the all-queries "
                        f"verdict ({default}): {diff_text(m)}")
        m["decision"] = m["own_decision"] if m["departs"] else default
        if m["decision"] != "router" and not m["pooled"]:
            m["decision"] = m["baseline"]      # the better of the two on its own queries
        means[t], tasks[t] = m, m["decision"]
    return {"enabled": True, "tasks": tasks, "default": default, "means": means,
            "overall": overall or {}, "n_val": int(n_val), "z": z, "verdict_z": vz,
            "min_task_queries": n_min, "inner_folds": int(n_folds)}


def decide_top(fb: dict, got: dict, keys: np.ndarray, z: float, top_z: float | None) -> None:
    """Check the router's top choice on the held-out queries it keeps, in place.

    Compares the router with the better baseline (the verdict's, else best-single) on the
    queries that ``fb`` (a :func:`decide_all` record) leaves with the router, keeping the
    router only as ``top_z`` allows (the sign convention of ``verdict_z``). Sets
    ``fb["top"]`` (``"router"`` or the baseline whose LLM goes on top), ``fb["top_check"]``
    (the comparison, with ``why``) and ``fb["top_z"]``; nothing when ``top_z`` is None or
    no such query was held out.
    """
    if top_z is None:
        return
    kept = np.array([fb["tasks"].get(t, fb["default"]) for t in keys], dtype=object) == "router"
    prefer = (fb.get("overall") or {}).get("baseline", "best-single")
    m = paired_decision(got["router"][kept], got["best-single"][kept],
                        got["task-best"][kept], float(z), prefer=prefer, z_keep=top_z)
    if m is None:
        return
    m["why"] = why(m, float(z), "the held-out queries the router keeps (its top choice)", top_z)
    fb["top"], fb["top_check"], fb["top_z"] = m["decision"], m, float(top_z)
