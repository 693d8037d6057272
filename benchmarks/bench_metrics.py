"""Speed of the vectorised metrics against plain per-query Python loops.

Times, on simulated data of ``--queries`` queries x ``--llms`` LLMs (default 100k x 11):

1. ORBIT's budget sweep (100 budgets) + Pareto front + nAUC (code variant);
2. RouterBench's AIQ pipeline: willingness-to-pay sweep (100 lambdas) + NDCH + AIQ.

Each is also computed by a straightforward loop implementation written here (one query,
one LLM at a time). The loops are run on a random subsample of ``--loop-queries`` queries
(default 2,000); their time is extrapolated linearly to the full size (the loops are
linear in the number of queries) and the output says so. On that subsample both
implementations' results are asserted equal.

Usage: ``python benchmarks/bench_metrics.py --seed 0``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from recsys_router.cli.args import positive_int  # noqa: E402
from recsys_router.metrics import (aiq, budget_grid, budget_sweep, nauc_code,  # noqa: E402
                                   ndch, pareto_front, wtp_sweep)


def simulate(n: int, m: int, seed: int):
    """True scores/costs and noisy predictions; predicted costs vary per query."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.3, 0.9, m)
    price = np.geomspace(1e-4, 1e-2, m)
    length = rng.lognormal(0.0, 0.5, size=(n, 1))
    scores = (rng.random((n, m)) < skill).astype(np.float64)
    costs = price * length * rng.uniform(0.9, 1.1, size=(n, m))
    pred_scores = np.clip(skill + 0.3 * (scores - skill) + rng.normal(0, 0.2, (n, m)), 0, 1)
    pred_costs = price * rng.lognormal(0.0, 0.3, size=(n, m))
    return scores, costs, pred_scores, pred_costs


# ------------------------------------------------------------------ loop baselines
def loop_budget_curve(ps, pc, s, c, budgets):
    """Per budget, per query: best predicted score among LLMs that fit; cheapest if none."""
    n, m = len(s), len(s[0])
    costs, quals = [], []
    for b in budgets:
        tot_c = tot_s = 0.0
        for i in range(n):
            best, best_j = None, None
            for j in range(m):
                if pc[i][j] <= b:
                    better = best is None or ps[i][j] > best or \
                        (ps[i][j] == best and pc[i][j] < pc[i][best_j])
                    if better:
                        best, best_j = ps[i][j], j
            if best_j is None:
                best_j = min(range(m), key=lambda j: (pc[i][j], j))
            tot_c += c[i][best_j]
            tot_s += s[i][best_j]
        costs.append(tot_c / n)
        quals.append(tot_s / n)
    return costs, quals


def loop_front_nauc(costs, quals, best_cost):
    pts = sorted(zip(costs, quals), key=lambda p: p[0])
    front, top = [], -float("inf")
    for x, y in pts:
        if y > top:
            front.append((x, y))
            top = y
    allp = sorted(front + [(best_cost, quals[-1])], key=lambda p: p[0])
    mx = max(p[0] for p in allp)
    area = 0.0
    for (x0, y0), (x1, y1) in zip(allp, allp[1:]):
        area += (x1 / mx - x0 / mx) * (y0 + y1) / 2
    return area


def loop_wtp_points(ps, pc, s, c, lambdas):
    n, m = len(s), len(s[0])
    out = []
    for lam in lambdas:
        tot_c = tot_s = 0.0
        for i in range(n):
            best_j = 0
            for j in range(1, m):
                u, ub = lam * ps[i][j] - pc[i][j], lam * ps[i][best_j] - pc[i][best_j]
                if u > ub or (u == ub and pc[i][j] < pc[i][best_j]):
                    best_j = j
            tot_c += c[i][best_j]
            tot_s += s[i][best_j]
        out.append((tot_c / n, tot_s / n))
    return out


def loop_ndch(points):
    """O(k^2) definition check: a point is on the upper hull when no chord of two other
    points passes strictly above it; then the non-decreasing part."""
    best = {}
    for x, y in points:
        best[x] = max(y, best.get(x, -float("inf")))
    pts = sorted(best.items())
    hull = []
    for k, (x, y) in enumerate(pts):
        under = False
        for a in range(k):
            for b in range(k + 1, len(pts)):
                (xa, ya), (xb, yb) = pts[a], pts[b]
                if ya + (yb - ya) * (x - xa) / (xb - xa) >= y - 1e-12 * max(1.0, abs(y)):
                    under = True
        if not under:
            hull.append((x, y))
    top = max(range(len(hull)), key=lambda k: (hull[k][1], -k))
    return hull[:top + 1]


