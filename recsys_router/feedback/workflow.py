"""Feedback workflows behind ``recsys-router ope``: read a decision log from wherever it is
kept, build the target router (an exported artifact, or a registry router trained on the log)
and write the off-policy evaluation report."""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["load_log", "parse_target_policy", "run_ope", "export_log", "LOG_DB_SUFFIXES"]

#: file suffixes read as SQLite decision-log databases
LOG_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _is_db(spec: str) -> bool:
    return "://" in spec or Path(spec).suffix in LOG_DB_SUFFIXES


def export_log(db: str, out, *, feedback_only: bool = False) -> tuple[int, int]:
    """Write the decision log of ``db`` (joined with its feedback) to ``out`` (``.parquet`` or
    ``.csv``, atomically); returns ``(decisions, decisions with feedback)``."""
    from ..atomic import atomic_write  # noqa: PLC0415
    from .store import DecisionLog  # noqa: PLC0415
    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise ValueError(f"--out {out}: expected a .parquet or .csv file name")
    log = DecisionLog(db, read_only=True, flag="--db")   # a missing SQLite file: MissingLog
    try:
        frame = log.read(with_feedback_only=feedback_only)
    finally:
        log.dispose()
    with atomic_write(out) as tmp:
        if out.suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:  # CRLF line ends: Python's csv then quotes every field holding a \r or \n (a
            # bare \r, left unquoted under \n line ends, read back as a line end: the record split)
            frame.to_csv(tmp, index=False, lineterminator="\r\n")
    return len(frame), int(frame["feedback_at"].notna().sum())


def load_log(spec: str, *, max_bytes: int | None = None, max_records: int | None = None):
    """Logged-feedback RoutingData from a database URL, an exported log file or a long table.

    A file is read under the long-table loader's read limits (:class:`~recsys_router.datasets.
    _limits.ReadLimits`: ``max_bytes``, default 4 GiB, of decompressed text or of a parquet
    footer's uncompressed size, and ``max_records``, default 50 million, records), whether
    it is a decision log (``.csv``, ``.csv.gz``, ``.parquet``) or a long table; more is
    refused with an error naming the file and the limit. A database holding more than
    ``max_records`` decisions is refused before they are read; its errors name it with its
    password masked.
    """
    from ..datasets._common import read_csv, read_parquet  # noqa: PLC0415
    from ..datasets._limits import ReadLimits, too_many_records  # noqa: PLC0415
    from ..datasets.generic import _header, load_generic  # noqa: PLC0415
    from .logged import log_to_data  # noqa: PLC0415
    from .store import DecisionLog  # noqa: PLC0415
    limits = ReadLimits.of(max_bytes, max_records)
    spec = str(spec)
    if _is_db(spec.strip()):   # a database spelled with spaces around it, as the writer takes it
        log = DecisionLog(spec.strip(), read_only=True, flag="--log")   # never creates a file
        try:  # the read limit counts decisions, as a file's counts its records
            n = log.counts()[0]
            if n > limits.max_records:
                raise too_many_records(log.shown, limits.max_records, n)
            # errors name the database without its password
            return log_to_data(log.read(), source=log.shown)
        finally:
            log.dispose()
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"log {spec}: no such file")
    # the column names only (the long-table loader's header reader); a log is read once, a
    # CSV through the loaders' reader: an extra field per record, a header naming a column
    # twice or text that is not UTF-8 is an error naming the line, never shifted columns
    cols = _header(path) if path.suffix in (".parquet", ".csv", ".gz") else []
    if "decision_id" in cols and "chosen" in cols:
        frame = read_parquet(path, limits=limits) if path.suffix == ".parquet" \
            else read_csv(path, limits=limits, **_csv_log_options(cols))
        return log_to_data(frame, source=str(path))
    return load_generic(path, max_bytes=limits.max_bytes, max_records=limits.max_records)


