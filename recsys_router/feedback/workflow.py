"""Feedback workflows behind ``recsys-router ope``: read a decision log from wherever it is
kept, build the target router (an exported artifact, or a registry router trained on the log)
and write the off-policy evaluation report."""

from __future__ import annotations

from pathlib import Path

__all__ = ["load_log", "parse_target_policy", "run_ope", "LOG_DB_SUFFIXES"]

#: file suffixes read as SQLite decision-log databases
LOG_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _is_db(spec: str) -> bool:
    return "://" in spec or Path(spec).suffix in LOG_DB_SUFFIXES


def load_log(spec: str):
    """Logged-feedback RoutingData from a database URL, an exported log file or a long table."""
    import pandas as pd  # noqa: PLC0415

    from .logged import log_to_data  # noqa: PLC0415
    from .store import DecisionLog  # noqa: PLC0415
    spec = str(spec)
    if _is_db(spec):
        if "://" not in spec and not Path(spec).exists():
            raise FileNotFoundError(f"log {spec}: no such SQLite file")
        return log_to_data(DecisionLog(spec).read(), source=spec)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"log {spec}: no such file")
    cols = list(pd.read_parquet(path).columns) if path.suffix == ".parquet" else \
        list(pd.read_csv(path, nrows=0).columns) if path.suffix in (".csv", ".gz") else []
    if "decision_id" in cols and "chosen" in cols:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        return log_to_data(frame, source=str(path))
    from ..datasets.generic import load_generic  # noqa: PLC0415
    return load_generic(path)


def parse_target_policy(text: str) -> dict:
    """``argmax``, ``wtp:LAMBDA`` or ``budget:C`` -> the policy keyword of the target router.

    Example
    -------
    >>> parse_target_policy("argmax"), parse_target_policy("budget:0.5")
    ({}, {'budget': 0.5})
    """
    kind, _, val = str(text).partition(":")
    if kind == "argmax" and not val:
        return {}
    if kind in ("wtp", "budget"):
        try:
            v = float(val)
        except ValueError:
            v = -1.0
        if v >= 0:
            return {kind: v}
    raise ValueError(f"policy must be argmax, wtp:LAMBDA or budget:C (>= 0), got {text!r}")


def run_ope(log_spec: str, router: str, out, *, loss: str = "dr", params: dict | None = None,
            policy: str = "argmax", dm_router: str = "ridge", n_boot: int = 200,
            seed: int = 0) -> str:
    """Off-policy evaluation of ``router`` on a decision log; writes ``report.md``, ``ope.csv``
    and ``ope.png`` into ``out`` (atomically) and returns the report text.

    ``router`` is an exported artifact folder (evaluated as it is) or a registry name, trained
    on the log itself by the ``logged`` wrapper with ``loss`` (an in-sample estimate).
    """
    from ..evaluation.io import atomic_dir  # noqa: PLC0415
    from ..router_spec import is_artifact_dir, resolve_router  # noqa: PLC0415
    from .report import evaluate_on_log, ope_markdown, plot_ope  # noqa: PLC0415
    kw = parse_target_policy(policy)
    log = load_log(log_spec)
    if is_artifact_dir(router):
        target, what = resolve_router(router)[0], f"artifact {router}"
    else:
        target, _ = resolve_router("logged", {"router": router, "params": dict(params or {}),
                                              "loss": loss, "seed": seed})
        target = target.fit(log)
        what = f"{router} trained on the log with loss {loss} (in-sample)"
    table = evaluate_on_log(target, log, n_boot=n_boot, seed=seed, dm_router=dm_router, **kw)
    title = f"Off-policy evaluation of {what}, policy {policy}, on {log.name}"
    text = ope_markdown(table, title)
    with atomic_dir(out) as tmp:
        table.to_csv(tmp / "ope.csv", index=False)
        (tmp / "report.md").write_text(text, encoding="utf-8")
        plot_ope(table, tmp / "ope.png", "Off-policy estimates (95% bootstrap intervals)")
    return text
