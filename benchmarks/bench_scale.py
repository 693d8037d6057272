"""RouterEval-scale pools: ``evaluate`` on 2,000 simulated LLMs x 20,000 queries (40M cells).

Runs the evaluate pipeline stage by stage on the simulator's ``routereval-scale`` preset, with
the RouterEval protocol, the pools ``3, 5, 100, 1000, all`` and the routers ``best-single,
knn, linearr, mf, mirt`` (their defaults; the learned ones inside the default safe fallback),
and records for every stage its wall time and its peak resident memory (``VmHWM``, reset
before each stage through ``/proc/self/clear_refs``; where that is not possible the peak
since the start). The stages call, in order, the functions :func:`recsys_router.evaluation.evaluate`
calls (``make_folds``, the shared encoder, ``_fit_fold`` one router at a time,
``resolve_pools``, ``_sweep_pool``, ``_assemble``, ``metrics_from_decisions``), so the metrics
are those of ``evaluate`` (``tests/test_routereval_scale.py`` checks that on a small case).

Then the scaling check: the same pipeline on ``--scale-queries`` queries (default 2,000) at
``--scale-llms`` LLMs (default 250, 500, 1,000, 2,000) with pools ``3, 5, all``, printing each
stage's time and the ratio ``time(2L) / time(L)`` (about 2 when a stage is linear in the
number of LLMs, about 4 when it is quadratic).

Usage: ``python benchmarks/bench_scale.py --seed 0`` (full size; ``--queries``/``--llms``
shrink it, ``--skip-full`` / ``--skip-scaling`` run one part).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from benchmarks.bench_checks import (int_list, name_list, pool_list, positive_int,  # noqa: E402
                                     write_text_atomic)
from recsys_router.cli.args import encoder_spec, seed_value  # noqa: E402
from recsys_router.datasets.synthetic import PRESETS, make_synthetic  # noqa: E402
from recsys_router.evaluation.recompute import metrics_from_decisions  # noqa: E402
from recsys_router.evaluation.protocols import get_protocol  # noqa: E402
from recsys_router.evaluation.runner import (EvalConfig, _assemble, _fit_fold,  # noqa: E402
                                             _shared_encoder)
from recsys_router.evaluation.splits import make_folds, resolve_pools  # noqa: E402
from recsys_router.registry import available_routers  # noqa: E402

ROUTERS = "best-single,knn,linearr,mf,mirt"
POOLS = "3,5,100,1000,all"
LIGHTNING = ("mf", "mirt", "nirt", "two-tower")
GIB = 1024.0 ** 3


def _peak_bytes() -> tuple[float, bool]:
    """(peak resident bytes of this process since the last reset, whether resets work)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) * 1024.0, True
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024.0, False


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Stages:
    """Wall time and peak RSS of each named stage."""

    def __init__(self, verbose: bool = True):
        self.rows: list[dict] = []
        self.verbose = verbose

    def run(self, name: str, fn, *args, **kwargs):
        reset = _reset_peak()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        peak, _ = _peak_bytes()
        self.rows.append({"stage": name, "seconds": dt, "peak_gib": peak / GIB,
                          "peak_kind": "stage" if reset else "since start"})
        if self.verbose:
            print(f"  {name:<34s} {dt:9.2f} s   peak RSS {peak / GIB:6.2f} GiB", flush=True)
        return out


class _Bar:
    def set_postfix_str(self, *_):
        pass

    def update(self, *_):
        pass


def staged_evaluate(data, cfg: EvalConfig, stages: Stages):
    """``evaluate(data, cfg)`` for single-fold configurations, one stage at a time.

    Returns (decisions, metrics, notes), as ``EvalResult`` holds them.
    """
    from recsys_router.evaluation.runner import _sweep_pool  # noqa: PLC0415
    notes: list[str] = []
    protocols = [get_protocol(p) for p in cfg.protocols]
    folds = stages.run("split", make_folds, data, split=cfg.split, seed=cfg.seed)
    if len(folds) != 1:
        raise ValueError("staged_evaluate runs one fold")
    fold = folds[0]
    shared: dict = {}
    if cfg.encoder is not None:
        stages.run("encode", _shared_encoder, cfg.encoder, shared, data, notes)
    preds, test = {}, None
    for name in cfg.routers:
        one = EvalConfig([name], protocols=cfg.protocols, pools=cfg.pools, encoder=cfg.encoder,
                         seed=cfg.seed, split=cfg.split, router_params=cfg.router_params)
        test, p, timing, _ = stages.run(f"fit+predict {name}", _fit_fold, fold, one, data,
                                        shared, notes, _Bar())
        if name not in p:
            raise RuntimeError(f"router {name} failed: {notes[-1]}")
        preds.update(p)
        stages.rows[-1].update(fit_s=timing[0]["fit_s"], predict_s=timing[0]["predict_s"])
    blocks = []
    for pool in cfg.pools:
        resolved = stages.run(f"pools {pool}", resolve_pools, fold.train, [pool], cfg.groups,
                              seed=cfg.seed, notes=notes, method=cfg.group_method)

        def sweep(resolved=resolved):
            out = []
            for pl, group, names in resolved:
                out += _sweep_pool(data, fold, test, preds, pl, group, names, protocols, cfg,
                                   notes, _Bar())
            return out
        blocks += stages.run(f"sweep {pool}", sweep)
    decisions = stages.run("assemble decisions", _assemble, blocks, data.query_ids,
                           data.llm_names)
    del blocks
    metrics, _ = stages.run("metrics", metrics_from_decisions, decisions,
                            reference_score=cfg.reference_score)
    return decisions, metrics, list(dict.fromkeys(notes))


