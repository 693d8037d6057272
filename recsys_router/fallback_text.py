"""The safe fallback's decisions in words: one line per comparison (``why``) and one line per
fitted router for reports (:func:`fallback_summary`).

Used by :mod:`recsys_router.fallback`; pure functions of the recorded ``fallback_`` dict.
"""

from __future__ import annotations

__all__ = ["se_text", "diff_text", "why", "fallback_summary"]


def se_text(se) -> str:
    """A standard error in words: 4 decimals, or "n/a" when there is none (one query)."""
    return "n/a" if se is None else f"{se:.4f}"


def diff_text(m: dict) -> str:
    return f"router - {m['baseline']} = {m['diff']:+.4f} (SE {se_text(m.get('se'))}, n {m['n']})"


def why(m: dict, z: float, where: str, z_keep: float | None = None) -> str:
    """Why a paired comparison ended as it did, in words (``z_keep``: the fall-back test's
    standard errors when they differ from ``z``)."""
    zk = z if z_keep is None else z_keep
    if m["router_better"]:
        how = f"the router beats {m['baseline']} by more than {z:g} SE"
    elif m["decision"] != "router":
        how = (f"{m['baseline']} beats the router by more than {zk:g} SE" if zk > 0 else
               f"the router does not beat {m['baseline']} on the mean" if zk == 0 else
               f"the router does not lead {m['baseline']} by {-zk:g} SE")
    elif zk > 0:
        how = f"within {zk:g} SE: the router is kept"
    elif zk == 0:
        how = f"the router is at least as good as {m['baseline']} on the mean: kept"
    else:
        how = f"the router leads {m['baseline']} by at least {-zk:g} SE: kept"
    return f"on {where}, {diff_text(m)}: {how}"


def fallback_summary(fallback: dict) -> str:
    """One line for reports, e.g. ``fell back on 2 of 5 tasks (task-best: a, b); ...``."""
    if not fallback.get("enabled", False):
        return "fallback off"
    if "skipped" in fallback:
        return f"fallback skipped: {fallback['skipped']}"
    tasks, means = fallback["tasks"], fallback.get("means", {})
    by = {}
    for t, d in tasks.items():
        if d != "router":
            by.setdefault(d, []).append(t)
    parts = [f"{k}: {', '.join(v[:6])}{' ...' if len(v) > 6 else ''}" for k, v in sorted(by.items())]
    head = (f"fell back on {sum(len(v) for v in by.values())} of {len(tasks)} tasks"
            + (f" ({'; '.join(parts)})" if parts else ""))
    o = fallback.get("overall") or {}
    nv = o.get("nauc") or {}
    if nv:
        head += (f"; all-queries verdict {fallback['default']} by nAUC (all {nv['n']} held-out "
                 f"queries: router {nv['router']:.4f} - {o['baseline']} {nv['baseline']:.4f} = "
                 f"{nv['diff']:+.4f}, bootstrap SE {se_text(nv.get('se'))}; by mu_o it would be "
                 f"{o.get('mu_o_decision')})")
    elif "diff" in o:
        head += (f"; all-queries verdict {fallback['default']} (all {o['n']} held-out queries: "
                 f"router - {o['baseline']} = {o['diff']:+.4f}, SE {se_text(o.get('se'))})")
    departs = [f"{t} -> {tasks[t]} ({m.get('nauc', m)['diff']:+.4f}, "
               f"SE {se_text(m.get('nauc', m).get('se'))})"
               for t, m in sorted(means.items()) if m.get("departs") and t in tasks]
    if departs:
        head += (f"; {len(departs)} task(s) depart from it on their own evidence: "
                 f"{', '.join(departs[:6])}{' ...' if len(departs) > 6 else ''}")
    pooled = sum(1 for m in means.values() if m.get("pooled"))
    if pooled:
        head += (f"; {pooled} task(s) with < {fallback.get('min_task_queries')} held-out "
                 "queries follow the all-queries verdict")
    head += f"; other queries: {fallback['default']}"
    if "top" in fallback:
        c = fallback.get("top_check") or {}
        what = ("the router's" if fallback["top"] == "router"
                else f"{fallback['top']}'s LLM, raised above the router's predictions")
        head += f"; top choice on the router's queries: {what}"
        if "diff" in c:
            head += (f" (router - {c['baseline']} = {c['diff']:+.4f}, SE {se_text(c.get('se'))}, "
                     f"n {c['n']})")
    return head