def _csv_log_options(cols: list[str]) -> dict:
    """``read_csv`` options for an exported decision log with columns ``cols``: its text columns
    (:data:`~recsys_router.feedback.store.TEXT_COLUMNS`: a task label "NA", "null" or "1", a
    query "None") read as text, where only an empty cell (how ``log export`` writes nothing)
    is no value; the other columns with pandas' usual missing-number words.

    Example
    -------
    >>> o = _csv_log_options(["task", "propensity"])
    >>> o["dtype"], o["na_values"]["task"], "NA" in o["na_values"]["propensity"]
    ({'task': <class 'str'>}, [''], True)
    """
    from ..datasets._common import csv_na_options  # noqa: PLC0415
    from .store import TEXT_COLUMNS  # noqa: PLC0415
    return csv_na_options(cols, number=[c for c in cols if c not in TEXT_COLUMNS], text=TEXT_COLUMNS)


def parse_target_policy(text: str) -> dict:
    """``argmax``, ``wtp:LAMBDA`` or ``budget:C`` -> the policy keyword of the target router.

    ``LAMBDA`` must be a finite number >= 0 (``wtp:inf`` or ``wtp:1e400``, which reads as
    inf, is refused here, as :func:`~recsys_router.policies.check_wtp` would refuse it only
    after the log was read and a router trained); ``C`` a number >= 0, ``inf`` included (no
    budget).

    Example
    -------
    >>> parse_target_policy("argmax"), parse_target_policy("budget:0.5")
    ({}, {'budget': 0.5})
    >>> parse_target_policy("wtp:inf")
    Traceback (most recent call last):
    ...
    ValueError: policy must be argmax, wtp:LAMBDA (a finite number >= 0) or budget:C (a number >= 0, inf for no budget), got 'wtp:inf'
    """
    kind, _, val = str(text).partition(":")
    if kind == "argmax" and not val:
        return {}
    if kind in ("wtp", "budget"):
        try:
            v = float(val)
        except ValueError:
            v = -1.0
        if v >= 0 and (kind == "budget" or math.isfinite(v)):
            return {kind: v}
    raise ValueError("policy must be argmax, wtp:LAMBDA (a finite number >= 0) or budget:C "
                     f"(a number >= 0, inf for no budget), got {text!r}")


def run_ope(log_spec: str, router: str, out, *, loss: str | None = None, params: dict | None = None,
            policy: str = "argmax", dm_router: str = "ridge", n_boot: int = 200,
            seed: int = 0) -> str:
    """Off-policy evaluation of ``router`` on a decision log; writes ``report.md``, ``ope.csv``
    and ``ope.png`` into ``out`` (atomically) and returns the report text.

    ``router`` is an exported artifact folder (evaluated as it is) or a registry name, trained
    on the log itself by the ``logged`` wrapper with ``loss`` (default ``dr``; an in-sample
    estimate) and ``params``. An artifact is not trained, so ``loss`` and ``params`` given
    with one are refused rather than ignored.
    """
    from ..evaluation.io import atomic_dir, check_out_dir  # noqa: PLC0415
    from ..router_spec import is_artifact_dir, resolve_router  # noqa: PLC0415
    from .report import evaluate_on_log, ope_markdown, plot_ope  # noqa: PLC0415
    check_out_dir(out)  # refused before the work, not after it
    kw = parse_target_policy(policy)
    if is_artifact_dir(router) and (loss is not None or params):
        given = [x for x, on in (("--loss", loss is not None), ("--param", bool(params))) if on]
        raise ValueError(f"{' and '.join(given)} cannot apply to artifact {router}: an exported "
                         "router is evaluated as it is (they train a registry --router on the log)")
    loss = "dr" if loss is None else loss
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
    text = ope_markdown(table, title, n_boot=n_boot)
    with atomic_dir(out) as tmp:
        table.to_csv(tmp / "ope.csv", index=False)
        (tmp / "report.md").write_text(text, encoding="utf-8")
        plot_ope(table, tmp / "ope.png", "Off-policy estimates (95% bootstrap intervals)" if n_boot
                 else "Off-policy estimates (no intervals: n_boot = 0)")
    return text