def loop_aiq(hull, lo, hi, steps=2000):
    """Fine trapezoid quadrature of the extended hull (approximates the exact integral)."""
    def val(x):
        if x < hull[0][0]:
            return hull[0][1] * x / hull[0][0]
        for (x0, y0), (x1, y1) in zip(hull, hull[1:]):
            if x0 <= x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return hull[-1][1]
    xs = [lo + (hi - lo) * k / steps for k in range(steps + 1)]
    knots = sorted(set(xs) | {p[0] for p in hull if lo < p[0] < hi})
    area = sum((b - a) * (val(a) + val(b)) / 2 for a, b in zip(knots, knots[1:]))
    return area / (hi - lo)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=positive_int, default=100_000)
    ap.add_argument("--llms", type=positive_int, default=11)
    ap.add_argument("--loop-queries", type=positive_int, default=2_000)
    args = ap.parse_args(argv)
    n, m, n_loop = args.queries, args.llms, min(args.loop_queries, args.queries)
    s, c, ps, pc = simulate(n, m, args.seed)
    sub = np.random.default_rng(args.seed + 1).choice(n, size=n_loop, replace=False)
    print(f"data: {n:,} queries x {m} LLMs (seed {args.seed}); loop baselines (plain Python over "
          f"lists) on {n_loop:,} random queries, time extrapolated x{n / n_loop:.0f} (linear in "
          f"queries)", flush=True)

    # ---- ORBIT: sweep + front + nAUC
    def orbit_vec(ps_, pc_, s_, c_, budgets):
        cv = budget_sweep(ps_, pc_, s_, c_, budgets)
        best = int(np.argmax(s_.mean(axis=0)))
        return cv, nauc_code(pareto_front(cv.costs, cv.qualities), c_[:, best].mean(), cv.qualities[-1])

    budgets = budget_grid(pc, 100)
    (cv, nauc), t_vec = timed(orbit_vec, ps, pc, s, c, budgets)
    (cv_s, nauc_s), t_vec_s = timed(orbit_vec, ps[sub], pc[sub], s[sub], c[sub], budgets)
    (lc, lq), t_loop = timed(loop_budget_curve, ps[sub].tolist(), pc[sub].tolist(), s[sub].tolist(), c[sub].tolist(),
                             budgets)
    best_s = int(np.argmax(s[sub].mean(axis=0)))
    l_nauc = loop_front_nauc(lc, lq, c[sub][:, best_s].mean())
    assert np.allclose(cv_s.costs, lc) and np.allclose(cv_s.qualities, lq), "ORBIT curves differ"
    assert np.isclose(nauc_s, l_nauc), f"nAUC differs: {nauc_s} vs {l_nauc}"
    t_loop_full = t_loop * n / n_loop
    print(f"ORBIT sweep ({budgets.size} budgets) + front + nAUC: vectorised {t_vec:.2f} s on {n:,} "
          f"(nAUC {nauc:.4f}); loop {t_loop:.2f} s on {n_loop:,} -> ~{t_loop_full:.0f} s on {n:,}; "
          f"speed-up x{t_loop_full / t_vec:.0f} (results equal on the subsample)")

    # ---- RouterBench: wtp sweep + NDCH + AIQ
    lambdas = np.concatenate([[0.0], np.geomspace(1e-5, 1.0, 99)])

    def rb_vec(ps_, pc_, s_, c_):
        hull = ndch(wtp_sweep(ps_, pc_, s_, c_, lambdas))
        return hull, aiq(hull, (hull[0, 0], hull[-1, 0]))

    (hull, a), t_vec = timed(rb_vec, ps, pc, s, c)
    (hull_s, a_s), _ = timed(rb_vec, ps[sub], pc[sub], s[sub], c[sub])

    sub_lists = [x[sub].tolist() for x in (ps, pc, s, c)]
    l_pts, t_loop_pts = timed(loop_wtp_points, *sub_lists, lambdas)
    (l_hull, l_a), t_loop_hull = timed(lambda p: (lambda h: (h, loop_aiq(h, h[0][0], h[-1][0])))(
        loop_ndch(p)), l_pts)
    assert np.allclose(hull_s, np.array(l_hull)), "NDCH differs"
    assert np.isclose(a_s, l_a, rtol=1e-6, atol=1e-9), f"AIQ differs: {a_s} vs {l_a}"
    # only the sweep grows with the number of queries; hull + AIQ work on the 100 points
    t_loop_full = t_loop_pts * n / n_loop + t_loop_hull
    print(f"RouterBench wtp sweep ({lambdas.size} lambdas) + NDCH + AIQ: vectorised {t_vec:.2f} s on "
          f"{n:,} (AIQ {a:.4f}, {len(hull)} hull points); loop sweep {t_loop_pts:.2f} s on "
          f"{n_loop:,} -> ~{t_loop_pts * n / n_loop:.0f} s on {n:,}, plus loop hull + AIQ "
          f"{t_loop_hull:.2f} s; speed-up x{t_loop_full / t_vec:.0f} (results equal on the subsample)")


if __name__ == "__main__":
    main()
