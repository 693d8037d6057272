"""Hyperparameter tuning with Optuna: LightningCLI models and registry routers.

Command line
------------
::

    recsys-router tune -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml \\
        --search configs/search/mf.yaml --n-trials 30 --metric val/aiq --direction maximize \\
        --storage sqlite:///studies.db --study-name mf-rb [--timeout S] [--seed S] \\
        [--pruner median|hyperband|none] [--out DIR] [--heartbeat-interval S]
        [--heartbeat-grace S] [--trainer.max_epochs=5 ...]
    recsys-router tune --router knn -c configs/data/synthetic.yaml --search configs/search/knn.yaml

``--direction`` defaults to the metric's: names ending in ``loss`` are minimised, metrics
of the registry (:data:`recsys_router.metrics.DIRECTIONS`: ``val/mu_o``, ``val/aiq``...) go
their declared way, any other metric needs ``--direction``; a direction that contradicts
the metric's is refused.

Arguments the command does not know (``--trainer.max_epochs=5``) are LightningCLI
overrides applied to every trial.

Search-space YAML
-----------------
A mapping from a dotted config key (a LightningCLI path such as ``model.init_args.lr``; for
a registry router ``params.<hyperparameter>``) to a parameter spec::

    model.init_args.lr:          {type: float, low: 1.0e-4, high: 1.0e-1, log: true}
    model.init_args.dim:         {type: int, low: 16, high: 128, step: 16}
    model.init_args.hidden:      {type: categorical, choices: [[], [64], [128, 64]]}
    model.init_args.loss.init_args.kind: {type: categorical, choices: [bce, listwise, bpr]}
    model.init_args.loss.init_args.temperature:
      {type: float, low: 0.1, high: 2.0, when: {model.init_args.loss.init_args.kind: [listwise, bpr]}}

* ``float``: ``low``, ``high`` (inclusive; finite, with a finite ``high - low``), optional
  ``log`` (needs ``low > 0``) or a finite ``step``.
* ``int``: the same, integers (``step`` defaults to 1).
* ``categorical``: ``choices``, a non-empty list of distinct values; scalars go to Optuna as
  they are, lists/mappings through their JSON text (decoded back before use).
* Limits: at most 10,000 ``choices`` per key, 1,000 keys per file, files of 4 MiB; YAML
  aliases (``*name``) are refused, and so is a file nesting mappings and lists more than
  :data:`~recsys_router.tuning.space.MAX_DEPTH` deep (checked on the parser's events,
  before anything is built).
* ``when`` (any type): ``{other_key: value}`` or ``{other_key: [values]}``; the parameter
  is sampled (and overridden) only when every ``other_key`` was sampled with one of those
  values. ``other_key`` must be a categorical key of the same file; cycles are rejected.
  Otherwise the base config's value stays.

Keys that decide the data splits (``data.init_args.`` ``seed``, ``split_ratios``,
``split_column``, ``val_fraction``, ``ood_tasks``, ``carve_val``, ``dataset``... see
:data:`~recsys_router.tuning.objective.SPLIT_KEYS`) are refused: trials scored on different
validation splits cannot be compared.

A wrong file is rejected before any trial with a
:class:`~recsys_router.errors.DataValidationError` naming the file and the key.

Studies
-------
* Sampler: TPE, re-seeded before each trial from ``numpy.random.SeedSequence([seed,
  trial.number])`` (one worker with the same seed repeats its trial sequence; workers, and
  studies of different seeds, never share start-up points). Trial
  ``n`` of a Lightning model trains with ``seed_everything = trial_seed(seed, n)``; a
  registry router trains with its config's ``params.seed`` (the router's default when not
  given), the same in every trial.
* Pruner: ``median`` (default) or ``hyperband`` on the epoch-wise validation metric via
  :class:`PruningCallback` (a ``pytorch_lightning`` callback; optuna-integration's one is for
  ``lightning.pytorch``); ``none`` to switch off. Routers are not pruned.
* Storage: any Optuna RDB URL, default ``sqlite:///<out>/study.db``. Workers with the same
  URL and study name share the study (``load_if_exists``); absolute SQLite paths take four
  slashes (``sqlite:////tmp/x.db``), PostgreSQL/MySQL URLs are passed through. A study
  records (user attributes ``router``, ``search_space_hash``, ``config_hash``,
  ``data_fingerprint``: the contents of the train/val splits) what it tunes and refuses a run
  of another router, search space, config or data; one made by an older version
  without them is resumed with a logged warning; one made by another tool (trials without the
  ``config``/``overrides`` trial attributes, or parameters outside the search space) is
  refused. ``best_config.yaml`` is the best of this tool's completed trials.
* Before a study is opened, the configs are built once from the search space's first values and
  the data is loaded: a config that every trial would fail on is refused without writing
  anything. A study this run created whose trials all failed (or a run stopped by a config
  error in a trial) is removed from the storage, so the rerun with the mistake fixed is not
  refused as another run's; when no trial of the study completed, ``tune`` raises
  :class:`~recsys_router.tuning.run.NoTrialCompleted` (exit 2) and writes no
  ``best_config.yaml``.
* ``--n-trials`` is the study total (trials of every state, all workers and earlier runs):
  a rerun after a kill runs only what is left, a rerun with a larger value extends. A trial
  still RUNNING in a killed process is failed once its heartbeat is older than
  ``--heartbeat-grace`` seconds (default 180; heartbeats every ``--heartbeat-interval``,
  default 60), re-queued with the same parameters (up to 3 times) and not counted; a worker
  that has spent the budget waits for other RUNNING trials to finish or go stale, so a
  restarted worker completes every trial. When two workers ask in the same instant, the one
  past the total is not trained and is recorded FAIL with user attribute ``over_budget``.
* Trial user attributes: ``overrides``, ``config`` (full merged YAML), ``metrics``,
  ``seed``, ``checkpoint_path``/``best_checkpoint_path``/``trial_dir`` (Lightning), ``error``.

Outputs (``--out``, default ``tuning/<study-name>``; a study name holding ``/``, ``\\``
or ``..`` then is refused, and one with control characters always): ``best_config.yaml`` (runs with
``recsys-router fit -c DIR/best_config.yaml``; for a router: ``router``/``params``/``data``),
``trials.csv``, ``history.png``, ``importance.png`` (when >= 2 completed trials vary), and
``trials/trial_NNNN/`` (checkpoints and CSV logs). A summary table of the top trials is
printed at the end.
"""

from .objective import LightningObjective, RouterObjective, TrialFailed, TuningConfigError
from .pruning import PruningCallback
from .report import best_trial, summary_table, write_best_config, write_plots, write_trials_csv
from .run import NoTrialCompleted, TuneResult, default_storage, tune
from .space import Param, SearchSpace, load_search_space, parse_search_space
from .study import PRUNERS, TrialSeededSampler, make_pruner, make_storage, open_study, run_study

__all__ = ["tune", "TuneResult", "NoTrialCompleted", "default_storage", "Param", "SearchSpace", "load_search_space",
           "parse_search_space", "PruningCallback", "LightningObjective", "RouterObjective",
           "TrialFailed", "TuningConfigError", "TrialSeededSampler", "make_pruner", "make_storage",
           "open_study", "run_study", "PRUNERS", "best_trial", "summary_table", "write_best_config",
           "write_plots", "write_trials_csv"]
