"""Per-protocol metric handlers: one :class:`Block` of decisions in, metric and curve rows out.

Each handler only calls functions of :mod:`recsys_router.metrics` on the true score/cost
matrices and the chosen columns stored in the decisions (see
:func:`~recsys_router.evaluation.recompute.split_block`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..metrics import orbit as ob
from ..metrics import routellm as rl
from ..metrics import routerbench as rb
from ..metrics.base import best_single
from ..metrics.routereval import REFERENCE_SCORES, mu_o, oracle_mean, routereval_metrics

__all__ = ["Block", "HANDLERS", "LLM_HULL", "reference_benchmark"]

#: router label of RouterBench's Zero router drawn from the LLMs' own points
LLM_HULL = "zero (LLM hull)"


class Block(NamedTuple):
    """Decisions of one (dataset, protocol, pool, group, fold), as matrices."""
    scores: np.ndarray
    costs: np.ndarray | None
    llms: list[str]
    roles: dict
    runs: dict


def _m(router, metric, value):
    return {"router": router, "metric": metric, "value": float(value)}


def _c(router, curve, setting, value, x, y):
    return {"router": router, "curve": curve, "setting": setting, "setting_value": float(value),
            "x": float(x), "y": float(y)}


def _point(b: Block, ch: np.ndarray) -> tuple[float, float]:
    """(mean true cost, mean true score) of one operating point."""
    return mu_o(b.costs, ch), mu_o(b.scores, ch)


def reference_benchmark(dataset: str) -> str | None:
    """RouterEval benchmark of a dataset named ``routereval-<benchmark>-...`` (for V_R).

    Example
    -------
    >>> reference_benchmark("routereval-gsm8k-easy-5-all_strong"), reference_benchmark("x")
    ('gsm8k', None)
    """
    parts = str(dataset).split("-")
    if len(parts) > 1 and parts[0] == "routereval":
        for k in range(len(parts), 1, -1):  # benchmark names may contain '-' (none do today)
            cand = "-".join(parts[1:k])
            if cand in REFERENCE_SCORES:
                return cand
    return None


def routereval(b: Block, dataset: str = "", reference: float | None = None):
    """mu_o, V_R (with a given reference score, or the paper's for RouterEval benchmarks),
    V_B, E_p, mean prob entropy, mean cost; single LLMs and the oracle bound."""
    S, ms = b.scores, []
    bench = None if reference is not None else reference_benchmark(dataset)
    if reference is not None:
        if not np.isfinite(reference) or reference <= 0:
            raise ValueError(f"reference score must be a positive number, got {reference!r}")
        ms.append(_m("LLM:reference", "reference_score", reference))
    n = S.shape[0]
    for j, name in enumerate(b.llms):
        ch = np.full(n, j)
        ms.append(_m("LLM:" + name, "mu_o", mu_o(S, ch)))
        if b.costs is not None:
            ms.append(_m("LLM:" + name, "mean_cost", mu_o(b.costs, ch)))
    ms.append(_m("LLM:best", "mu_o", best_single(S).quality))
    ms.append(_m("LLM:oracle-bound", "mu_o", oracle_mean(S)))
    for router, runs in b.runs.items():
        _, _, ch, ent = runs[0]
        r = routereval_metrics(S, ch, benchmark=bench, reference=reference)
        has_ref = bench is not None or reference is not None
        for key in ("mu_o", "v_r", "v_b", "e_p") if has_ref else ("mu_o", "v_b", "e_p"):
            ms.append(_m(router, key, r[key]))
        if np.isfinite(ent).all():
            ms.append(_m(router, "prob_entropy", ent.mean()))
        if b.costs is not None:
            ms.append(_m(router, "mean_cost", mu_o(b.costs, ch)))
    return ms, []


def routerbench(b: Block, dataset: str = ""):
    """Per-lambda points, NDCH and AIQ on the domain shared by all routers of the block."""
    ms, cs, hulls = [], [], {}
    for router, runs in b.runs.items():
        pts = np.array([_point(b, ch) for _, _, ch, _ in runs])
        for (setting, value, _, _), (x, y) in zip(runs, pts):
            cs.append(_c(router, "points", setting, value, x, y))
        hulls[router] = rb.ndch(pts)
    lp = rb.llm_points(b.scores, b.costs)
    for name, (x, y) in zip(b.llms, lp):
        cs.append(_c("LLM:" + name, "points", "single", np.nan, x, y))
    hulls[LLM_HULL] = rb.zero_router(b.scores, b.costs)
    domain = rb.shared_domain(list(hulls.values()))
    for router, h in hulls.items():
        for k, (x, y) in enumerate(h):
            cs.append(_c(router, "ndch", "vertex", k, x, y))
        ms.append(_m(router, "aiq", rb.aiq(h, domain)))
        ms.append(_m(router, "max_quality", h[:, 1].max()))
        ms.append(_m(router, "cost_at_max_quality", h[-1, 0]))
    for router in hulls:
        ms.append(_m(router, "aiq_domain_min", domain[0]))
        ms.append(_m(router, "aiq_domain_max", domain[1]))
    return ms, cs


def orbit(b: Block, dataset: str = ""):
    """ORBIT's curve, Pareto front, nAUC (code and paper), Peak, QNC/rQNC, RCI (both)."""
    ms, cs = [], []
    bs = best_single(b.scores, b.costs)
    for router, runs in b.runs.items():
        pts = np.array([_point(b, ch) for _, _, ch, _ in runs])
        for (setting, value, _, _), (x, y) in zip(runs, pts):
            cs.append(_c(router, "budget", setting, value, x, y))
        front = ob.pareto_front(pts[:, 0], pts[:, 1])
        for k, (x, y) in enumerate(front):
            cs.append(_c(router, "pareto", "vertex", k, x, y))
        last_q = pts[-1, 1]
        code_pts = np.vstack([front, [[bs.cost, last_q]]])
        q_code, q_front = ob.qnc(code_pts, bs.quality, bs.cost), ob.qnc(front, bs.quality, bs.cost)
        last_ch = runs[-1][2]
        vals = {"nauc": ob.nauc_code(front, bs.cost, last_q), "nauc_paper": ob.nauc_paper(front),
                "peak": ob.peak_score(code_pts[:, 1]), "qnc": q_code.qnc, "rqnc": q_code.rqnc,
                "qnc_front": q_front.qnc, "rqnc_front": q_front.rqnc,
                "rci": ob.rci(b.scores, b.costs, last_ch, variant="orbit_code"),
                "rci_per_query": ob.rci(b.scores, b.costs, last_ch, variant="per_query"),
                "quality_at_max_budget": last_q, "cost_at_max_budget": pts[-1, 0],
                "best_single_quality": bs.quality, "best_single_cost": bs.cost}
        ms += [_m(router, k, v) for k, v in vals.items()]
    return ms, cs


def routellm(b: Block, dataset: str = ""):
    """Quality vs share of strong calls, APGR, CPT(50 %), CPT(80 %) on the strong/weak pair."""
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
            cs.append(_c(router, "strong_share", setting, value, x, y))
        ms.append(_m(router, "apgr", rl.apgr(frac, qual, wq, sq)))
        ms.append(_m(router, "cpt50", rl.cpt(frac, qual, wq, sq, 0.5)))
        ms.append(_m(router, "cpt80", rl.cpt(frac, qual, wq, sq, 0.8)))
    ms.append(_m("LLM:" + strong, "mu_o", sq))
    ms.append(_m("LLM:" + weak, "mu_o", wq))
    return ms, cs


HANDLERS = {"routereval": routereval, "routerbench": routerbench, "orbit": orbit,
            "routellm": routellm}
