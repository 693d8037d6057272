"""Learning from logged feedback: the aims of issue 13, measured on the shared real data.

Three parts, each printed as a Markdown table (and written as CSV under ``--out``):

1. **OPE accuracy** (uniform logging): a target router (``--target``, fitted with full
   information on ``--target-frac`` of the queries) is evaluated on the other queries from a
   uniformly logged run of ``--n-logged`` decisions (default: the other ``1 - --target-frac``
   of the queries), ``--seeds`` log draws; each estimator's mean absolute error against the
   true ``mu_o`` (full matrix), how many seeds it is within 0.01, and how many seeds its 95%
   bootstrap interval covers the truth. DM/DR's reward model (``--reward``): ``ridge`` (default)
   is the per-LLM ridge of :mod:`recsys_router.feedback.reward` on the query embeddings
   (``--encoder``, reduced to ``--reward-dims`` principal components) and the task one-hot
   (``--no-reward-task`` leaves it out), fitted on each seed's
   log itself, cross-fitted over ``--crossfit`` folds and refitted on ``--n-refit`` bootstrap
   resamples; ``mf`` is the earlier reward model (``mf`` trained ``naive`` on a separate uniform
   log of the target's training queries, held fixed in the bootstrap).
2. **Debiased training** (log from epsilon-greedy around the best single LLM): the CF router
   (``--router``) trained on the log with each loss, with full information on the same
   queries, and the best single LLM; ``mu_o`` and ``nAUC`` (when the data has costs) on the
   full test matrix, and the share of the full-information gain over the best single LLM
   recovered: ``(mu_o(loss) - mu_o(best)) / (mu_o(full) - mu_o(best))``; ``--train-seeds``
   splits and log draws, mean +- std.
3. **Online loop**: ``--rounds`` epsilon-greedy rounds retrained every ``--retrain-every``
   (``--online-epsilon``, optionally decaying as epsilon / sqrt(k) with ``--epsilon-decay sqrt``);
   cumulative regret against the oracle, of the loop and of the best fixed LLM.

``--parts`` picks which of ``ope,train,online`` to run.

Example (the configuration of benchmarks/README.md)::

    python benchmarks/bench_feedback.py --parts ope --datasets llmrouter,routerdc --n-logged 5000 \
        --out results/bench_feedback
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks.bench_checks import (count, name_list, one_name, positive_float,  # noqa: E402
                                     positive_int, share, to_csv_atomic)
from recsys_router.cli.args import encoder_spec, seed_value  # noqa: E402
from recsys_router.datasets.resolve import resolve_dataset  # noqa: E402
from recsys_router.evaluation.protocols.bandit import _router_params  # noqa: E402
from recsys_router.feedback.bandit import bandit_evaluate, online_bandit, simulate_log  # noqa: E402
from recsys_router.feedback.logged import FEEDBACK_LOSSES  # noqa: E402
from recsys_router.feedback.ope import ESTIMATORS, estimate_all  # noqa: E402
from recsys_router.feedback.reward import query_features, ridge_reward  # noqa: E402
from recsys_router.metrics.routereval import mu_o  # noqa: E402
from recsys_router.registry import available_routers, make_router  # noqa: E402

NAMES = {"routerdc": "routerdc_split2_model7"}
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PARTS = ("ope", "train", "online")


def dataset_names() -> list[str]:
    """The names :func:`_load` takes: registered datasets, the short names of :data:`NAMES`
    and the folders of the shared data (a file or folder path is taken too)."""
    from recsys_router.datasets.registry import available_datasets
    found = [p.name for p in DATA.iterdir() if p.is_dir()] if DATA.is_dir() else []
    return sorted(set(available_datasets()) | set(NAMES) | set(found))


def _is_path(name: str) -> bool:
    try:
        return Path(name).expanduser().exists()
    except (OSError, RuntimeError):  # a name too long for a path, ...
        return False


#: ``--datasets`` / ``--train-datasets`` / ``--online-dataset`` types (unknown names refused
#: when the command line is parsed, with the valid ones listed)
datasets_arg = name_list(dataset_names, "dataset", accept=_is_path)
one_dataset = one_name(dataset_names, "dataset", accept=_is_path)


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


def _ope_split(d, args):
    if args.n_logged:
        if args.n_logged >= d.n_queries - 50:
            raise SystemExit(f"--n-logged {args.n_logged}: {d.name} has {d.n_queries} complete "
                             "queries; at least 50 must stay to train the target")
        perm = np.random.default_rng(args.seed).permutation(d.n_queries)
        return d.subset(np.sort(perm[args.n_logged:])), d.subset(np.sort(perm[:args.n_logged]))
    parts = d.split((args.target_frac, 1 - args.target_frac), seed=args.seed)
    return parts["train"], parts["test"]


def ope_accuracy(d, name, args, params):
    tr, ev = _ope_split(d, args)
    target = make_router(args.target).fit(tr)
    ch = target.route_indices(ev)
    truth = mu_o(ev.scores, ch)
    n, L = ev.scores.shape
    rows_n = np.arange(n)
    pi = np.zeros(ev.scores.shape)
    pi[rows_n, ch] = 1.0
    q_fixed = x = None
    if args.reward == "mf":
        dm_log, _ = simulate_log(tr, np.full(tr.scores.shape, 1.0 / L), seed=10_000 + args.seed)
        dm = make_router("logged", router="mf", params=params, loss="naive", seed=args.seed).fit(dm_log)
        q_fixed = dm.predict_scores(ev)
    else:
        x = query_features(ev, encoder=args.encoder, dims=args.reward_dims, task=args.reward_task,
                           **({"dim": args.hash_dim} if args.encoder == "hashing" else {}))
    rows = []
    for s in tqdm(range(args.seeds), desc=f"OPE {name}", leave=False):
        log, a = simulate_log(ev, np.full(ev.scores.shape, 1.0 / L), seed=args.seed + s)
        r = ev.scores[rows_n, a].astype(float)
        refit = None if x is None else ridge_reward(x, a, r, L, folds=args.crossfit, seed=s,
                                                    alpha=args.ridge_alpha)
        q = q_fixed if refit is None else refit(np.ones(n))
        est = estimate_all(r, log.queries["propensity"], pi, a, q, n_boot=args.n_boot, seed=s,
                           refit=refit, n_refit=min(args.n_refit, args.n_boot) if refit else None)
        err_t = q[rows_n, ch] - ev.scores[rows_n, ch]  # reward model at the target's choice
        for e in ESTIMATORS:
            rows.append({"dataset": name, "n_logged": n, "n_llms": L, "seed": s, "estimator": e,
                         "truth": truth, "estimate": est[e]["value"], "lo": est[e]["lo"],
                         "hi": est[e]["hi"], "ess": est["ess"], "n_refit": est["n_refit"],
                         "rm_bias": float(err_t.mean()), "rm_mse": float((err_t ** 2).mean())})
    return pd.DataFrame(rows)


def _print_ope(ope, args):
    ope["abs_err"] = (ope["estimate"] - ope["truth"]).abs()
    ope["within_001"] = ope["abs_err"] <= 0.01
    ope["covered"] = (ope["lo"] <= ope["truth"]) & (ope["truth"] <= ope["hi"])
    g = ope.groupby(["dataset", "estimator"], sort=False)
    tab = g.agg(n_logged=("n_logged", "first"), n_llms=("n_llms", "first"), truth=("truth", "first"),
                mae=("abs_err", "mean"), within_001=("within_001", "sum"), covered=("covered", "sum"),
                ess=("ess", "mean"), rm_bias=("rm_bias", "mean"), rm_mse=("rm_mse", "mean")).reset_index()
    print(f"\n### OPE accuracy (uniform logging, {args.seeds} seeds, target {args.target}, "
          f"reward model {args.reward})\n")
    print("| dataset | logged | LLMs | true mu_o | estimator | mean abs error | seeds within 0.01 "
          "| seeds CI covers | mean ESS |\n|---|---|---|---|---|---|---|---|---|")
    for r in tab.itertuples():
        print(f"| {r.dataset} | {r.n_logged} | {r.n_llms} | {r.truth:.4f} | {r.estimator.upper()} | "
              f"{r.mae:.4f} | {r.within_001}/{args.seeds} | {r.covered}/{args.seeds} | {r.ess:.0f} |")
    print("\nReward model at the target's choice (mean over seeds; its bias is DM's error):\n")
    print("| dataset | bias | mean squared error |\n|---|---|---|")
    for r in tab[tab["estimator"] == "dm"].itertuples():
        print(f"| {r.dataset} | {r.rm_bias:+.4f} | {r.rm_mse:.4f} |")


def training(args, params):
    rows = []
    for name in args.train_datasets:
        d = _load(name, args.max_queries, args.seed)
        for ts in tqdm(range(args.train_seeds), desc=f"training {name}", leave=False):
            parts = d.split((0.7, 0.3), seed=args.seed + ts)
            res = bandit_evaluate(parts["train"], parts["test"], {args.router: (args.router, params)},
                                  logging_policy=f"epsilon-greedy:{args.epsilon}", n_boot=args.n_boot,
                                  seed=args.seed + ts)
            res.insert(0, "dataset", name)
            res.insert(1, "n_train", parts["train"].n_queries)
            res.insert(2, "split_seed", args.seed + ts)
            rows.append(res)
    return pd.concat(rows, ignore_index=True)


def _pm(m: float, s: float) -> str:
    return f"{m:.4f}" if np.isnan(s) else f"{m:.4f} +- {s:.4f}"


def _print_training(train, args):
    print(f"\n### Training on a log from epsilon-greedy:{args.epsilon} around the best single LLM "
          f"({args.router}, encoder {args.encoder}, {args.train_seeds} split seed(s), mean +- std "
          "over seeds)\n")
    print("| dataset | train queries | model | mu_o | nAUC | gain recovered |\n|---|---|---|---|---|---|")
    for name, sub in train.groupby("dataset", sort=False):
        t = sub.groupby(["router", "loss", "metric"])["value"]
        mean, std = t.mean(), t.std(ddof=1)  # NaN with one split seed: no +- printed
        best = mean[("best-single", "full", "mu_o")]
        full = mean[(args.router, "full", "mu_o")]
        for loss in ("full", "naive", "ips", "snips", "dr"):
            k = (args.router, loss, "mu_o")
            nauc = f"{mean[(args.router, loss, 'nauc')]:.4f}" if (args.router, loss, "nauc") in mean \
                else "n/a (no costs)"
            rec = f"{(mean[k] - best) / (full - best):.0%}" if full > best else "n/a (full <= best)"
            print(f"| {name} | {int(sub['n_train'].iloc[0])} | {args.router} {loss} | "
                  f"{_pm(mean[k], std[k])} | {nauc} | {rec} |")
        k = ("best-single", "full", "mu_o")
        print(f"| {name} | | best single LLM | {_pm(best, std[k])} | | |")


def online(args, params, out):
    from recsys_router.feedback.report import plot_regret
    d = _load(args.online_dataset, args.max_queries, args.seed)
    print(f"\n### Online loop ({args.online_dataset}, {args.rounds} rounds, retrained every "
          f"{args.retrain_every}, epsilon {args.online_epsilon} ({args.epsilon_decay}), loss "
          f"{args.online_loss}, {args.router})\n")
    print("| seed | online router: regret vs oracle | best fixed LLM (hindsight): regret vs oracle "
          "| online mean score | best fixed mean score |\n|---|---|---|---|---|")
    frames = []
    for s in range(args.online_seeds):
        runs = online_bandit(d, (args.router, params), loss=args.online_loss, rounds=args.rounds,
                             retrain_every=args.retrain_every, epsilon=args.online_epsilon,
                             decay=args.epsilon_decay, seed=args.seed + s)
        runs.insert(0, "seed", args.seed + s)
        frames.append(runs)
        last = runs.iloc[-1]
        print(f"| {args.seed + s} | {last['regret_policy']:.1f} | {last['regret_best_fixed']:.1f} | "
              f"{runs['score'].mean():.4f} | {runs['best_fixed'].mean():.4f} |")
        if s == 0:
            plot_regret(runs, out / "regret.png",
                        f"online {args.router} ({args.online_loss}) on {args.online_dataset}")
    to_csv_atomic(pd.concat(frames, ignore_index=True), out / "regret.csv")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", type=name_list(lambda: PARTS, "part"), default=",".join(PARTS),
                    help="which of ope,train,online to run")
    ap.add_argument("--datasets", type=datasets_arg,
                    default="routerbench_zs,llmrouter,routerdc,cruxeval,bfcl_v1")
    ap.add_argument("--train-datasets", type=datasets_arg, default="routerdc")
    ap.add_argument("--online-dataset", type=one_dataset, default="routerdc")
    ap.add_argument("--max-queries", type=positive_int, default=None, help="subsample larger datasets")
    ap.add_argument("--target", type=one_name(available_routers, "router"), default="knn", help="target router of the OPE part")
    ap.add_argument("--target-frac", type=share(zero=False, one=False), default=0.3,
                    help="OPE: share of the queries that trains the target (> 0 and < 1)")
    ap.add_argument("--n-logged", type=positive_int, default=None,
                    help="OPE: logged decisions (the rest trains the target; default 1 - target-frac)")
    ap.add_argument("--reward", choices=("ridge", "mf"), default="ridge", help="OPE reward model")
    ap.add_argument("--reward-dims", type=positive_int, default=64, help="principal components of the ridge")
    ap.add_argument("--reward-task", action=argparse.BooleanOptionalAction, default=True,
                    help="add the task one-hot to the ridge's features (when the data has tasks)")
    ap.add_argument("--ridge-alpha", type=positive_float, default=10.0)
    ap.add_argument("--crossfit", type=count, default=2, help="cross-fitting folds (< 2: off)")
    ap.add_argument("--n-refit", type=count, default=200, help="resamples that refit the reward model")
    ap.add_argument("--encoder", type=encoder_spec, default="hashing")
    ap.add_argument("--hash-dim", type=positive_int, default=256)
    ap.add_argument("--router", type=one_name(available_routers, "router"), default="mf", help="CF router of the training and online parts")
    ap.add_argument("--params", default="", help="KEY=VALUE,... of the CF router (default plan)")
    ap.add_argument("--epsilon", type=share(zero=False), default=0.1,
                    help="epsilon-greedy logging policy of the training part (> 0 and <= 1)")
    ap.add_argument("--train-seeds", type=positive_int, default=1)
    ap.add_argument("--seeds", type=positive_int, default=20, help="OPE part: logging seeds")
    ap.add_argument("--n-boot", type=count, default=200)
    ap.add_argument("--rounds", type=positive_int, default=1500)
    ap.add_argument("--retrain-every", type=positive_int, default=300)
    ap.add_argument("--online-epsilon", type=share(), default=0.1, help="from 0 to 1")
    ap.add_argument("--epsilon-decay", choices=("constant", "sqrt"), default="constant")
    ap.add_argument("--online-loss", type=one_name(lambda: FEEDBACK_LOSSES, "loss"), default="dr")
    ap.add_argument("--online-seeds", type=positive_int, default=1)
    ap.add_argument("--seed", type=seed_value, default=0)
    ap.add_argument("--out", default="results/bench_feedback")
    args = ap.parse_args(argv)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    parts = args.parts
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = {"encoder": args.encoder, **({"encoder_options": {"dim": args.hash_dim}}
                                          if args.encoder == "hashing" else {}),
              **_router_params(split(args.params))}
    t0 = time.perf_counter()
    if "ope" in parts:
        frames = [ope_accuracy(_load(name, args.max_queries, args.seed), name, args, params)
                  for name in tqdm(args.datasets, desc="OPE accuracy")]
        ope = pd.concat(frames, ignore_index=True)
        to_csv_atomic(ope, out / "ope.csv")
        _print_ope(ope, args)
    if "train" in parts:
        train = training(args, params)
        to_csv_atomic(train, out / "training.csv")
        _print_training(train, args)
    if "online" in parts:
        online(args, params, out)
    print(f"\n(total {time.perf_counter() - t0:.0f} s; CSVs (and regret.png) in {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
