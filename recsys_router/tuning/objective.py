"""Trial objectives: a LightningCLI model run, or a registry router fitted on a data config.

Both sample the search space on the trial, apply the values as overrides of the base
config, train, and return the validation metric; the overrides, the full merged config and
(for Lightning) the checkpoint paths are stored as trial user attributes.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import warnings
from pathlib import Path
from typing import Any

import yaml

from ..configs import datamodule_from_config, load_yaml_configs
from .preflight import (SPLIT_KEYS, check_split_keys, preview_values, router_module_class,
                        splits_fingerprint)
from .pruning import PruningCallback
from .space import SearchSpace, flatten_keys, set_dotted
from .study import trial_seed

__all__ = ["LightningObjective", "RouterObjective", "TrialFailed", "TuningConfigError",
           "merge_yaml_configs", "ROUTER_METRICS", "LIGHTNING_METRICS", "check_metric",
           "metric_direction", "SPLIT_KEYS", "check_split_keys"]

#: what a fitted registry router reports on the validation split (``val/aiq`` needs costs)
ROUTER_METRICS = ("val/mu_o", "val/v_b", "val/e_p", "val/aiq")
#: what a RouterModule (every Lightning model of this project) logs during ``fit``
LIGHTNING_METRICS = ("val/loss", "train/loss", *ROUTER_METRICS)


def check_metric(metric, known, what: str) -> str:
    """``metric`` when it is one of ``known`` (checked before the first trial trains), else a
    :class:`TuningConfigError` listing them.

    Example
    -------
    >>> check_metric("val/aiq", ROUTER_METRICS, "a registry router")
    'val/aiq'
    >>> check_metric("val/nope", ROUTER_METRICS, "a registry router")
    Traceback (most recent call last):
    ...
    recsys_router.tuning.objective.TuningConfigError: --metric 'val/nope' is not a metric a registry router reports; expected one of ['val/mu_o', 'val/v_b', 'val/e_p', 'val/aiq']
    """
    if metric not in known:
        raise TuningConfigError(f"--metric {metric!r} is not a metric {what} reports; expected one of "
                                f"{list(known)}")
    return metric


def metric_direction(metric: str, direction: str | None = None) -> str:
    """The study direction for ``metric``: ``direction`` checked against what the metric
    declares, or (``direction`` None) the declared one.

    A metric whose last path part (``val/loss`` -> ``loss``) ends in ``loss`` is minimised;
    one in the metric registry (:data:`recsys_router.metrics.DIRECTIONS`: ``mu_o``, ``aiq``...)
    goes its declared way. Any other metric needs an explicit ``direction``.

    Raises
    ------
    TuningConfigError
        ``direction`` contradicts the metric's, or neither says which way is better.

    Example
    -------
    >>> metric_direction("val/loss"), metric_direction("val/aiq")
    ('minimize', 'maximize')
    >>> metric_direction("val/loss", "maximize")
    Traceback (most recent call last):
    ...
    recsys_router.tuning.objective.TuningConfigError: --direction maximize contradicts --metric 'val/loss': lower is better for it (drop --direction, or give --direction minimize)
    """
    from recsys_router.metrics import DIRECTIONS  # noqa: PLC0415

    if direction not in (None, "maximize", "minimize"):
        raise TuningConfigError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    name = str(metric).rsplit("/", 1)[-1]
    if name.lower().endswith("loss"):
        declared = "minimize"
    else:
        declared = {"higher": "maximize", "lower": "minimize"}.get(DIRECTIONS.get(name))
    if direction is None:
        if declared is None:
            raise TuningConfigError(f"--metric {metric!r} does not say whether higher or lower is "
                                    "better (not a loss, not in the metric registry): give "
                                    "--direction maximize or --direction minimize")
        return declared
    if declared is not None and direction != declared:
        better = "lower" if declared == "minimize" else "higher"
        raise TuningConfigError(f"--direction {direction} contradicts --metric {metric!r}: {better} "
                                f"is better for it (drop --direction, or give --direction {declared})")
    return direction


class TuningConfigError(ValueError):
    """The base config, the overrides or the metric cannot work for any trial."""


class TrialFailed(RuntimeError):
    """Training of one trial raised; the trial is recorded as FAIL and the study goes on."""


def merge_yaml_configs(paths) -> dict:
    """Deep-merge YAML config files in order (later files win), like repeated ``-c``
    (:func:`recsys_router.configs.load_yaml_configs`; a bad file is a :class:`TuningConfigError`).

    Raises
    ------
    FileNotFoundError, TuningConfigError
        A missing file, or one that is not a YAML mapping.
    """
    try:
        return load_yaml_configs(paths)
    except FileNotFoundError:
        raise
    except ValueError as exc:
        raise TuningConfigError(str(exc)) from None


def _float_metrics(metrics) -> dict[str, float]:
    return {str(k): float(v) for k, v in metrics.items()}


def _metric_value(metrics: dict[str, float], metric: str) -> float:
    if metric not in metrics:
        raise TuningConfigError(f"metric {metric!r} was not logged; available: {sorted(metrics)}")
    return metrics[metric]


class LightningObjective:
    """Objective that trains one LightningCLI model per trial (``recsys-router fit`` settings).

    Parameters
    ----------
    configs : list of path
        LightningCLI config files (``-c``), e.g. model + data (+ trainer).
    space : SearchSpace
    metric : str
        ``trainer.callback_metrics`` key after ``fit`` (the last validation epoch's value).
    out_dir : path
        Trial folders go to ``out_dir/trials/trial_NNNN`` (checkpoints, CSV logs).
    seed : int
        Trial ``n`` trains with ``seed_everything = trial_seed(seed, n)``
        (:func:`~recsys_router.tuning.study.trial_seed`: the same word as its sampler, so
        studies with different seeds share no training streams; ``seed + n`` gave trial
        ``n`` of seed 7 the training of trial ``n + 7`` of seed 0).
    overrides : list of str
        Extra LightningCLI arguments for every trial (``--trainer.max_epochs=5``).
    prune : bool
        Attach a :class:`PruningCallback` on ``metric``.

    Notes
    -----
    Trial user attributes: ``overrides`` (the sampled ``--key=value`` arguments), ``seed``,
    ``config`` (YAML of the full merged config, ready for ``recsys-router fit -c``),
    ``metrics`` (every final callback metric), ``checkpoint_path`` (last checkpoint: the
    state whose metric is the trial value), ``best_checkpoint_path``, ``trial_dir``, and
    ``error`` for a failed trial.
    """

    def __init__(self, configs, space: SearchSpace, metric: str, out_dir, seed: int = 0,
                 overrides=(), prune: bool = True):
        self.configs = [str(c) for c in configs]
        self.space = space
        self.metric = metric
        self.out_dir = Path(out_dir)
        self.seed = int(seed)
        self.overrides = list(overrides)
        self.prune = prune
        self._base = merge_yaml_configs(self.configs)
        check_split_keys(space)
        cls = router_module_class(self._base, ", ".join(self.configs))  # refused before an import
        if cls is not None:  # another LightningModule may log metrics of its own
            check_metric(metric, LIGHTNING_METRICS, f"{cls.__name__} (a RouterModule)")
        keys = flatten_keys(self._base)
        if "model" in self._base:  # class arguments not written in the files are also valid
            for key in self.space.keys:
                if key.startswith(("model.", "data.", "trainer.", "checkpoint.", "early_stopping.",
                                   "optimizer", "lr_scheduler", "seed_everything")):
                    keys.add(key)
        self.space.check_keys(keys, "the LightningCLI config")

    def user_args(self, number: int, values: dict[str, Any]) -> list[str]:
        """The arguments that define trial ``number`` (what ``best_config.yaml`` holds)."""
        args = [a for c in self.configs for a in ("-c", c)]
        return [*args, f"--seed_everything={trial_seed(self.seed, number)}", *self.overrides,
                *self.space.to_args(values)]

    def _infra_args(self, trial_dir: Path) -> list[str]:
        args = [f"--trainer.default_root_dir={trial_dir}", f"--checkpoint.dirpath={trial_dir / 'checkpoints'}",
                "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
        logger = self._base.get("trainer", {}).get("logger", "default")
        user_logger = any(a.startswith("--trainer.logger") for a in self.overrides)
        if not user_logger and (logger == "default" or (isinstance(logger, dict) and "class_path" in logger)):
            args.append(f"--trainer.logger.init_args.save_dir={trial_dir}")
        return args

    def _build(self, args: list[str], shown: list[str] | None = None):
        """The LightningCLI of ``args`` (not run); a refusal names the arguments ``shown``
        (default ``args``; the trial's, without the output folders)."""
        shown = args if shown is None else shown
        from recsys_router.errors import ConfigArgumentError  # noqa: PLC0415
        from recsys_router.lightning_cli import build_lightning_cli  # noqa: PLC0415
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*args parameter is intended.*")
                return build_lightning_cli(args, run=False)
        except SystemExit as exc:
            raise TuningConfigError("LightningCLI rejected the trial arguments "
                                    f"{shown}:\n{err.getvalue().strip()}") from exc
        except ConfigArgumentError as exc:  # the router CLI raises its argument errors
            raise TuningConfigError(f"LightningCLI rejected the trial arguments {shown}: "
                                    f"{exc}") from exc

    def preflight(self) -> str | None:
        """Build the model, data module and trainer once, from the search space's first values,
        in a folder removed afterwards (a config or override any trial would fail on is a
        :class:`TuningConfigError` before a study exists), and load the data: the fingerprint
        of its train/val splits (:func:`~recsys_router.tuning.preflight.splits_fingerprint`;
        None for a data module without ``splits``)."""
        import tempfile  # noqa: PLC0415
        with tempfile.TemporaryDirectory(prefix="recsys-tune-") as tmp:
            user = self.user_args(0, preview_values(self.space))
            cli = self._build(user + self._infra_args(Path(tmp)), user)
            splits = getattr(cli.datamodule, "splits", None)
            return splits_fingerprint(splits) if isinstance(splits, dict) else None

    def __call__(self, trial) -> float:
        import optuna

        values = self.space.suggest(trial)
        number = trial.number
        trial_dir = self.out_dir / "trials" / f"trial_{number:04d}"
        user = self.user_args(number, values)
        trial.set_user_attr("overrides", self.space.to_args(values))
        trial.set_user_attr("seed", trial_seed(self.seed, number))
        trial.set_user_attr("trial_dir", str(trial_dir))
        cli = self._build(user + self._infra_args(trial_dir), user)
        trial.set_user_attr("config", cli.parser.dump(cli.parser.parse_args(user)))
        pruner = PruningCallback(trial, self.metric) if self.prune else None
        if pruner is not None:
            cli.trainer.callbacks.append(pruner)
        try:
            cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        except optuna.TrialPruned:
            self._record_checkpoints(trial, cli.trainer)
            raise
        except Exception as exc:  # a diverging or crashing run fails this trial only
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            raise TrialFailed(f"trial {number} raised {type(exc).__name__}: {exc}") from exc
        self._record_checkpoints(trial, cli.trainer)
        metrics = _float_metrics(cli.trainer.callback_metrics)
        trial.set_user_attr("metrics", metrics)
        return _metric_value(metrics, self.metric)

    @staticmethod
    def _record_checkpoints(trial, trainer) -> None:
        from recsys_router.lightning_cli import last_checkpoint_path  # noqa: PLC0415
        ckpt = trainer.checkpoint_callback
        if ckpt is not None:
            trial.set_user_attr("checkpoint_path", last_checkpoint_path(trainer))
            trial.set_user_attr("best_checkpoint_path", ckpt.best_model_path or None)


class RouterObjective:
    """Objective that fits a registry router (``make_router``) on a data config's splits.

    Parameters
    ----------
    router : str
        Registry name (``knn``, ``als``...); a config's ``router:`` key takes its place
        when ``router`` is None.
    configs : list of path
        YAML files merged in order: an optional router file (``router:``, ``params:``,
        as in ``configs/routers/``) and a data file (``data: {class_path, init_args}``).
    space : SearchSpace
        Keys ``params.<name>`` (router hyperparameters) or ``data.init_args.<name>`` (not the
        arguments that decide the splits, :data:`SPLIT_KEYS`).
    metric : str
        ``val/mu_o``, ``val/v_b``, ``val/e_p`` or (with costs) ``val/aiq``: the same routing
        metrics the Lightning modules log, on the data module's validation split.

    Notes
    -----
    Trial user attributes: ``overrides``, ``config`` (YAML: ``router``, ``params``, ``data``)
    and ``metrics``. Data modules are cached per distinct data section within a process.
    """

    def __init__(self, router: str | None, configs, space: SearchSpace, metric: str):
        from recsys_router.registry import router_class
        self.base = merge_yaml_configs(configs)
        name = router or self.base.get("router")
        if not name:
            raise TuningConfigError("no router: pass --router NAME or a config with a 'router:' key")
        self.base["router"] = name
        self.base.setdefault("params", {})
        if not isinstance(self.base.get("data"), dict) or "class_path" not in self.base["data"]:
            raise TuningConfigError("router tuning needs a data config with 'data: {class_path: ..., "
                                    "init_args: ...}' (e.g. configs/data/synthetic.yaml)")
        check_metric(metric, ROUTER_METRICS, "a registry router")
        check_split_keys(space)
        cls = router_class(name)
        known = {f"params.{p}" for p in cls._param_names()} | flatten_keys({"data": self.base["data"]})
        known |= {k for k in space.keys if k.startswith("data.init_args.")}
        space.check_keys(known, f"router {name!r} ({cls.__name__}) or its data config")
        self.router = name
        self.space = space
        self.metric = metric
        self._dms: dict[str, Any] = {}

    def _datamodule(self, data_cfg: dict):
        key = json.dumps(data_cfg, sort_keys=True, default=str)
        if key not in self._dms:
            try:
                dm = datamodule_from_config(data_cfg, "the data config")
            except ValueError as exc:
                raise TuningConfigError(str(exc)) from None
            self._dms = {key: dm}  # keep one
        return self._dms[key]

    def _config(self, values: dict) -> dict:
        cfg = copy.deepcopy(self.base)
        for key, value in values.items():
            set_dotted(cfg, key, value)
        return cfg

    def _splits(self, cfg: dict) -> dict:
        splits = self._datamodule(cfg["data"]).splits
        if "val" not in splits:
            raise TuningConfigError("the data config has no validation split to tune on")
        return splits

    def preflight(self) -> str:
        """Load the data and build the router once, from the search space's first values (a data
        config or ``params`` every trial would fail on is a :class:`TuningConfigError` before
        a study exists; a value only some trials get is left to them): the fingerprint of the
        train/val splits (:func:`~recsys_router.tuning.preflight.splits_fingerprint`)."""
        from recsys_router.registry import make_router
        cfg = self._config(preview_values(self.space))
        splits = self._splits(cfg)
        try:
            make_router(self.router, **cfg["params"])
        except (TypeError, KeyError) as exc:  # what a trial reports as a config error too
            raise TuningConfigError(f"router {self.router!r} rejected params {cfg['params']}: "
                                    f"{exc}") from exc
        except Exception:  # noqa: BLE001 - a refused sampled value fails its trial only
            pass
        return splits_fingerprint(splits)

    def __call__(self, trial) -> float:
        from recsys_router.models.base.eval_metrics import epoch_metrics
        from recsys_router.registry import make_router

        values = self.space.suggest(trial)
        cfg = self._config(values)
        trial.set_user_attr("overrides", self.space.to_args(values))
        trial.set_user_attr("config", yaml.safe_dump(cfg, sort_keys=False))
        splits = self._splits(cfg)
        train, val = splits["train"], splits["val"]
        try:
            router = make_router(self.router, **cfg["params"]).fit(train, val)
            pred = router.predict_scores(val)
            pred_costs = router.predict_costs(val) if val.costs is not None else None
        except (TypeError, KeyError) as exc:
            raise TuningConfigError(f"router {self.router!r} rejected params {cfg['params']}: {exc}") from exc
        except Exception as exc:
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}")
            raise TrialFailed(f"trial {trial.number} raised {type(exc).__name__}: {exc}") from exc
        metrics = {f"val/{k}": float(v) for k, v in
                   epoch_metrics(pred, val.scores, val.costs, pred_costs).items()}
        trial.set_user_attr("metrics", metrics)
        value = _metric_value(metrics, self.metric)
        return value if math.isfinite(value) else float("nan")
