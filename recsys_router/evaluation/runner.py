"""Protocol orchestration: fit each router once per fold, sweep its operating points on
every candidate pool, and record one decision per (setting, query).

Metrics are then computed from the decision table alone (:func:`metrics_from_decisions`),
so every reported number can be recomputed by anyone holding ``decisions.parquet``. What a
run is asked to do and what it returns (:class:`EvalConfig`, :class:`EvalResult`) live in
:mod:`recsys_router.evaluation.config` and are re-exported here.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..fallback import SafeFallbackRouter, fallback_summary
from ..fallback_pools import PoolPredictions, full_pool
from .wrappers import wrap_router
from ..router import Router, custom_routing
from ..router_spec import resolve_router
from ..score_scale import choose_score_scale
from .embedding import share_encoder
from ..candidate_masks import mask_predictions, reduced_pool_count, usable_rows
from .protocols import (LLM_PREFIX, PoolView, Predictions, Protocol, get_protocol,
                        parse_protocols)
from .recompute import metrics_from_decisions
# the decision table's layout and assembly; DECISION_COLUMNS re-exported (its public path)
from .decision_table import DECISION_COLUMNS, _assemble, _block, _decided
from .splits import (check_group_options, complete_queries, make_folds, resolve_pools,
                     text_overlap_note)
# the run's configuration and result, re-exported here (their public path before config.py)
from .config import EvalConfig, EvalResult

__all__ = ["EvalConfig", "EvalResult", "evaluate", "DECISION_COLUMNS"]

log = logging.getLogger(__name__)


def _build_router(spec, cfg: EvalConfig, shared: dict, data: RoutingData, notes: list[str]):
    """A fresh, unfitted router for one fold: the registry name with the run's parameters,
    encoder (embedded once, see :func:`_shared_encoder`), seed and ``p``; or a clone of a
    configured instance (which keeps its own seed)."""
    def encoder(default):
        if cfg.encoder is None and not isinstance(default, str):
            return default  # an encoder instance of the router's own: left as it is
        return _shared_encoder(cfg.encoder if cfg.encoder is not None else default, shared,
                               data, notes)
    params = None if isinstance(spec, Router) else cfg.router_params.get(spec, {})
    router, _ = resolve_router(spec, params, encoder=encoder, seed=cfg.seed,
                               defaults={"p": cfg.p}, clone=True)
    return wrap_router(router, None if isinstance(spec, Router) else spec, fallback=cfg.fallback,
                       auto=cfg.auto, auto_objective=cfg.auto_objective, seed=cfg.seed,
                       top_check=cfg.top_check, fallback_metric=cfg.fallback_metric,
                       auto_folds=cfg.auto_folds)


def _shared_encoder(name, shared: dict, data: RoutingData, notes: list[str]):
    """The dataset's texts embedded once per encoder (name or instance); the encoder itself
    when it cannot be shared (no texts, or fitted per train split)."""
    key = name if isinstance(name, str) else id(name)
    if key not in shared:
        t0 = time.perf_counter()
        enc = share_encoder(name, data)
        shared[key] = name if enc is None else enc
        if enc is not None:
            notes.append(f"query texts embedded once with encoder {enc.identity!r} "
                         f"({time.perf_counter() - t0:.1f} s), shared by every router and fold")
    return shared[key]


def _label(spec, cfg: EvalConfig) -> str:
    if isinstance(spec, Router):
        return type(spec).__name__
    return f"{spec}(p={cfg.p:g})" if (cfg.p is not None and spec == "r_o") else str(spec)


def _fit_fold(fold, cfg: EvalConfig, data: RoutingData, shared: dict, notes: list[str],
              bar) -> tuple[RoutingData, dict, list[dict], set]:
    """Fit every router on one fold and predict its test queries.

    Returns
    -------
    (test, preds, timings, truth)
        ``test`` the fold's test queries with every score observed; ``preds`` router label ->
        :class:`~recsys_router.evaluation.protocols.Predictions` over all LLMs; one timing row per
        fitted router; labels of routers that read the true test scores. A router that
        fails is left out with a note.
    """
    if cfg.missing not in ("mask", "drop"):
        raise ValueError(f"missing must be 'mask' or 'drop', got {cfg.missing!r}")
    keep = complete_queries(fold.test) if cfg.missing == "drop" else fold.test.observed.any(axis=1)
    test = fold.test if keep.all() else fold.test.subset(np.flatnonzero(keep))
    if not keep.all():
        what = "with unobserved scores" if cfg.missing == "drop" else "without any observed score"
        notes.append(f"fold {fold.fold}: {int((~keep).sum())} test queries {what} dropped "
                     f"({int(keep.sum())} kept)")
    reduced = reduced_pool_count(test.observed)
    if reduced:
        notes.append(f"fold {fold.fold}: {reduced} of {test.n_queries} test queries had reduced "
                     f"candidate pools (some LLMs unobserved): the oracle and every router chose "
                     f"among each query's observed LLMs")
    try:
        notes.append(f"score scale (fold {fold.fold} training scores): "
                     f"{choose_score_scale(fold.train.scores).describe()}")
    except ValueError:
        pass
    preds, timings, truth = {}, [], set()
    # a safe fallback decides again on each sized pool's LLMs (as a fit on them alone would)
    sized = any(p != "all" for p in cfg.pools)
    for name in cfg.routers:
        label = _label(name, cfg)
        bar.set_postfix_str(f"fold {fold.fold} fit {label}")
        try:
            router = _build_router(name, cfg, shared, data, notes)
            per_pool = sized and isinstance(router, SafeFallbackRouter)
            if per_pool:
                router.keep_inner_predictions()
            t0 = time.perf_counter()
            router.fit(fold.train, fold.val)
            t1 = time.perf_counter()
            P = router.predict_scores(test)
            C = router.predict_costs(test)
            probs = router.selection_probs(test)
            t2 = time.perf_counter()
            for what, arr in (("scores", P), ("costs", C)):
                if arr is not None and not np.isfinite(arr).all():
                    raise RuntimeError(f"predicted {what} contain NaN or infinite values")
            for_pool = PoolPredictions(router, test) if per_pool else None
        except (ValueError, TypeError, RuntimeError, ImportError, KeyError) as exc:
            notes.append(f"router {label} failed on fold {fold.fold} and is left out: "
                         f"{type(exc).__name__}: {exc}")
            log.warning("router %s failed: %s", label, exc)
            continue
        finally:
            bar.update(1)
        if isinstance(router, SafeFallbackRouter):
            notes.append(f"fold {fold.fold}: {label} safe fallback: "
                         f"{fallback_summary(router.fallback_)}")
        tuned = router.router_ if isinstance(router, SafeFallbackRouter) else router
        if hasattr(tuned, "best_params_"):
            notes.append(f"fold {fold.fold}: {label} --auto {cfg.auto}: {tuned.summary()}")
        # a router that says what it pays, or decides with its own route_indices (zero's
        # budget mix), is recorded through its own decisions at every operating point
        decided = router.own_costs or custom_routing(router)
        preds[label] = Predictions(P, C, probs, *((router.decide, router.answer_costs)
                                                  if decided else (None, None)),
                                   by_observed=custom_routing(router) and not router.own_costs,
                                   for_pool=for_pool)
        if getattr(router, "uses_ground_truth", False):
            truth.add(label)
        timings.append({"dataset": data.name, "fold": fold.fold, "router": label,
                        "fit_s": t1 - t0, "predict_s": t2 - t1, "n_train": fold.train.n_queries,
                        "n_test": test.n_queries})
    return test, preds, timings, truth


def _sweep_pool(data: RoutingData, fold, test: RoutingData, preds: dict, pool: str, group: str,
                names: list[str], protocols: list[Protocol], cfg: EvalConfig,
                notes: list[str], bar) -> list[dict]:
    """Decision blocks of one candidate pool: each protocol's reference LLM rows, then every
    router's operating points (the protocol's sweep of its predictions on the pool)."""
    qcode_all = pd.Index(data.query_ids).get_indexer(test.query_ids)
    nm = pd.Index(data.llm_names).get_indexer(names)
    cols = test.llm_index(names)
    S_all = test.scores[:, cols]
    C_all = None if test.costs is None else test.costs[:, cols]
    observed = ~np.isnan(S_all)
    blocks = []
    pooled = {}     # label -> (scores, probs): a safe fallback decided on this pool's LLMs
    if not full_pool(cols, test.n_llms):
        for label, p in preds.items():
            if p.for_pool is not None:
                scores, probs, record = p.for_pool(cols)
                pooled[label] = (scores, probs)
                notes.append(f"fold {fold.fold}: {label} safe fallback on pool {pool}/{group}: "
                             f"{fallback_summary(record)}")
    for proto in protocols:
        view = PoolView(pool, group, list(names), fold.train, cfg, notes)
        refs = proto.references(view)
        if refs is None:
            continue
        view.refs = list(refs)
        # per-query candidate masks: rows the protocol can score, unobserved LLMs avoided
        pairwise = any(role != "single" for _, role in view.refs)
        rows = usable_rows(observed, [j for j, _ in view.refs], pairwise)
        if not rows.any():
            notes.append(f"{proto.name} pool {pool}/{group} fold {fold.fold}: no test query has "
                         f"its LLMs observed; skipped")
            continue
        if not rows.all():
            notes.append(f"{proto.name} pool {pool}/{group} fold {fold.fold}: "
                         f"{int((~rows).sum())} test queries without the needed observed LLMs "
                         f"left out of this pool")
        qcode, S, obs = qcode_all[rows], S_all[rows], observed[rows]
        if proto.test_notes is not None:
            notes += [f"{proto.name} pool {pool}/{group} fold {fold.fold}: {n}"
                      for n in proto.test_notes(view, S)]
        Ct = None if C_all is None else C_all[rows]
        m = {"dataset": data.name, "pool": pool, "group": group, "fold": fold.fold,
             "protocol": proto.name}
        for j, role in view.refs:
            blocks.append(_block(m, LLM_PREFIX + names[j], role, np.nan, qcode, nm,
                                 np.full(len(qcode), j), S, Ct, None))
        for label, p in preds.items():
            scores, probs = pooled[label] if label in pooled else (
                p.scores[:, cols], None if p.probs is None else np.asarray(p.probs)[:, cols])
            ps, pc = mask_predictions(scores[rows],
                                      None if p.costs is None else p.costs[rows][:, cols], obs)
            pred = Predictions(ps, pc, None if probs is None
                               else np.asarray(probs, dtype=np.float64)[rows])
            sweep = proto.sweep(pred, view)
            points = [(v, ch, None) for v, ch in sweep.points] if p.decide is None else \
                _decided(p.decide, test, rows, cols, names, sweep, p.answer_costs,
                         obs if p.by_observed else None)
            for value, choice, paid in points:
                blocks.append(_block(m, label, sweep.setting, value, qcode, nm, choice, S, Ct,
                                     sweep.prob_entropy, paid))
            bar.update(1)
    return blocks


def evaluate(data: RoutingData, cfg: EvalConfig, *, progress: bool = True) -> EvalResult:
    """Run every router of ``cfg`` through every protocol, pool and fold.

    Parameters
    ----------
    data : RoutingData
        The whole dataset (it is split here).
    cfg : EvalConfig
    progress : bool
        Show a tqdm bar over routers x settings (and the encoders' bars; False hides both).

    Returns
    -------
    EvalResult
        ``decisions`` (long, one row per decision, columns :data:`DECISION_COLUMNS`),
        ``metrics`` and ``curves`` computed from the decisions, fit/predict timings, notes.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> res = evaluate(make_synthetic(120, 4, seed=0), EvalConfig(["oracle", "best-single"],
    ...                protocols=["routereval"]), progress=False)
    >>> res.metrics.query("router == 'oracle' and metric == 'v_b'")["value"].item() >= 1.0
    True
    """
    from ..encoders.base import progress_bars  # noqa: PLC0415
    with progress_bars(progress):
        return _evaluate(data, cfg, progress)


def _evaluate(data: RoutingData, cfg: EvalConfig, progress: bool) -> EvalResult:
    from tqdm.auto import tqdm  # noqa: PLC0415
    _check_routers(cfg)
    from ..pools import METHODS  # noqa: PLC0415
    if cfg.group_method not in METHODS:
        raise ValueError(f"group_method must be one of {', '.join(METHODS)}, got "
                         f"{cfg.group_method!r}")
    check_group_options(cfg.pools, cfg.groups, cfg.group_method)  # before any fit
    notes: list[str] = []
    protocols = [get_protocol(p) for p in parse_protocols(cfg.protocols)]
    alone = [p.name for p in protocols if p.run is not None]
    if alone:
        raise ValueError(f"protocol(s) {alone} run on their own procedure, not in evaluate(): "
                         f"call get_protocol(name).run(data, settings)")
    if data.costs is None:
        dropped = [p.name for p in protocols if p.needs_costs]
        if dropped:
            notes.append(f"protocol(s) {', '.join(dropped)} skipped: dataset {data.name!r} has no "
                         f"costs (and no cost proxy); they need a cost per query and LLM")
        protocols = [p for p in protocols if not p.needs_costs]
    folds = make_folds(data, split=cfg.split, split_column=cfg.split_column,
                       ood_tasks=cfg.ood_tasks, folds=cfg.folds, seed=cfg.seed)
    # every fold's candidate pools before any router is fitted: a pool size the data cannot
    # form (more LLMs than the data has, or than qualify on a fold's training part) stops the
    # run here, not after minutes of fitting
    fold_pools = [resolve_pools(fold.train, cfg.pools, cfg.groups, seed=cfg.seed, notes=notes,
                                method=cfg.group_method) for fold in folds]
    blocks, timings, truth, shared = [], [], set(), {}
    total = _count_steps(cfg, protocols, folds)
    bar = tqdm(total=total, desc="routers x settings", disable=not progress, unit="step")
    for i, fold in enumerate(folds):
        overlap = text_overlap_note(fold)  # splits are by id: same-text leaks are only noted
        if overlap:
            notes.append(overlap)
        test, preds, fold_timings, fold_truth = _fit_fold(fold, cfg, data, shared, notes, bar)
        timings += fold_timings
        truth |= fold_truth
        for pool, group, names in fold_pools[i]:
            blocks += _sweep_pool(data, fold, test, preds, pool, group, names, protocols, cfg,
                                  notes, bar)
        # the steps of a failed router, a skipped protocol or a group that could not be formed
        # count as done, so the bar ends full
        bar.update(max(0, total * (i + 1) // len(folds) - bar.n))
    bar.close()
    decisions = _assemble(blocks, data.query_ids, data.llm_names)
    metrics, curves = metrics_from_decisions(decisions, reference_score=cfg.reference_score)
    if truth:
        notes.append(f"router(s) {', '.join(sorted(truth))} read the test queries' true scores: "
                     f"upper bounds for comparison, not deployable routers")
    if cfg.router_params:
        notes.append(f"router parameters set for this run: {cfg.router_params}")
    notes = list(dict.fromkeys(notes))  # the same note from several folds once
    info = {"n_queries": data.n_queries, "n_llms": data.n_llms, "folds": len(folds),
            "protocols_run": [p.name for p in protocols], "llms": data.llm_names,
            "ground_truth_routers": sorted(truth)}
    return EvalResult(data.name, cfg, decisions, metrics, curves, pd.DataFrame(timings), notes,
                      bool(data.meta.get("simulated", False)), info)


def _check_routers(cfg: EvalConfig) -> None:
    """Unknown registry names and duplicate labels are errors before anything is fitted."""
    if not cfg.routers:
        raise ValueError("no routers to evaluate")
    names = [r for r in cfg.routers if not isinstance(r, Router)]
    if names:
        from ..registry import available_routers, router_factory  # noqa: PLC0415
        bad = []
        for n in names:
            try:
                router_factory(n)
            except KeyError:
                bad.append(n)
        if bad:
            raise ValueError(f"unknown router(s) {bad}; available: "
                             f"{', '.join(available_routers())}")
    labels = [_label(r, cfg) for r in cfg.routers]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"router(s) {dup} given more than once")
    pair = cfg.routellm_pair
    if pair is not None and (len(pair) != 2 or pair[0] == pair[1]):
        raise ValueError(f"routellm_pair needs two different LLM names (strong, weak), got {pair}")


def _count_steps(cfg: EvalConfig, protocols: list, folds) -> int:
    """Progress steps planned: per fold, one fit per router and one sweep per router,
    protocol and (pool, group); :func:`evaluate` counts those that do not happen as done at
    the end of their fold."""
    n_pools = sum(1 if p == "all" else len(cfg.groups or ("a", "b", "c")) for p in cfg.pools)
    return len(folds) * len(cfg.routers) * (1 + n_pools * len(protocols))