def pipeline(n_queries: int, n_llms: int, routers: list[str], pools: list, seed: int,
             encoder: str, verbose: bool = True, max_steps: int | None = None,
             group_method: str = "routereval"):
    """Generate the preset's data at this size and run :func:`staged_evaluate` on it
    (``max_steps``: that many optimizer steps for the Lightning routers, else their
    data-scaled plan; ``group_method``: how sized pools' groups are built)."""
    stages = Stages(verbose)
    opts = {**PRESETS["routereval-scale"], "n_queries": n_queries, "n_llms": n_llms}
    data = stages.run("generate", make_synthetic, seed=seed, **opts)
    params = {r: {"max_steps": int(max_steps)} for r in routers
              if max_steps and r in LIGHTNING}
    cfg = EvalConfig(routers, protocols=["routereval"], pools=pools, encoder=encoder, seed=seed,
                     router_params=params, group_method=group_method)
    decisions, metrics, notes = staged_evaluate(data, cfg, stages)
    return stages, decisions, metrics, notes


def _extrapolate(rows: list[dict], steps: int, n_cells: int) -> None:
    """Print each Lightning router's fit time scaled from ``steps`` to its data-scaled step
    budget (linear in the steps: an over-estimate, set-up time is scaled too)."""
    from recsys_router.models.base.schedule import data_scaled_plan  # noqa: PLC0415
    # training cells the wrapped router sees: 80% train split, 80% of it inner-train (the
    # safe fallback's held-out 20% is the router's early-stopping split)
    plan = data_scaled_plan(int(n_cells * 0.8 * 0.8))
    for r in rows:
        name = r["stage"].replace("fit+predict ", "")
        if name in LIGHTNING and "fit_s" in r:
            per = r["fit_s"] / steps
            print(f"{name}: {steps} steps fitted in {r['fit_s']:.1f} s ({per:.2f} s/step incl. "
                  f"set-up); its data-scaled plan is {plan.max_steps} steps of batch "
                  f"{plan.batch_size} -> about {per * plan.max_steps:.0f} s (extrapolated)")


def _table(rows: list[dict]) -> str:
    out = ["| stage | wall s | peak RSS GiB |", "|---|---:|---:|"]
    for r in rows:
        extra = f" (fit {r['fit_s']:.1f} s, predict {r['predict_s']:.1f} s)" if "fit_s" in r else ""
        out.append(f"| {r['stage']}{extra} | {r['seconds']:.1f} | {r['peak_gib']:.2f} |")
    total = sum(r["seconds"] for r in rows)
    out.append(f"| **total** | **{total:.1f}** | **{max(r['peak_gib'] for r in rows):.2f}** |")
    return "\n".join(out)


def _leaderboard(metrics) -> str:
    sel = metrics[(metrics["group"].isin(["all", "mean"]))
                  & metrics["metric"].isin(["mu_o", "v_b", "e_p"])
                  & ~metrics["router"].str.startswith("LLM:")]
    if sel.empty:
        return ""
    wide = sel.pivot_table(index="router", columns=["pool", "metric"], values="value")
    lines = ["| router | " + " | ".join(f"{p} {m}" for p, m in wide.columns) + " |",
             "|---|" + "---:|" * len(wide.columns)]
    for r, row in wide.iterrows():
        lines.append(f"| {r} | " + " | ".join(f"{v:.4f}" for v in row.to_numpy()) + " |")
    return "\n".join(lines)


def _per_llm_reference(decisions) -> dict[str, float]:
    """Seconds of the single-LLM mu_o of the whole pool: one ``mu_o`` call per LLM (how the
    protocol computed it before; each call validates the whole matrix, so quadratic in the
    number of LLMs) and one :func:`column_means` pass (now), on the same matrix; asserts equal.
    Empty (no rows to print) when the run has no ``all`` pool: there is nothing to time."""
    from recsys_router.evaluation.recompute import split_block  # noqa: PLC0415
    from recsys_router.evaluation.protocols.routereval import column_means  # noqa: PLC0415
    from recsys_router.metrics.routereval import mu_o  # noqa: PLC0415
    sel = decisions[(decisions["pool"] == "all") & (decisions["protocol"] == "routereval")]
    if sel.empty:
        return {}
    S = split_block(sel).scores
    t0 = time.perf_counter()
    loop = [mu_o(S, np.full(S.shape[0], j)) for j in range(S.shape[1])]
    t1 = time.perf_counter()
    now = column_means(S)
    t2 = time.perf_counter()
    if not np.array_equal(np.asarray(loop), now, equal_nan=True):
        raise AssertionError("column_means differs from the per-LLM mu_o loop")
    return {"LLM mu_o, pool all: per-LLM loop (before)": t1 - t0,
            "LLM mu_o, pool all: column_means (now)": t2 - t1}


