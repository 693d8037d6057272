"""Learning from logged feedback: the aims of issue 13, measured on the shared real data.

Three parts, each printed as a Markdown table (and written as CSV under ``--out``):

1. **OPE accuracy** (uniform logging): a target router (``--target``, fitted with full
   information on ``--target-frac`` of the queries) is evaluated on the other queries from a
   uniformly logged run, ``--seeds`` log draws; each estimator's mean absolute error against
   the true ``mu_o`` (full matrix), how many seeds it is within 0.01, and how many seeds its
   95% bootstrap interval covers the truth. DM/DR's reward model: ``mf`` trained ``naive``
   on a separate uniform log of the target's training queries (fitted once per dataset).
2. **Debiased training** (log from epsilon-greedy around the best single LLM): the CF router
   (``--router``) trained on the log with each loss, with full information on the same
   queries, and the best single LLM; ``mu_o`` and ``nAUC`` (when the data has costs) on the
   full test matrix, and the share of the full-information gain over the best single LLM
   recovered: ``(mu_o(loss) - mu_o(best)) / (mu_o(full) - mu_o(best))``.
3. **Online loop**: ``--rounds`` epsilon-greedy rounds retrained every ``--retrain-every``;
   cumulative regret against the oracle, of the loop and of the best fixed LLM.

Example (the reduced configuration of benchmarks/README.md)::

    python benchmarks/bench_feedback.py --datasets routerbench_zs,llmrouter,routerdc,cruxeval,bfcl_v1 \
        --train-datasets routerbench_zs,cruxeval --online-dataset routerbench_zs --out results/bench_feedback
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from recsys_router.datasets.resolve import resolve_dataset
from recsys_router.feedback.bandit import bandit_evaluate, online_bandit, simulate_log
from recsys_router.feedback.ope import ESTIMATORS, estimate_all
from recsys_router.metrics.routereval import mu_o
from recsys_router.registry import make_router

NAMES = {"routerdc": "routerdc_split2_model7"}
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _load(name: str, max_queries: int | None, seed: int):
    spec = NAMES.get(name, name)
    path = DATA / spec
    if name in ("cruxeval", "bfcl_v1"):
        path = path / f"{name}.parquet"
    d = resolve_dataset(str(path) if path.exists() else spec, stack=True)
    keep = np.flatnonzero(~np.isnan(d.scores).any(axis=1))
    d = d.subset(keep)
    if max_queries and d.n_queries > max_queries:
        d = d.subset(np.sort(np.random.default_rng(seed).permutation(d.n_queries)[:max_queries]))
    return d


def ope_accuracy(d, name, args, mf):
    parts = d.split((args.target_frac, 1 - args.target_frac), seed=args.seed)
    tr, ev = parts["train"], parts["test"]
    target = make_router(args.target).fit(tr)
    ch = target.route_indices(ev)
    truth = mu_o(ev.scores, ch)
    L = ev.n_llms
    dm_log, _ = simulate_log(tr, np.full(tr.scores.shape, 1.0 / L), seed=10_000 + args.seed)
    dm = make_router("logged", router="mf", params=mf, loss="naive", seed=args.seed).fit(dm_log)
    q = dm.predict_scores(ev)
    pi = np.zeros(ev.scores.shape)
    pi[np.arange(ev.n_queries), ch] = 1.0
    rows = []
    for s in range(args.seeds):
        log, a = simulate_log(ev, np.full(ev.scores.shape, 1.0 / L), seed=args.seed + s)
        r = ev.scores[np.arange(ev.n_queries), a].astype(float)
        est = estimate_all(r, log.queries["propensity"], pi, a, q, n_boot=args.n_boot, seed=s)
        for e in ESTIMATORS:
            rows.append({"dataset": name, "n_logged": ev.n_queries, "n_llms": L, "seed": s,
                         "estimator": e, "truth": truth, "estimate": est[e]["value"],
                         "lo": est[e]["lo"], "hi": est[e]["hi"], "ess": est["ess"]})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="routerbench_zs,llmrouter,routerdc,cruxeval,bfcl_v1")
    ap.add_argument("--train-datasets", default="routerbench_zs,cruxeval")
    ap.add_argument("--online-dataset", default="routerbench_zs")
    ap.add_argument("--max-queries", type=int, default=4000, help="subsample larger datasets")
    ap.add_argument("--target", default="knn", help="target router of the OPE part")
    ap.add_argument("--target-frac", type=float, default=0.3)
    ap.add_argument("--router", default="mf", help="CF router of the training and online parts")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1500)
    ap.add_argument("--retrain-every", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench_feedback")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mf = {"max_epochs": args.epochs, "batch_size": 128, "encoder_options": {"dim": 256}}
    t0 = time.perf_counter()
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731

    frames = []
    for name in tqdm(split(args.datasets), desc="OPE accuracy"):
        frames.append(ope_accuracy(_load(name, args.max_queries, args.seed), name, args, mf))
    ope = pd.concat(frames, ignore_index=True)
    ope.to_csv(out / "ope.csv", index=False)
    ope["abs_err"] = (ope["estimate"] - ope["truth"]).abs()
    ope["within_001"] = ope["abs_err"] <= 0.01
    ope["covered"] = (ope["lo"] <= ope["truth"]) & (ope["truth"] <= ope["hi"])
    g = ope.groupby(["dataset", "estimator"], sort=False)
    tab = g.agg(n_logged=("n_logged", "first"), n_llms=("n_llms", "first"), truth=("truth", "first"),
                mae=("abs_err", "mean"), within_001=("within_001", "sum"), covered=("covered", "sum"),
                ess=("ess", "mean")).reset_index()
    print(f"\n### OPE accuracy (uniform logging, {args.seeds} seeds, target {args.target})\n")
    print("| dataset | logged | LLMs | true mu_o | estimator | mean abs error | seeds within 0.01 "
          "| seeds CI covers | mean ESS |\n|---|---|---|---|---|---|---|---|---|")
    for r in tab.itertuples():
        print(f"| {r.dataset} | {r.n_logged} | {r.n_llms} | {r.truth:.4f} | {r.estimator.upper()} | "
              f"{r.mae:.4f} | {r.within_001}/{args.seeds} | {r.covered}/{args.seeds} | {r.ess:.0f} |")

    rows = []
    for name in tqdm(split(args.train_datasets), desc="training"):
        d = _load(name, args.max_queries, args.seed)
        parts = d.split((0.7, 0.3), seed=args.seed)
        res = bandit_evaluate(parts["train"], parts["test"], {args.router: (args.router, mf)},
                              logging_policy=f"epsilon-greedy:{args.epsilon}", n_boot=args.n_boot,
                              seed=args.seed, dm_router=("mf", mf))
        res.insert(0, "dataset", name)
        res.insert(1, "n_train", parts["train"].n_queries)
        rows.append(res)
    train = pd.concat(rows, ignore_index=True)
    train.to_csv(out / "training.csv", index=False)
    print(f"\n### Training on a log from epsilon-greedy:{args.epsilon} around the best single LLM "
          f"({args.router}, {args.epochs} epochs)\n")
    print("| dataset | train queries | model | mu_o | nAUC | gain recovered |\n|---|---|---|---|---|---|")
    for name, sub in train.groupby("dataset", sort=False):
        t = sub.set_index(["router", "loss", "metric"])["value"]
        best = t[("best-single", "full", "mu_o")]
        full = t[(args.router, "full", "mu_o")]
        for loss in ("full", "naive", "ips", "snips", "dr"):
            m = t[(args.router, loss, "mu_o")]
            nauc = t.get((args.router, loss, "nauc"), float("nan"))
            rec = f"{(m - best) / (full - best):.0%}" if full > best else "n/a (full <= best)"
            print(f"| {name} | {int(sub['n_train'].iloc[0])} | {args.router} {loss} | {m:.4f} | "
                  f"{nauc:.4f} | {rec} |")
        print(f"| {name} | | best single LLM | {best:.4f} | | |")

    d = _load(args.online_dataset, args.max_queries, args.seed)
    runs = online_bandit(d, (args.router, mf), loss="dr", rounds=args.rounds,
                         retrain_every=args.retrain_every, epsilon=args.epsilon, seed=args.seed)
    runs.to_csv(out / "regret.csv", index=False)
    from recsys_router.feedback.report import plot_regret
    plot_regret(runs, out / "regret.png", f"online {args.router} (dr) on {args.online_dataset}")
    last = runs.iloc[-1]
    print(f"\n### Online loop ({args.online_dataset}, {len(runs)} rounds, retrained every "
          f"{args.retrain_every}, epsilon {args.epsilon}, loss dr)\n")
    print("| policy | cumulative regret vs the oracle |\n|---|---|")
    print(f"| online {args.router} | {last['regret_policy']:.1f} |")
    print(f"| best fixed LLM (hindsight) | {last['regret_best_fixed']:.1f} |")
    print(f"\n(total {time.perf_counter() - t0:.0f} s; CSVs and regret.png in {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
