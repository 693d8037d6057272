"""How much routing signal is there *within* a task? (issue 15: can a CF router beat task-best?)

Issue 15 asks for a CF router >= the better of ``best-single`` and ``task-best`` + 0.005 mu_o.
``task-best`` already knows which LLM is best on the query's task, so a router can only beat it
with information about the query *inside* its task. This script measures that information on
K folds (seeded, repeated over fold seeds), with small closed-form estimators written out here
in numpy, so that nothing but the signal itself is being compared:

``best-single``
    argmax of each LLM's mean train score.
``task-best``
    argmax of each LLM's mean train score on the query's task (overall mean for an unseen task).
``task-best-eb``
    the task means shrunk toward the LLM's overall mean by empirical Bayes (Koren's baseline
    predictors with a shrinkage set from the data, not tuned): per LLM ``j``,
    ``m_tj = (sum_t + lam_j g_j) / (n_tj + lam_j)`` with ``lam_j = s2_j / tau2_j``, ``s2_j`` the
    pooled within-task variance of its scores and ``tau2_j`` the method-of-moments variance of
    its task means around ``g_j`` (the sampling part ``s2_j (T - 1) / n_j`` subtracted,
    floored at 1e-6).
Residuals are ``score - task-best-eb's prediction`` minus the query's mean residual over its
observed LLMs (the "interaction" part: what is shared by all LLMs, i.e. how hard the query
is, cannot change which LLM is best, so it is removed before fitting).

``knn-residual``
    ``task-best-eb``'s prediction plus the mean residual of the query's ``k`` most cosine-similar training queries, ``k = clip(round(sqrt(n_train)), 10,
    100)``, weights ``max(cos, 0)``, denominator ``sum(w) + 1`` (shrinks toward 0 residual
    where the neighbours are few or far).
``ridge-residual``
    ``task-best-eb`` plus a ridge regression of the residuals on the embedding, one output per
    LLM, ``lambda`` chosen by exact leave-one-out error over ``1e-2 ... 1e7``
    (``recsys_router.models.components.ridge``, the ALS/BPR fold-in's rule).
``ceiling (test-fitted ridge)``
    NOT a router: the same ridge fitted on the *test* fold's own residuals (in-sample, it reads
    the test scores). It bounds what a linear map of the embedding could add to
    ``task-best-eb`` on these queries.

Also printed, from the train fold: ``R2_loo``, the share of the variance of the residuals
(observed cells; before removing each query's mean) that the ridge explains out of sample
(exact leave-one-out), and the same for the interaction part, the only part that can change
a routing decision (0 = the embedding says nothing about which LLM is best inside a task).

Why not the simulator: in ``make_synthetic`` an LLM's success probability is
``sigmoid(a_i (theta_j + delta_j,task) - b_i)`` with ``a_i > 0``, so within a task every query
ranks the LLMs the same way and ``task-best`` (with enough data) is the Bayes-optimal router
there; only real data can show within-task signal.

Usage::

    python benchmarks/bench_within_task.py --seed 0 --folds 5 --repeats 3 \
        --datasets cruxeval,bfcl_v1,llmrouter,routerbench_zs --encoder minilm
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks.bench_checks import at_least, count, positive_int  # noqa: E402
from benchmarks.bench_quality import dataset_names, load_shared_subset  # noqa: E402
from recsys_router.atomic import atomic_write  # noqa: E402
from recsys_router.models.components.ridge import LOO_GRID, ridge_loo  # noqa: E402
from recsys_router.policies import argmax_policy  # noqa: E402

__all__ = ["eb_task_means", "knn_residual", "ridge_fit", "realised", "fold_rows", "main"]

METHODS = ["best-single", "task-best", "task-best-eb", "knn-residual", "ridge-residual",
           "ceiling (test-fitted ridge)"]


def eb_task_means(scores: np.ndarray, rows: np.ndarray, n_tasks: int, shrink: bool = True):
    """Per-task LLM means shrunk toward each LLM's overall mean (empirical Bayes).

    Parameters
    ----------
    scores : ndarray (n, m), NaN = unobserved
    rows : ndarray of int (n,), task index per query (-1: none)
    n_tasks : int
    shrink : bool
        False gives the plain task means (``lam = 0``), i.e. ``task-best``'s table.

    Returns
    -------
    means : ndarray (n_tasks, m)
        ``(sum_tj + lam_j g_j) / (n_tj + lam_j)``; ``g_j`` where task ``t`` never saw LLM ``j``.
    overall : ndarray (m,)
        ``g_j``, the LLM's mean over all observed train cells (0 when it has none).
    lam : ndarray (m,)
        ``s2_j / tau2_j`` (see the module docstring).

    Example
    -------
    >>> s = np.array([[1., 0.], [1., 0.], [0., 1.], [0., 1.]])
    >>> means, g, lam = eb_task_means(s, np.array([0, 0, 1, 1]), 2)
    >>> g.tolist(), bool(lam[0] < 1e-3)
    ([0.5, 0.5], True)
    """
    obs = ~np.isnan(scores)
    filled = np.where(obs, scores, 0.0)
    cnt = obs.sum(0)
    overall = np.where(cnt > 0, filled.sum(0) / np.maximum(cnt, 1), 0.0)
    n = np.zeros((n_tasks, scores.shape[1]))
    s = np.zeros_like(n)
    ss = np.zeros_like(n)
    for t in range(n_tasks):
        sel = rows == t
        n[t], s[t], ss[t] = obs[sel].sum(0), filled[sel].sum(0), (filled[sel] ** 2).sum(0)
    mean = s / np.maximum(n, 1)
    within = np.maximum(ss - n * mean ** 2, 0.0).sum(0)          # sum of squares inside tasks
    total = n.sum(0)
    s2 = within / np.maximum(total - (n > 0).sum(0), 1)
    tau2 = ((mean - overall) ** 2 * n).sum(0) / np.maximum(total, 1)
    tau2 = np.maximum(tau2 - s2 * ((n > 0).sum(0) - 1) / np.maximum(total, 1), 1e-6)
    lam = s2 / tau2 if shrink else np.zeros_like(s2)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (s + lam * overall) / (n + lam)
    means = np.where(n + lam > 0, means, overall)
    return means, overall, lam


def task_prior(rows: np.ndarray, means: np.ndarray, overall: np.ndarray) -> np.ndarray:
    """``means[rows[i]]`` per query, ``overall`` where ``rows[i] < 0`` or beyond the table."""
    out = np.tile(overall, (len(rows), 1))
    known = (rows >= 0) & (rows < len(means))
    out[known] = means[rows[known]]
    return out


def knn_residual(x_train, resid, x_test, k: int) -> np.ndarray:
    """Weighted mean residual of the ``k`` most cosine-similar train rows (rows of ``x`` are
    unit-normalised here); weights ``max(cos, 0)``, denominator ``sum(w over observed) + 1``."""
    def unit(a):
        return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    sim = unit(x_test) @ unit(x_train).T
    k = int(min(k, sim.shape[1]))
    idx = np.argpartition(-sim, k - 1, axis=1)[:, :k]
    w = np.take_along_axis(sim, idx, 1).clip(0)[:, :, None]
    r = resid[idx]
    seen = ~np.isnan(r)
    return (w * np.where(seen, r, 0.0)).sum(1) / ((w * seen).sum(1) + 1.0)


def ridge_fit(x_train, resid):
    """Ridge of ``resid`` (NaN -> 0) on ``x_train``, penalty by exact leave-one-out over
    :data:`~recsys_router.models.components.ridge.LOO_GRID`: ``(weights (d, m), intercept (m,),
    loo residuals (n, m))``."""
    y = np.where(np.isnan(resid), 0.0, resid)
    coef, _, loo_pred = ridge_loo(x_train, y, LOO_GRID)
    return coef[:-1], coef[-1], y - loo_pred


def realised(pred: np.ndarray, truth: np.ndarray, costs: np.ndarray | None) -> np.ndarray:
    """Each query's true score at the router's pick among its observed LLMs (cheapest of
    ties, as the evaluator does); NaN for a query with no observed LLM (nothing to pick)."""
    obs = ~np.isnan(truth)
    rows = np.flatnonzero(obs.any(axis=1))
    out = np.full(len(truth), np.nan)
    pick = argmax_policy(np.asarray(pred)[rows], None if costs is None else np.asarray(costs)[rows],
                         obs[rows])
    out[rows] = truth[rows, pick]
    return out


def centre_rows(resid: np.ndarray) -> np.ndarray:
    """Each row minus its mean over observed cells (NaN stays NaN): removes the part of a
    residual shared by all LLMs (how hard the query is), which cannot change an argmax."""
    obs = ~np.isnan(resid)
    mean = np.where(obs, resid, 0.0).sum(1, keepdims=True) / np.maximum(obs.sum(1, keepdims=True), 1)
    return resid - mean


def r2_loo(target: np.ndarray, loo: np.ndarray) -> float:
    """``1 - sum(loo^2) / sum((y - column mean)^2)`` over the observed cells of ``target``."""
    seen = ~np.isnan(target)
    col = np.nanmean(np.where(seen, target, np.nan), 0)
    dev = target[seen] - col[np.nonzero(seen)[1]]
    return 1.0 - float((loo[seen] ** 2).sum()) / max(float((dev ** 2).sum()), 1e-12)


def fold_rows(x, scores, rows, costs, n_tasks, train, test):
    """Per-query realised scores of every method (:data:`METHODS`) on one fold, and the train
    ridge's leave-one-out R2 on the residuals and on their row-centred (interaction) part."""
    s_tr, s_te = scores[train], scores[test]
    c = None if costs is None else np.broadcast_to(costs, s_te.shape)
    raw, g, _ = eb_task_means(s_tr, rows[train], n_tasks, shrink=False)
    means, _, _ = eb_task_means(s_tr, rows[train], n_tasks)
    prior_te = task_prior(rows[test], means, g)
    resid = s_tr - task_prior(rows[train], means, g)
    inter = centre_rows(resid)
    k = int(np.clip(round(np.sqrt(len(train))), 10, 100))
    loo_plain = ridge_fit(x[train], resid)[2]
    w, b, loo = ridge_fit(x[train], inter)
    w_c, b_c, _ = ridge_fit(x[test], centre_rows(s_te - prior_te))
    preds = {"best-single": np.tile(g, (len(test), 1)),
             "task-best": task_prior(rows[test], raw, g),
             "task-best-eb": prior_te,
             "knn-residual": prior_te + knn_residual(x[train], inter, x[test], k),
             "ridge-residual": prior_te + x[test] @ w + b,
             "ceiling (test-fitted ridge)": prior_te + x[test] @ w_c + b_c}
    got = {name: realised(p, s_te, c) for name, p in preds.items()}
    return got, r2_loo(resid, loo_plain), r2_loo(inter, loo)


