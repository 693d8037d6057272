"""The ``coldstart`` protocol as a record: leave one LLM out, onboard it from K probes
(:mod:`recsys_router.coldstart.protocol` holds the metrics and their formulas). It runs on its
own: ``recsys-router evaluate --protocol coldstart`` writes ``metrics.csv``, ``summary.csv``,
``config.json`` and ``coldstart_curves.png``.

Reference: cold-start item onboarding as in collaborative filtering (a new item's factors fitted
from a few interactions with the user side frozen), applied to LLMs as items.
"""

from __future__ import annotations

import json

import pandas as pd

from ..io import atomic_dir
from ._base import Protocol, ProtocolOption, RunOutcome, register_protocol, train_test_parts

__all__ = ["COLDSTART", "run_coldstart"]


def _ints(items) -> list[int]:
    try:
        out = [int(x) for x in items]
    except ValueError:
        raise ValueError(f"probe counts must be integers, got {list(items)}") from None
    if not out or min(out) < 1:
        raise ValueError(f"probe counts must be positive integers, got {list(items)}")
    if len(set(out)) < len(out):
        raise ValueError(f"probe counts must differ (each is one row per LLM and seed), got "
                         f"{list(items)}")
    return out


def run_coldstart(data, settings: dict) -> RunOutcome:
    """Run the protocol on ``data`` for every router of ``settings`` and write its files."""
    from ...coldstart.protocol import (check_cold_llms, coldstart_rows,  # noqa: PLC0415
                                       parse_cold_llms, plot_curves, summarise)
    from ...router_spec import resolve_router  # noqa: PLC0415
    seed = settings["seed"]
    train, test = train_test_parts(data, settings.get("split_column"), seed)
    cold = parse_cold_llms(settings["cold_llms"], train.llm_names, seed=seed)
    check_cold_llms(train, test, cold)  # before any fit
    ks = _ints(settings["probes"])
    notes = _probe_notes(train, cold, ks)
    strategies = list(settings["probe_strategy"])
    n_seeds = settings["n_seeds"]
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1:
        raise ValueError(f"--n-seeds must be a whole number >= 1, got {n_seeds!r}")
    seeds = list(range(seed, seed + n_seeds))
    frames = []
    for name in settings["routers"]:
        def make(name=name):
            return resolve_router(name, encoder=settings.get("encoder"))[0]
        frames.append(coldstart_rows(train, test, make, router=name, cold_llms=cold, ks=ks,
                                     strategies=strategies, seeds=seeds,
                                     progress=settings.get("progress", True)))
    rows = pd.concat(frames, ignore_index=True)
    rows.insert(0, "protocol", "coldstart")
    rows.insert(0, "dataset", data.name)
    summary = summarise(rows)
    with atomic_dir(settings["out"]) as tmp:
        rows.to_csv(tmp / "metrics.csv", index=False)
        summary.to_csv(tmp / "summary.csv", index=False)
        if settings.get("plots", True):
            plot_curves(summary, tmp / "coldstart_curves.png")
        (tmp / "config.json").write_text(json.dumps({
            "protocol": "coldstart", "routers": list(settings["routers"]), "cold_llms": cold,
            "probes": ks, "strategies": strategies, "seeds": seeds, "n_train": train.n_queries,
            "n_test": test.n_queries, "notes": notes}, indent=2))
    shown = summary[summary["metric"].isin(["score_mae", "route_gap", "cell_auc", "cell_rmse"])]
    table = shown.pivot_table(index=["router", "strategy", "k"], columns="metric",
                              values="mean").round(4).to_string()
    return RunOutcome(settings["out"], "".join(f"note: {n}\n" for n in notes) + table +
                      f"\nwrote {settings['out']}/metrics.csv, summary.csv, coldstart_curves.png")


def _probe_notes(train, cold, ks) -> list[str]:
    """Probe counts larger than a cold LLM's observed training queries cannot be drawn: one
    note per such LLM; an error when no count fits one of them (it would get no rows)."""
    import numpy as np  # noqa: PLC0415
    notes = []
    for c in cold:
        n = int(np.isfinite(train.scores[:, train.llm_names.index(c)]).sum())
        over = [k for k in ks if k > n]
        if len(over) == len(ks):
            raise ValueError(f"--probes {','.join(map(str, ks))}: LLM {c!r} has only {n} observed "
                             f"training queries to probe; give at least one count <= {n}")
        if over:
            notes.append(f"--probes {','.join(map(str, over))} skipped for LLM {c!r}: only {n} "
                         "observed training queries to probe")
    return notes


COLDSTART = register_protocol(Protocol(
    "coldstart", run=run_coldstart, rank=50, in_all=False,
    options=(ProtocolOption("--cold-llms", ["all"], "LLMs left out and onboarded: all, N or "
                            "NAME,NAME (default all)", "list"),
             ProtocolOption("--probes", ["10", "25", "50", "100", "200"],
                            "probe counts K (default 10,25,50,100,200)", "list"),
             ProtocolOption("--probe-strategy", ["random", "stratified", "informative", "adaptive"],
                            "probe strategies (default all four)", "list"),
             ProtocolOption("--n-seeds", 1, "seeds per cold LLM (default 1)", "positive")),
    description="leave one LLM out, onboard it from K probes; score error and routing gap"))
