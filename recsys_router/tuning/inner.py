"""``evaluate --auto N``: an inner Optuna search per router on the training queries only.

:class:`AutoTunedRouter` wraps a registry router. ``fit(train)`` holds out a seeded share of
each task's training queries, scores the router's defaults and ``N`` Optuna trials (TPE,
seeded) drawn from its search space in ``configs/search/<name>.yaml`` on those held-out
queries, and refits the best setting (the defaults unless a trial beats them) on all training
queries. The test queries of the evaluation are never seen.

The score of a setting (``objective``): ``"mu_o"`` is the mean true score of its argmax
choices among each held-out query's observed LLMs; ``"nauc"`` is ORBIT's nAUC of its budget
sweep on the held-out queries (:func:`held_out_nauc`; data with a cost on every observed
cell), the cost-quality trade-off that the argmax score does not see; ``"auto"`` (the
default) picks ``nauc`` where the training data has costs and ``mu_o`` elsewhere, which is
what the safe fallback around a tuned router compares by default too. Scored by mu_o on
routerbench_zs, the search gave up nAUC (``nirt`` -0.0165, ``graph`` -0.0103 over five
folds); scored by nAUC, with the fallback judging by nAUC as well, ``nirt`` gained +0.0106
and ``mf`` +0.0092 with no mu_o loss above 0.0003 (``benchmarks/README.md``).

Search-file keys are mapped to the registry router's flat parameters: ``params.k`` -> ``k``,
``model.init_args.dim`` -> ``dim``, ``model.init_args.loss.init_args.kind`` -> ``loss``,
other ``...loss.init_args.<x>`` -> ``<x>``. A key the router does not take is an error
naming it (a search file that tunes nothing there would be silently ignored otherwise).

Reference: Akiba et al., "Optuna: A Next-generation Hyperparameter Optimization Framework",
KDD 2019 (TPE sampler).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data import RoutingData
from ..inner_validation import (AUTO_INNER_FOLDS, check_inner_folds, inner_splits,
                                realised_scores)
from ..router import Router
from ..router_state import InnerRouterState
from ..state import FLOAT, INT, JSON_ANY, STR, DictOf, ListOf, Opt, StateError
from ..sweep_check import has_costs, held_out_nauc
from .space import SearchSpace, load_search_space

__all__ = ["AutoTunedRouter", "search_space_path", "has_search_space", "flat_key", "SEARCH_DIR",
           "OBJECTIVES", "has_costs", "held_out_nauc"]

#: where the search spaces live (``configs/search`` of the checkout)
SEARCH_DIR = Path(__file__).resolve().parents[2] / "configs" / "search"
MAX_TRIALS = 1000
#: ``AutoTunedRouter(objective=)`` (default ``auto``): ``auto`` is ``nauc`` where
#: :func:`has_costs`, else ``mu_o``
OBJECTIVES = ("auto", "mu_o", "nauc")


def search_space_path(name: str, folder: Path | None = None) -> Path:
    """The search file of registry router ``name`` (``two-tower`` -> ``two_tower.yaml``).

    Raises
    ------
    FileNotFoundError
        Naming the files looked for.
    """
    folder = Path(folder) if folder is not None else SEARCH_DIR
    tried = [folder / f"{name}.yaml", folder / f"{name.replace('-', '_')}.yaml"]
    for p in tried:
        if p.is_file():
            return p
    raise FileNotFoundError(f"no search space for router {name!r}: looked for "
                            f"{', '.join(str(p) for p in tried)}")


def has_search_space(name: str) -> bool:
    """Whether registry router ``name`` has a search file (see :func:`search_space_path`)."""
    try:
        search_space_path(name)
    except FileNotFoundError:
        return False
    return True


def flat_key(key: str) -> str:
    """A search-file key as the registry router's parameter name.

    Example
    -------
    >>> [flat_key(k) for k in ("params.k", "model.init_args.lr",
    ...                        "model.init_args.loss.init_args.kind",
    ...                        "model.init_args.loss.init_args.logit_adjust")]
    ['k', 'lr', 'loss', 'logit_adjust']
    """
    for prefix in ("params.", "model.init_args."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    if key.startswith("loss.init_args."):
        key = key[len("loss.init_args."):]
        return "loss" if key == "kind" else key
    return key


class AutoTunedRouter(InnerRouterState, Router):
    """A registry router whose hyperparameters are searched on held-out training queries.

    Parameters
    ----------
    name : str
        Registry name.
    params : dict, optional
        Fixed constructor parameters (the encoder, the seed...); searched ones override them.
    n_trials : int
        Optuna trials besides the defaults.
    val_fraction : float
        Share of each task's training queries held out for scoring.
    seed : int
        Seeds the split and the sampler.
    search_dir : str, optional
        Folder of the search files (default :data:`SEARCH_DIR`).
    objective : {"mu_o", "nauc", "auto"}
        What a setting is scored by on the held-out queries: ``mu_o`` (mean true score of
        its argmax choices), ``nauc`` (:func:`held_out_nauc`; needs :func:`has_costs`), or
        ``auto`` (default): ``nauc`` where the training data has costs, else ``mu_o``.
    inner_folds : int or "auto"
        1: each setting is scored on one held-out ``val_fraction`` of each task's queries;
        k >= 2 (at most :data:`~recsys_router.inner_validation.MAX_INNER_FOLDS`): on the
        pooled held-out predictions of k task-stratified folds, each fitted on the other
        k - 1 (k fits per setting). ``"auto"`` (default): ``AUTO_INNER_FOLDS`` (5) when the
        router's fit is cheap (``cheap_fit``), else 1.

    Attributes
    ----------
    router_ : Router
        The refitted best router.
    best_params_ : dict
        The searched parameters chosen (empty: the defaults won).
    objective_ : str
        The objective used, ``mu_o`` or ``nauc``.
    inner_folds_ : int
        The inner folds used (1: one held-out split).
    default_score_, best_score_ : float
        Held-out objective of the defaults and of the chosen setting; NaN when no search
        ran (``n_trials=0``, too few training queries or no searchable key).
    trials_ : list of dict
        ``params``, ``score`` (or ``error``) per trial.
    skipped_keys_ : list of str
        Always empty: a search-file key this router does not take is refused (kept so that
        artifacts keep their layout).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> r = AutoTunedRouter("knn", {"encoder": "hashing"}, n_trials=2).fit(
    ...     make_synthetic(200, 3, 2, seed=0))
    >>> len(r.trials_), r.best_score_ >= r.default_score_
    (2, True)
    """

    #: exported with the refitted router as the nested part ``router_``
    #: the held-out scores are NaN when no search ran (stored as null, restored as NaN)
    _state_ = {"best_params_": DictOf(JSON_ANY, 1000), "objective_": STR,
               "default_score_": Opt(FLOAT), "inner_folds_": INT,
               "best_score_": Opt(FLOAT), "trials_": ListOf(DictOf(JSON_ANY, 10), MAX_TRIALS),
               "skipped_keys_": ListOf(STR, 1000)}

    def __init__(self, name: str, params: dict | None = None, n_trials: int = 20,
                 val_fraction: float = 0.2, seed: int = 0, search_dir: str | None = None,
                 objective: str = "auto", inner_folds: int | str = "auto"):
        self.name = name
        self.params = params
        self.n_trials = n_trials
        self.val_fraction = val_fraction
        self.seed = seed
        self.search_dir = search_dir
        self.objective = objective
        self.inner_folds = inner_folds

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        from ..registry import available_routers
        name = params.get("name")
        if name is not None and name not in available_routers():
            raise StateError(f"{where}.params.name: {str(name)[:80]!r} is not a registered router")
        if params.get("search_dir") is not None:
            raise StateError(f"{where}.params.search_dir: a stored artifact may not name a folder")
        if params.get("objective", "mu_o") not in OBJECTIVES:
            raise StateError(f"{where}.params.objective: expected one of {', '.join(OBJECTIVES)}")
        try:
            check_inner_folds(params.get("inner_folds", "auto"))
        except ValueError as exc:
            raise StateError(f"{where}.params.{exc}") from None

    @classmethod
    def _from_state(cls, params, fields, arrays):
        if fields.get("objective_") not in ("mu_o", "nauc"):
            raise StateError("AutoTunedRouter.objective_: expected 'mu_o' or 'nauc'")
        try:
            check_inner_folds(fields.get("inner_folds_"), "AutoTunedRouter.inner_folds_",
                              auto=False)
        except ValueError as exc:
            raise StateError(str(exc)) from None
        fields = {**fields, **{k: float("nan") if fields.get(k) is None else fields[k]
                               for k in ("default_score_", "best_score_")}}
        return super()._from_state(params, fields, arrays)

    def _make(self, extra: dict) -> Router:
        from ..registry import make_router
        return make_router(self.name, **{**(self.params or {}), **extra})

    def _factory_flag(self, flag: str) -> bool:
        from ..registry import router_factory
        return bool(getattr(router_factory(self.name), flag, False))

    @property
    def uses_text(self) -> bool:            # type: ignore[override]
        return self._factory_flag("uses_text")

    @property
    def cheap_fit(self) -> bool:            # type: ignore[override]
        """The tuned router's: a search of cheap fits is cheap too, so the safe fallback
        around it gets its inner folds (one held-out fifth chose the fall-back baseline by
        luck on bfcl_v1, where the defaults' five folds did not)."""
        return self._factory_flag("cheap_fit")

    def _space(self, probe: Router) -> tuple[SearchSpace, dict, list]:
        """The search space and its keys mapped to the router's parameters.

        Raises
        ------
        ValueError
            Naming every key the router does not take.
        """
        path = search_space_path(self.name, self.search_dir)
        space = load_search_space(path)
        known = set(probe.get_params())
        mapping = {key: flat_key(key) for key in space.keys}
        bad = [key for key, flat in mapping.items() if flat not in known]
        if bad:
            raise ValueError(f"{path}: {type(probe).__name__} ({self.name!r}) takes no parameter "
                             f"for search key(s) {', '.join(bad)} (as "
                             f"{', '.join(repr(flat_key(k)) for k in bad)}); remove them or fix "
                             "their names")
        return space, mapping, []

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        import optuna
        n = int(self.n_trials)
        if not 0 <= n <= MAX_TRIALS:
            raise ValueError(f"n_trials must be in [0, {MAX_TRIALS}], got {self.n_trials!r}")
        self.objective_ = self._objective(train)
        k = check_inner_folds(self.inner_folds)
        self.inner_folds_ = k if k else (AUTO_INNER_FOLDS if self.cheap_fit else 1)
        probe = self._make({})
        space, mapping, self.skipped_keys_ = self._space(probe)
        splits = inner_splits(train.tasks, self.inner_folds_, self.val_fraction, self.seed)
        self.trials_ = []
        if min(min(len(tr), len(va)) for tr, va in splits) < 5 or n == 0 or not mapping:
            self.best_params_, self.default_score_, self.best_score_ = {}, float("nan"), float("nan")
            self.router_ = probe.fit(train, val)
            return
        parts = [(train.subset(tr), train.subset(va)) for tr, va in splits]
        truth = np.concatenate([va.scores for _, va in parts]).astype(np.float64)
        truth_costs = (np.concatenate([va.costs for _, va in parts]).astype(np.float64)
                       if self.objective_ == "nauc" else None)

        def score(extra: dict) -> float:
            """The objective on the held-out predictions of every split, pooled."""
            preds, costs = [], []
            for inner_tr, inner_va in parts:
                r = self._make(extra).fit(inner_tr)
                preds.append(np.asarray(r.predict_scores(inner_va), dtype=np.float64))
                if self.objective_ == "nauc":
                    costs.append(np.asarray(r.predict_costs(inner_va), dtype=np.float64))
            pred = np.concatenate(preds)
            if self.objective_ == "nauc":
                return held_out_nauc(pred, np.concatenate(costs), truth, truth_costs)
            return float(np.nanmean(realised_scores(pred, truth)))

        self.default_score_ = score({})

        def objective(trial) -> float:
            values = space.suggest(trial)
            extra = {mapping[k]: v for k, v in values.items() if k in mapping}
            try:
                s = score(extra)
            except (ValueError, TypeError, RuntimeError) as exc:   # a bad corner of the space
                self.trials_.append({"params": extra, "error": f"{type(exc).__name__}: {exc}"})
                raise optuna.TrialPruned(str(exc)) from exc
            self.trials_.append({"params": extra, "score": s})
            return s

        logging.getLogger("optuna").setLevel(logging.WARNING)
        study = optuna.create_study(direction="maximize",
                                    sampler=optuna.samplers.TPESampler(seed=int(self.seed)))
        study.optimize(objective, n_trials=n, show_progress_bar=False)
        done = [t for t in self.trials_ if "score" in t]
        best = max(done, key=lambda t: t["score"]) if done else None
        if best is not None and best["score"] > self.default_score_:
            self.best_params_, self.best_score_ = dict(best["params"]), best["score"]
        else:
            self.best_params_, self.best_score_ = {}, self.default_score_
        self.router_ = self._make(self.best_params_).fit(train, val)

    def _objective(self, train: RoutingData) -> str:
        """``objective`` resolved on the training data (``auto`` -> ``nauc`` or ``mu_o``)."""
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}; "
                             f"got {self.objective!r}")
        costs = has_costs(train)
        if self.objective == "nauc" and not costs:
            raise ValueError("objective='nauc' needs a finite cost on every observed training "
                             "cell, not the same on all of them; this data has none, some "
                             "missing or one cost everywhere (use mu_o)")
        return "nauc" if self.objective == "nauc" or (self.objective == "auto" and costs) \
            else "mu_o"

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        return self.router_.predict_scores(data)

    def _predict_costs(self, data: RoutingData):
        # the private hook: Router.predict_costs lays an added / removed LLM's pool over it
        return self.router_.predict_costs(data)

    def _selection_probs(self, data: RoutingData):
        return self.router_.selection_probs(data)

    def summary(self) -> str:
        """One line for reports: the chosen parameters and the held-out scores."""
        self._check_fitted()
        if not self.trials_:
            return "no search (too few training queries, no trials or no searchable key)"
        chosen = self.best_params_ or "the defaults"
        what = "nAUC" if self.objective_ == "nauc" else "mean score"
        k = self.inner_folds_
        where = f"{k}-fold held-out" if k > 1 else "held-out"
        return (f"{len(self.trials_)} trials; chosen {chosen} ({where} {what} "
                f"{self.best_score_:.4f} vs defaults {self.default_score_:.4f})")
