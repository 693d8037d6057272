"""The ``bandit`` protocol as a record: train routers from a simulated log of one revealed LLM
per query (naive, IPS, SNIPS and DR losses), check the off-policy estimates against the full
test matrix, and optionally run the online loop (:mod:`recsys_router.feedback.bandit` holds the
computation). It runs on its own: ``recsys-router evaluate --protocol bandit`` writes
``metrics.csv``, ``summary.csv``, ``report.md``, ``config.json`` (and ``regret.csv`` /
``regret.png`` with ``--online-rounds``).

Reference: Swaminathan & Joachims, "Counterfactual Risk Minimization", ICML 2015; Dudik et al.,
"Doubly Robust Policy Evaluation and Learning", ICML 2011.
"""

from __future__ import annotations

import json

from ..io import atomic_dir
from ._base import Protocol, ProtocolOption, RunOutcome, register_protocol, train_test_parts

__all__ = ["BANDIT", "run_bandit"]

_REPORT_COLUMNS = ("mu_o", "nauc", "ope_error_ips", "ope_error_snips", "ope_error_dm",
                   "ope_error_dr", "ope_ci_covered", "ope_ess")


def run_bandit(data, settings: dict) -> RunOutcome:
    """Run the protocol on ``data`` for every router of ``settings`` and write its files."""
    from tqdm.auto import tqdm  # noqa: PLC0415

    from ...feedback.bandit import bandit_evaluate, bandit_parts, online_bandit  # noqa: PLC0415
    from ...feedback.report import plot_regret  # noqa: PLC0415
    seed = settings["seed"]
    for key, low in (("n_boot", 0), ("online_rounds", 0), ("retrain_every", 1)):
        v = settings[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"--{key.replace('_', '-')} must be a whole number >= {low}, got {v!r}")
    train, test = train_test_parts(data, settings.get("split_column"), seed)
    # the queries bandit_evaluate logs and tests (complete rows, less a router's warm-up)
    parts = bandit_parts(train, test, settings["logging_policy"], seed)
    losses = list(settings["losses"])
    encoder = settings.get("encoder")
    params = _router_params(settings.get("bandit_param") or [])
    routers = {name: (name, {**({"encoder": encoder} if encoder else {}), **params})
               for name in settings["routers"]}
    bar = tqdm(total=len(routers) * len(losses), desc="bandit",
               disable=not settings.get("progress", True))

    def step(msg):
        bar.set_postfix_str(msg)
        bar.update(1)
    rows = bandit_evaluate(train, test, routers, logging_policy=settings["logging_policy"],
                           losses=losses, seed=seed, n_boot=settings["n_boot"], progress=step)
    bar.close()
    rows.insert(0, "protocol", "bandit")
    rows.insert(0, "dataset", data.name)
    summary = rows.pivot_table(index=["router", "loss"], columns="metric",
                               values="value").reset_index()
    cols = [c for c in _REPORT_COLUMNS if c in summary]
    notes = [f"note: {n}" for n in parts.notes]
    md = [f"# bandit protocol on {data.name}", "",
          f"logging policy {settings['logging_policy']}; {parts.train.n_queries} logged "
          f"training queries (one revealed LLM each), {parts.test.n_queries} test queries "
          "scored on the full matrix.", *notes, "", "| router | loss | " + " | ".join(cols) + " |",
          "|---|---|" + "---|" * len(cols)]
    for r in summary.to_dict("records"):
        md.append(f"| {r['router']} | {r['loss']} | " +
                  " | ".join("" if r[c] != r[c] else f"{r[c]:.4f}" for c in cols) + " |")
    with atomic_dir(settings["out"]) as tmp:
        rows.to_csv(tmp / "metrics.csv", index=False)
        summary.to_csv(tmp / "summary.csv", index=False)
        if settings["online_rounds"] > 0:
            name, every = settings["routers"][0], settings["retrain_every"]
            runs = online_bandit(train, routers[name], loss=losses[-1],
                                 rounds=settings["online_rounds"], retrain_every=every, seed=seed)
            runs.to_csv(tmp / "regret.csv", index=False)
            retrained = f"retrained every {every}" if every < len(runs) else "never retrained"
            if settings.get("plots", True):
                plot_regret(runs, tmp / "regret.png",
                            f"online {name} ({losses[-1]}), {retrained}")
            last = runs.iloc[-1]
            md += [f"note: {n}" for n in _online_notes(settings["online_rounds"], every, len(runs))]
            md += ["", f"Online loop ({name}, loss {losses[-1]}, {len(runs)} rounds, "
                   f"{retrained}): cumulative regret {last['regret_policy']:.1f} vs "
                   f"{last['regret_best_fixed']:.1f} for the best fixed LLM."]
        (tmp / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
        (tmp / "config.json").write_text(json.dumps({
            "protocol": "bandit", "routers": list(settings["routers"]),
            "logging_policy": settings["logging_policy"], "losses": losses, "seed": seed,
            "n_train": parts.train.n_queries, "n_test": parts.test.n_queries,
            "notes": parts.notes}, indent=2))
    return RunOutcome(settings["out"], "\n".join(notes + md[4 + len(notes):]) +
                      f"\nwrote {settings['out']}/report.md (+ metrics.csv, summary.csv)")


def _online_notes(asked: int, every: int, ran: int) -> list[str]:
    """What the online loop did differently from ``--online-rounds`` / ``--retrain-every``:
    it streams each training query once, so it runs at most that many rounds, and it
    retrains only after ``every`` rounds.

    Example
    -------
    >>> _online_notes(1000, 500, 160)  # doctest: +NORMALIZE_WHITESPACE
    ['--online-rounds 1000: the online loop ran 160 rounds, one per complete training query',
     '--retrain-every 500 is not below the 160 rounds: the loop was never retrained (every round
     drew uniformly)']
    """
    notes = []
    if ran < asked:
        notes.append(f"--online-rounds {asked}: the online loop ran {ran} rounds, one per "
                     "complete training query")
    if every >= ran:
        notes.append(f"--retrain-every {every} is not below the {ran} rounds: the loop was "
                     "never retrained (every round drew uniformly)")
    return notes


def _router_params(items) -> dict:
    """``["max_epochs=3", ...]`` -> ``{"max_epochs": 3}`` (values read as YAML scalars).

    Example
    -------
    >>> _router_params(["max_epochs=3", "dim=8"])
    {'max_epochs': 3, 'dim': 8}
    """
    import yaml  # noqa: PLC0415
    out = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--bandit-param expects KEY=VALUE, got {item!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _parse_logging_policy(spec: str):
    from ...feedback.logging_sim import parse_logging_policy  # noqa: PLC0415 (at run time)
    return parse_logging_policy(spec)


BANDIT = register_protocol(Protocol(
    "bandit", run=run_bandit, rank=60, in_all=False,
    options=(ProtocolOption("--logging-policy", "uniform",
                            "uniform | epsilon-greedy:E (around the best single LLM) | router:NAME "
                            "(fitted on a 10%% warm-up slice, epsilon 0.1 around it); seeded",
                            check=_parse_logging_policy),
             ProtocolOption("--losses", ["naive", "ips", "snips", "dr"],
                            "logged-feedback losses to train with (default all four)", "list"),
             ProtocolOption("--n-boot", 200, "bootstrap resamples of the OPE intervals "
                            "(0 = no intervals, coverage NaN)", "count"),
             ProtocolOption("--online-rounds", 0,
                            "also run the online loop for T rounds (0 = off)", "count"),
             ProtocolOption("--retrain-every", 200,
                            "online loop: retrain on the log every B queries", "positive"),
             ProtocolOption("--bandit-param", [],
                            "KEY=VALUE hyperparameters of every router trained on the log "
                            "(e.g. max_epochs=3)", "list")),
    description="train from a simulated log of one revealed LLM per query; OPE accuracy, regret"))
