"""RouteLLM protocol: a strong/weak LLM pair, a threshold sweep on the predicted win score,
APGR and CPT(50 %), CPT(80 %).

Reference: Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data",
arXiv:2406.18665.
"""

from __future__ import annotations

import numpy as np

from ...metrics import routellm as rl
from ...metrics.routereval import mu_o
from ..figures import first_block, router_curves
from ..tables import pool_section
from ._base import Protocol, Sweep, curve_row, metric_row, register_protocol

__all__ = ["ROUTELLM", "threshold_settings", "routellm_pair"]

_TABLE = (("apgr", "APGR"), ("cpt50", "CPT(50%)"), ("cpt80", "CPT(80%)"))


def threshold_settings(scores, strong: int, weak: int, n: int = 10):
    """RouteLLM's threshold sweep on the win score ``P_hat[strong] - P_hat[weak]``.

    Thresholds are the ``n + 1`` quantile edges of the win scores (RouteLLM's bins, repeated
    edges kept once since they give the same decisions and add no area); a
    query goes to the strong LLM when its win score is ``>= threshold``, except at the
    last edge where RouteLLM uses ``>``: that edge is stored as the next float above it,
    so ``>=`` holds for every stored value and the sweep ends at 0 % strong calls.

    Example
    -------
    >>> s = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    >>> [ch.tolist() for t, ch in threshold_settings(s, 0, 1, n=2)[1]]
    [[0, 0, 0], [0, 0, 1], [1, 1, 1]]
    """
    s = np.asarray(scores, dtype=np.float64)
    win = np.nan_to_num(s[:, strong] - s[:, weak], nan=0.0)
    grid = np.quantile(win, np.linspace(0.0, 1.0, n + 1))
    grid[-1] = np.nextafter(grid[-1], np.inf)
    grid = np.unique(grid)  # repeated edges (tied scores) give identical decisions
    return "threshold", [(float(t), np.where(win >= t, strong, weak)) for t in grid]


def routellm_pair(train, names: list[str], pair, notes: list[str],
                  where: str) -> tuple[str, str] | None:
    """The (strong, weak) pair of a pool, or None (with a note saying why) to skip the pool.

    The given ``pair`` when there is one. Otherwise the strong LLM is the best train mean
    (the first of tied ones) and the weak one is, among the *other* LLMs, the cheapest by
    mean train cost; where no other LLM has a known train cost (data without costs, or
    costs only for the strong LLM) it is the second-best train mean (the best of the other
    LLMs). In a pool of 2 LLMs the weak one is the other LLM. The weak LLM is never the
    strong one: a pool of fewer than 2 LLMs, one where no LLM has an observed train score,
    and one of 3 or more where no other LLM has a known train cost or an observed train
    score are skipped with a note (``--routellm-pair`` names a pair).

    Example
    -------
    >>> from recsys_router.data import RoutingData
    >>> d = RoutingData(["q"], ["a", "b", "c"], [[0.9, 0.5, 0.7]], [[3.0, float("nan"), None]])
    >>> notes = []
    >>> routellm_pair(d, d.llm_names, None, notes, "x")
    ('a', 'c')
    >>> notes[0].split("weak=")[-1]
    'c (second-best train mean: no other LLM has a known train cost)'
    """
    if pair is not None:
        strong, weak = pair
        missing = [x for x in (strong, weak) if x not in names]
        if missing:
            notes.append(f"routellm {where}: given pair LLM(s) {missing} not in this pool; skipped")
            return None
        return strong, weak
    if len(names) < 2:
        notes.append(f"routellm {where}: needs at least 2 LLMs; skipped")
        return None
    sub = train.subset(llms=names)
    mean = sub.llm_summary()["mean_score"].to_numpy(dtype=np.float64)
    if not np.isfinite(mean).any():
        notes.append(f"routellm {where}: no LLM of the pool {names} has an observed score in "
                     f"the training data {train.name!r}, so there is no strong LLM; skipped")
        return None
    js = int(np.argmax(np.nan_to_num(mean, nan=-np.inf)))  # the first of tied best means
    strong = names[js]
    if len(names) == 2:
        return strong, names[1 - js]
    other = np.arange(len(names)) != js
    mc = np.asarray(sub.mean_costs(), dtype=np.float64)
    if (other & np.isfinite(mc)).any():
        weak = names[int(np.argmin(np.where(other & np.isfinite(mc), mc, np.inf)))]
        why = "cheapest other LLM by mean train cost"
    elif (other & np.isfinite(mean)).any():
        weak = names[int(np.argmax(np.where(other & np.isfinite(mean), mean, -np.inf)))]
        why = ("second-best train mean: no costs" if train.costs is None else
               "second-best train mean: no other LLM has a known train cost")
    else:
        notes.append(f"routellm {where}: no LLM of the pool other than the strong one ({strong}) "
                     f"has a known train cost or an observed train score in {train.name!r}, so "
                     "there is no weak LLM to choose; skipped (--routellm-pair names one)")
        return None
    notes.append(f"routellm {where}: the pool has {len(names)} LLMs; evaluated the pair strong="
                 f"{strong} (best train mean) vs weak={weak} ({why})")
    return strong, weak