def _scaling(args, routers) -> list[dict]:
    sizes = args.scale_llms
    pools = args.scale_pools
    per: dict[int, dict[str, float]] = {}
    for L in sizes:
        print(f"\nscaling: {args.scale_queries} queries x {L} LLMs, pools {_text(pools)}",
              flush=True)
        stages, decisions, *_ = pipeline(args.scale_queries, L, routers, pools, args.seed,
                                         args.encoder, max_steps=args.max_steps,
                                         group_method=args.group_method)
        per[L] = {r["stage"]: r["seconds"] for r in stages.rows}
        per[L].update(_per_llm_reference(decisions))
        stage_s = {r["stage"]: r["seconds"] for r in stages.rows}
        per[L]["total"] = sum(stage_s.values())
        per[L]["total (pools, sweep, metrics)"] = sum(
            v for k, v in stage_s.items() if k.startswith(("pools", "sweep", "assemble", "metrics")))
    names = list(per[sizes[0]])
    if "all" not in pools:
        print("\n(--scale-pools has no 'all' pool: the 'LLM mu_o, pool all' rows are left out)")
    head = "| stage | " + " | ".join(f"L={L} s" for L in sizes) + " | " + \
        " | ".join(f"{b}/{a}" for a, b in zip(sizes, sizes[1:])) + " |"
    print("\n" + head)
    print("|---|" + "---:|" * (2 * len(sizes) - 1))
    rows = []
    for st in names:
        ts = [per[L].get(st, float("nan")) for L in sizes]
        ratios = [b / a if a > 0 else float("nan") for a, b in zip(ts, ts[1:])]
        print(f"| {st} | " + " | ".join(f"{t:.2f}" for t in ts) + " | "
              + " | ".join(f"{r:.2f}" for r in ratios) + " |")
        rows.append({"stage": st, "seconds": dict(zip(sizes, ts)), "ratios": ratios})
    return rows


def _text(items) -> str:
    return ",".join(map(str, items))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=seed_value, default=0)
    ap.add_argument("--queries", type=positive_int, default=PRESETS["routereval-scale"]["n_queries"])
    ap.add_argument("--llms", type=positive_int, default=PRESETS["routereval-scale"]["n_llms"])
    ap.add_argument("--routers", type=name_list(available_routers, "router"), default=ROUTERS)
    ap.add_argument("--pools", type=pool_list, default=POOLS)
    ap.add_argument("--encoder", type=encoder_spec, default="hashing")
    ap.add_argument("--scale-llms", type=int_list(1), default="250,500,1000,2000")
    ap.add_argument("--scale-queries", type=positive_int, default=2000)
    ap.add_argument("--scale-pools", type=pool_list, default="3,5,all")
    ap.add_argument("--max-steps", type=positive_int, default=None,
                    help="optimizer steps of the Lightning routers, in the full run and the "
                         "scaling check (default: their data-scaled plan); the full run's "
                         "output then also extrapolates their fit to the plan's steps")
    ap.add_argument("--group-method", choices=("routereval", "oracle-best"), default="routereval",
                    help="how sized pools' candidate groups are built (default routereval)")
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args(argv)
    routers = args.routers
    out: dict = {"args": vars(args) | {"json": str(args.json)}}
    if not args.skip_full:
        print(f"full run: {args.queries} queries x {args.llms} LLMs "
              f"({args.queries * args.llms / 1e6:.0f}M cells), routers {_text(routers)}, "
              f"pools {_text(args.pools)}, encoder {args.encoder}, seed {args.seed}", flush=True)
        stages, decisions, metrics, notes = pipeline(args.queries, args.llms, routers,
                                                     args.pools, args.seed,
                                                     args.encoder, max_steps=args.max_steps,
                                                     group_method=args.group_method)
        print("\n" + _table(stages.rows))
        print(f"\ndecision rows: {len(decisions):,}; metric rows: {len(metrics):,}")
        print("\n" + _leaderboard(metrics))
        print("\nnotes:\n" + "\n".join(f"- {n}" for n in notes))
        if args.max_steps:
            _extrapolate(stages.rows, args.max_steps, args.queries * args.llms)
        peak = max(r["peak_gib"] for r in stages.rows)
        print(f"\npeak RSS {peak:.2f} GiB ({'within' if peak <= 24 else 'ABOVE'} 24 GiB)")
        out["full"] = stages.rows
    if not args.skip_scaling:
        out["scaling"] = _scaling(args, routers)
    if args.json:
        write_text_atomic(args.json, json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