def run_dataset(data, encoder: str, folds: int, repeats: int, seed: int):
    """Embed once, then every fold of every repeat: a long frame of per-fold results."""
    from recsys_router.encoders import get_encoder  # noqa: PLC0415
    from recsys_router.models.baselines.simple import task_groups  # noqa: PLC0415
    from tqdm.auto import tqdm  # noqa: PLC0415
    if folds < 2 or folds > data.n_queries:
        raise ValueError(f"--folds must be in [2, {data.n_queries}], got {folds}")
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    if not data.has_text:
        raise ValueError(f"dataset {data.name!r} has no query texts to embed")
    x = np.asarray(get_encoder(encoder).encode(list(data.texts), query_ids=list(data.query_ids)),
                   dtype=np.float64)
    tasks, rows = task_groups(data)
    scores = data.scores.astype(np.float64)
    costs = data.mean_costs()
    costs = None if np.isnan(costs).all() else np.nan_to_num(costs, nan=np.nanmax(costs))
    out = []
    bar = tqdm(total=folds * repeats, desc=f"{data.name} folds", leave=False)
    for r in range(repeats):
        perm = np.random.default_rng(seed + r).permutation(data.n_queries)
        parts = np.array_split(perm, folds)
        for f in range(folds):
            test = np.sort(parts[f])
            train = np.sort(np.concatenate([parts[h] for h in range(folds) if h != f]))
            got, r2, r2i = fold_rows(x, scores, rows, costs, len(tasks), train, test)
            better = max(("best-single", "task-best"), key=lambda n: got[n].mean())
            for name, v in got.items():
                d = v - got[better]
                out.append({"dataset": data.name, "repeat": r, "fold": f, "method": name,
                            "mu_o": float(v.mean()), "minus_better": float(d.mean()),
                            "r2_loo": r2, "r2_loo_interaction": r2i})
            bar.update()
    bar.close()
    return pd.DataFrame(out)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over folds x repeats per (dataset, method)."""
    g = df.groupby(["dataset", "method"], sort=False)
    tab = g.agg(mu_o=("mu_o", "mean"), mu_o_sd=("mu_o", "std"),
                minus_better=("minus_better", "mean"), minus_better_sd=("minus_better", "std"),
                r2_loo=("r2_loo", "mean"), r2_inter=("r2_loo_interaction", "mean"),
                n=("mu_o", "size")).reset_index()
    return tab


def markdown(tab: pd.DataFrame) -> str:
    """The summary as a markdown table."""
    lines = ["| dataset | method | mu_o | minus better of best-single / task-best (per fold) "
             "| folds |", "|---|---|---|---|---|"]
    for r in tab.itertuples():
        lines.append(f"| {r.dataset} | {r.method} | {r.mu_o:.4f} ± {r.mu_o_sd:.4f} | "
                     f"{r.minus_better:+.4f} ± {r.minus_better_sd:.4f} | {r.n} |")
    lines += ["", "| dataset | R2_loo, residuals | R2_loo, interaction part |", "|---|---|---|"]
    for r in tab.drop_duplicates("dataset").itertuples():
        lines.append(f"| {r.dataset} | {r.r2_loo:.4f} | {r.r2_inter:.4f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="fold seed of the first repeat")
    ap.add_argument("--folds", type=at_least(2), default=5)
    ap.add_argument("--repeats", type=positive_int, default=3, help="fold seeds seed, seed+1, ...")
    ap.add_argument("--datasets", type=dataset_names, default="cruxeval,bfcl_v1,llmrouter,routerbench_zs")
    ap.add_argument("--encoder", default="minilm")
    ap.add_argument("--max-queries", type=count, default=0,
                    help="seeded subset of larger datasets (0: all)")
    ap.add_argument("--out", default="benchmarks/results/within_task")
    a = ap.parse_args(argv)
    frames = []
    for name in a.datasets:
        t0 = time.perf_counter()
        data = load_shared_subset(name, a.max_queries, a.seed)
        frames.append(run_dataset(data, a.encoder, a.folds, a.repeats, a.seed))
        print(f"{name}: {data.n_queries} x {data.n_llms}, {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    if not frames:
        raise SystemExit("--datasets is empty")
    df = pd.concat(frames, ignore_index=True)
    text = markdown(summarise(df))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for suffix, body in ((".md", text + "\n"), (".csv", df.to_csv(index=False))):
        with atomic_write(out / f"within_task{suffix}") as tmp:
            Path(tmp).write_text(body)
    print(text)


if __name__ == "__main__":
    main()
