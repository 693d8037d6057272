"""What a finished study leaves behind: summary table, best config, trial table and plots."""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ..atomic import atomic_write
from .identity import own_trial

__all__ = ["summary_table", "write_best_config", "write_plots", "write_trials_csv", "best_trial"]

log = logging.getLogger(__name__)


def best_trial(study: optuna.Study):
    """The best COMPLETE trial of this tool (one that carries the ``config`` and ``overrides``
    trial attributes), or None when none completed.

    Example
    -------
    >>> st = optuna.create_study(direction="minimize")
    >>> st.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.1))
    >>> st.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.5,
    ...     user_attrs={"config": "a: 1", "overrides": []}))
    >>> best_trial(st).value
    0.5
    """
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if own_trial(t) and t.value is not None and not math.isnan(t.value)]
    if not done:
        return None
    sign = -1.0 if study.direction.name == "MAXIMIZE" else 1.0
    return min(done, key=lambda t: (sign * t.value, t.number))  # ties: the earliest trial


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return json.dumps(v) if not isinstance(v, str) else v


def summary_table(study: optuna.Study, top: int = 10) -> str:
    """Plain-text table of the best trials (completed by value, then pruned, failed...).

    Columns: trial number, state, value, parameters.

    Example
    -------
    >>> st = optuna.create_study(direction="maximize")
    >>> st.add_trial(optuna.trial.create_trial(params={"x": 0.5},
    ...     distributions={"x": optuna.distributions.FloatDistribution(0, 1)}, value=2.0))
    >>> print(summary_table(st))
    trial  state     value  params
    0      COMPLETE  2      x=0.5
    """
    trials = study.get_trials(deepcopy=False)
    sign = -1.0 if study.direction.name == "MAXIMIZE" else 1.0
    order = {TrialState.COMPLETE: 0, TrialState.PRUNED: 1, TrialState.RUNNING: 2,
             TrialState.WAITING: 3, TrialState.FAIL: 4}

    def shown_value(t):
        if t.value is not None:
            return t.value
        return max(t.intermediate_values.items())[1] if t.intermediate_values else None

    def key(t):
        v = shown_value(t)
        rank = math.inf if v is None or math.isnan(v) else sign * v
        return order[t.state], rank, t.number

    rows = [("trial", "state", "value", "params")]
    for t in sorted(trials, key=key)[:top]:
        value = shown_value(t)
        shown = "-" if value is None else _fmt(value)
        if t.state == TrialState.PRUNED and value is not None:
            shown += f" (epoch {max(t.intermediate_values)})"
        params = " ".join(f"{k.rsplit('.', 1)[-1]}={_fmt(v)}" for k, v in t.params.items())
        rows.append((str(t.number), t.state.name, shown, params))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip()
                     for r in rows)


def _atomic_write(path: Path, text: str) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(text)


def write_best_config(study: optuna.Study, out_dir, metric: str | None = None) -> Path | None:
    """Write the best trial's full config to ``out_dir/best_config.yaml``.

    For a Lightning study it runs as is with ``recsys-router fit -c best_config.yaml``; for a
    router study it holds ``router``, ``params`` and ``data`` (``make_router(cfg["router"],
    **cfg["params"])``). Returns None (and writes nothing) when no trial completed.
    """
    best = best_trial(study)
    if best is None or "config" not in best.user_attrs:
        return None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    head = [f"# Best trial {best.number} of study {study.study_name!r}: "
            f"{metric or 'value'} = {best.value:.6g} ({study.direction.name.lower()})"]
    for name in ("overrides", "checkpoint_path"):
        if best.user_attrs.get(name):
            head.append(f"# {name}: {json.dumps(best.user_attrs[name])}")
    path = out / "best_config.yaml"
    _atomic_write(path, "\n".join(head) + "\n" + best.user_attrs["config"])
    return path


def write_trials_csv(study: optuna.Study, out_dir) -> Path:
    """Every trial's number, state, value, duration and parameters as ``trials.csv``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = study.trials_dataframe(attrs=("number", "state", "value", "duration", "params"))
    path = out / "trials.csv"
    with atomic_write(path) as tmp:
        df.to_csv(tmp, index=False)
    return path


def write_plots(study: optuna.Study, out_dir) -> list[Path]:
    """Optimisation history (``history.png``) and, when it can be computed, parameter
    importance (``importance.png``: needs >= 2 completed trials whose parameters vary).

    Each is drawn into a temporary file beside its target and moved over it once written
    (:func:`~recsys_router.atomic.atomic_write`): a plot that fails part-way is logged and
    leaves the previous file as it was.

    Returns
    -------
    list of Path
        The files written.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    plots = [("history.png", ovm.plot_optimization_history)]
    varying = {k for t in complete for k in t.params
               if len({json.dumps(u.params.get(k)) for u in complete}) > 1}
    if len(complete) >= 2 and varying:
        plots.append(("importance.png", ovm.plot_param_importances))
    else:
        log.warning("parameter importance skipped: needs >= 2 completed trials with varying "
                    "parameters (have %d completed)", len(complete))
    for name, fn in plots:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = fn(study)
            fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            fig.tight_layout()
            try:  # a temporary beside the plot, moved over it once whole
                with atomic_write(out / name) as tmp:
                    fig.savefig(tmp, dpi=110, format="png")
            finally:
                plt.close(fig)
            written.append(out / name)
        except (ValueError, RuntimeError, ZeroDivisionError) as err:
            log.warning("could not draw %s: %s", name, err)
    return written