def _references(view):
    pair = routellm_pair(view.train, view.names, view.config.routellm_pair, view.notes,
                         f"pool {view.pool}/{view.group}")
    if pair is None:
        return None
    return [(view.names.index(pair[0]), "strong"), (view.names.index(pair[1]), "weak")]


def _sweep(pred, view) -> Sweep:
    strong, weak = (j for j, _ in view.refs)
    return Sweep(*threshold_settings(pred.scores, strong, weak, view.config.n_thresholds))


def _metrics(b, ctx):
    """Quality vs share of strong calls, APGR, CPT(50 %), CPT(80 %) on the strong/weak pair.

    The pair is chosen by training means; where the "strong" LLM does not beat the weak one
    on these test queries, APGR and CPT are undefined (every router would reach the CPT
    target with the weak LLM alone): each router's APGR is NaN and its CPT rows are left out
    (the tables show ``-``, :func:`_pair_notes` says why, and means over folds or pool
    groups use the others), while the curve and both LLMs' mu_o are kept."""
    ms, cs = [], []
    strong = next(n for n, r in b.roles.items() if r == "strong")
    weak = next(n for n, r in b.roles.items() if r == "weak")
    js, jw = b.llms.index(strong), b.llms.index(weak)
    n = b.scores.shape[0]
    sq, wq = mu_o(b.scores, np.full(n, js)), mu_o(b.scores, np.full(n, jw))
    for router, runs in b.runs.items():
        frac = np.array([float(np.mean(ch == js)) for _, _, ch, _ in runs])
        qual = np.array([mu_o(b.scores, ch) for _, _, ch, _ in runs])
        for (setting, value, _, _), x, y in zip(runs, frac, qual):
            cs.append(curve_row(router, "strong_share", setting, value, x, y))
        if sq > wq:  # RouteLLM's premise; on an inverted pair APGR and CPT are undefined
            ms.append(metric_row(router, "apgr", rl.apgr(frac, qual, wq, sq)))
            ms.append(metric_row(router, "cpt50", rl.cpt(frac, qual, wq, sq, 0.5)))
            ms.append(metric_row(router, "cpt80", rl.cpt(frac, qual, wq, sq, 0.8)))
        else:  # NaN, not "never reached" (a NaN CPT): the router's row shows "-"
            ms.append(metric_row(router, "apgr", np.nan))
    ms.append(metric_row("LLM:" + strong, "mu_o", sq))
    ms.append(metric_row("LLM:" + weak, "mu_o", wq))
    return ms, cs


def _pair_notes(view, scores) -> list[str]:
    """Why APGR and CPT are undefined on a pool's test queries: the strong LLM of the pair
    does not score above the weak one there (mean true scores ``scores``, as in
    :func:`_metrics`).

    Example
    -------
    >>> from ._base import PoolView
    >>> v = PoolView("all", "all", ["a", "b"], None, None, [], refs=[(0, "strong"), (1, "weak")])
    >>> _pair_notes(v, np.array([[0.0, 1.0], [1.0, 1.0]]))  # doctest: +NORMALIZE_WHITESPACE
    ['strong LLM a does not beat weak LLM b on the test queries (mean score 0.5000 vs
      1.0000): APGR and CPT are undefined, shown as -']
    >>> _pair_notes(v, np.array([[1.0, 0.0]]))
    []
    """
    roles = {role: j for j, role in view.refs}
    n = scores.shape[0]
    sq, wq = (mu_o(scores, np.full(n, roles[r])) for r in ("strong", "weak"))
    if sq > wq:
        return []
    return [f"strong LLM {view.names[roles['strong']]} does not beat weak LLM "
            f"{view.names[roles['weak']]} on the test queries (mean score {sq:.4f} vs {wq:.4f}): "
            "APGR and CPT are undefined, shown as -"]


def _report(metrics, pool, timings=None):
    return pool_section(metrics, "routellm", pool, _TABLE, "RouteLLM (strong/weak threshold sweep)")


def _threshold_plot(result, path) -> bool:
    """Mean quality against the share of calls to the strong LLM, one line per router."""
    sub = first_block(result.curves[result.curves["protocol"] == "routellm"])
    return router_curves(sub, path, sort_by="x", x_factor=100.0, figsize=(7, 5),
                         xlabel="% calls to the strong LLM", title="RouteLLM threshold sweep",
                         simulated=result.simulated)


ROUTELLM = register_protocol(Protocol(
    "routellm", sweep=_sweep, metrics=_metrics, rank=40, references=_references,
    leaderboard=(("apgr", "APGR"), ("cpt50", "CPT(50%)")), report=_report,
    plots=(("routellm_threshold.png", _threshold_plot),), test_notes=_pair_notes,
    description="strong/weak pair, threshold sweep; APGR, CPT (RouteLLM)"))
