"""Protocol orchestration: fit each router once per fold, sweep its operating points on
every candidate pool, and record one decision per (setting, query).

Metrics are then computed from the decision table alone (:func:`metrics_from_decisions`),
so every reported number can be recomputed by anyone holding ``decisions.parquet``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..router import Router
from .embedding import share_encoder
from .recompute import metrics_from_decisions
from .settings import (argmax_settings, budget_settings, query_prob_entropy, threshold_settings,
                       wtp_settings)
from .splits import complete_queries, make_folds, resolve_pools

__all__ = ["EvalConfig", "EvalResult", "evaluate", "PROTOCOLS", "DECISION_COLUMNS", "parse_protocols"]

log = logging.getLogger(__name__)

PROTOCOLS = ("routereval", "routerbench", "orbit", "routellm")
DECISION_COLUMNS = ["dataset", "protocol", "pool", "group", "fold", "router", "setting",
                    "setting_value", "query_id", "llm", "score", "cost", "prob_entropy"]
#: prefix of the decision rows that record each single LLM (the reference points)
LLM_PREFIX = "LLM:"


def parse_protocols(text: str | Sequence[str]) -> list[str]:
    """``"all"`` or a comma list of protocol names -> validated list."""
    items = text.split(",") if isinstance(text, str) else list(text)
    items = [s.strip().lower() for s in items if s.strip()]
    if "all" in items:
        return list(PROTOCOLS)
    bad = [s for s in items if s not in PROTOCOLS]
    if bad or not items:
        raise ValueError(f"unknown protocol(s) {bad}; valid: {', '.join(PROTOCOLS)}, all")
    return list(dict.fromkeys(items))


@dataclass
class EvalConfig:
    """What to evaluate; mirrors the ``recsys-router evaluate`` options.

    Parameters
    ----------
    routers : list of str or Router
        Registry names (see ``recsys_router.registry.available_routers``), or configured
        :class:`~recsys_router.router.Router` instances (cloned and fitted per fold,
        labelled by class name).
    protocols : list of str
        Subset of :data:`PROTOCOLS`.
    pools : list
        Pool sizes (int) and/or ``"all"``.
    groups : list of str, optional
        Candidate groups to keep for sized pools (default: all three).
    split, split_column, ood_tasks, folds : see :func:`~recsys_router.evaluation.splits.make_folds`
    encoder : str or Encoder, optional
        Encoder (name or instance) given to every router with an ``encoder`` parameter;
        by default each router's own. Either way the dataset's texts are embedded once
        per encoder and shared by all routers and folds.
    p : float, optional
        ``p`` of the ``r_o`` router.
    seed : int
    router_params : dict, optional
        Extra constructor parameters per router name.
    reference_score : float, optional
        Reference score for RouterEval's V_R (default: the paper's value when the dataset is
        a RouterEval benchmark). Recorded in the metrics as router ``LLM:reference``, metric ``reference_score``.
    routellm_pair : (strong, weak), optional
        LLM names for the RouteLLM protocol; default (best train mean, cheapest other).
    n_wtp, n_thresholds, max_budgets : int
        Sweep sizes.
    """

    routers: list
    protocols: list[str] = field(default_factory=lambda: list(PROTOCOLS))
    pools: list = field(default_factory=lambda: ["all"])
    groups: list[str] | None = None
    split: Sequence[float] | None = None
    split_column: str | None = None
    ood_tasks: Sequence[str] | None = None
    folds: int = 1
    encoder: object = None
    p: float | None = None
    seed: int = 0
    router_params: dict = field(default_factory=dict)
    routellm_pair: tuple[str, str] | None = None
    reference_score: float | None = None
    n_wtp: int = 100
    n_thresholds: int = 10
    max_budgets: int = 100


@dataclass
class EvalResult:
    """Everything an evaluation produced (see :func:`evaluate`)."""

    dataset: str
    config: EvalConfig
    decisions: pd.DataFrame
    metrics: pd.DataFrame
    curves: pd.DataFrame
    timings: pd.DataFrame
    notes: list[str]
    simulated: bool = False
    info: dict = field(default_factory=dict)


def _build_router(spec, cfg: EvalConfig, shared: dict, data: RoutingData, notes: list[str]):
    if isinstance(spec, Router):  # a configured instance: fit a fresh clone per fold
        router = type(spec)(**spec.get_params())
        user = {}
    else:
        from ..registry import make_router  # noqa: PLC0415 (the registry imports models lazily)
        user = dict(cfg.router_params.get(spec, {}))
        router = make_router(spec, **user)
    params = router.get_params()
    extra = {}
    if "encoder" in params and "encoder" not in user:
        enc = cfg.encoder if cfg.encoder is not None else params["encoder"]
        if isinstance(enc, str) or cfg.encoder is not None:
            extra["encoder"] = _shared_encoder(enc, shared, data, notes)
    if not isinstance(spec, Router):
        for key in ("seed", "random_state"):
            if key in params and key not in user:
                extra[key] = cfg.seed
        if cfg.p is not None and "p" in params and "p" not in user:
            extra["p"] = cfg.p
    return router.set_params(**extra)


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


_SCALARS = ("dataset", "protocol", "pool", "group", "fold", "router", "setting", "setting_value")


def _block(meta: dict, router: str, setting: str, value: float, qcode: np.ndarray,
           lcode: np.ndarray, choice: np.ndarray, s: np.ndarray, c: np.ndarray | None,
           ent: np.ndarray | None) -> dict:
    """One (router, setting) block of decisions: scalars plus per-query arrays.

    ``qcode`` indexes the dataset's query ids, ``lcode[choice]`` its LLM names.
    """
    n = len(qcode)
    rows = np.arange(n)
    return {**meta, "router": router, "setting": setting, "setting_value": float(value),
            "qcode": qcode, "lcode": lcode[choice], "score": s[rows, choice].astype(np.float64),
            "cost": (c[rows, choice].astype(np.float64) if c is not None else np.full(n, np.nan)),
            "prob_entropy": ent if ent is not None else np.full(n, np.nan)}


def _assemble(blocks: list[dict], query_ids: list[str], llm_names: list[str]) -> pd.DataFrame:
    """Stack decision blocks into the long table; text columns are categorical (compact)."""
    if not blocks:
        return pd.DataFrame({k: pd.Series(dtype=float if k in ("score", "cost", "prob_entropy",
                                                                "setting_value") else object)
                             for k in DECISION_COLUMNS})
    lengths = np.array([len(b["qcode"]) for b in blocks])
    cols = {}
    for key in _SCALARS:
        vals = [b[key] for b in blocks]
        if key == "fold":
            cols[key] = np.repeat(np.asarray(vals, dtype=np.int64), lengths)
        elif key == "setting_value":
            cols[key] = np.repeat(np.asarray(vals, dtype=np.float64), lengths)
        else:
            cats, codes = np.unique(np.asarray(vals, dtype=str), return_inverse=True)
            cols[key] = pd.Categorical.from_codes(np.repeat(codes, lengths), categories=list(cats))
    cols["query_id"] = pd.Categorical.from_codes(np.concatenate([b["qcode"] for b in blocks]),
                                                 categories=list(query_ids))
    cols["llm"] = pd.Categorical.from_codes(np.concatenate([b["lcode"] for b in blocks]),
                                            categories=list(llm_names))
    for key in ("score", "cost", "prob_entropy"):
        cols[key] = np.concatenate([b[key] for b in blocks])
    return pd.DataFrame({k: cols[k] for k in DECISION_COLUMNS})


def _routellm_pair(train: RoutingData, names: list[str], cfg: EvalConfig,
                   notes: list[str], where: str) -> tuple[str, str] | None:
    if cfg.routellm_pair is not None:
        strong, weak = cfg.routellm_pair
        missing = [x for x in (strong, weak) if x not in names]
        if missing:
            notes.append(f"routellm {where}: given pair LLM(s) {missing} not in this pool; skipped")
            return None
        return strong, weak
    if len(names) < 2:
        notes.append(f"routellm {where}: needs at least 2 LLMs; skipped")
        return None
    sub = train.subset(llms=names)
    mean = sub.llm_summary()["mean_score"].to_numpy()
    strong = names[int(np.nanargmax(mean))]
    if len(names) == 2:
        return strong, [n for n in names if n != strong][0]
    if train.costs is None:
        weak = names[int(np.argsort(-np.nan_to_num(mean, nan=-np.inf))[1])]
        why = "second-best train mean (no costs)"
    else:
        mc = np.nan_to_num(sub.mean_costs(), nan=np.inf)
        mc[names.index(strong)] = np.inf
        weak = names[int(np.argmin(mc))]
        why = "cheapest other LLM by mean train cost"
    notes.append(f"routellm {where}: the pool has {len(names)} LLMs; evaluated the pair strong="
                 f"{strong} (best train mean) vs weak={weak} ({why})")
    return strong, weak


def evaluate(data: RoutingData, cfg: EvalConfig, *, progress: bool = True) -> EvalResult:
    """Run every router of ``cfg`` through every protocol, pool and fold.

    Parameters
    ----------
    data : RoutingData
        The whole dataset (it is split here).
    cfg : EvalConfig
    progress : bool
        Show a tqdm bar over routers x settings.

    Returns
    -------
    EvalResult
        ``decisions`` (long, one row per decision, columns :data:`DECISION_COLUMNS`),
        ``metrics`` and ``curves`` computed from the decisions, fit/predict timings, notes.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic    # doctest: +SKIP
    >>> res = evaluate(make_synthetic(200, 4), EvalConfig(["oracle", "random"]))  # doctest: +SKIP
    """
    from tqdm.auto import tqdm  # noqa: PLC0415
    _check_routers(cfg)
    notes: list[str] = []
    protocols = list(cfg.protocols)
    if data.costs is None:
        dropped = [p for p in protocols if p in ("routerbench", "orbit")]
        if dropped:
            notes.append(f"protocol(s) {', '.join(dropped)} skipped: dataset {data.name!r} has no "
                         f"costs (and no cost proxy); they need a cost per query and LLM")
        protocols = [p for p in protocols if p not in dropped]
    folds = make_folds(data, split=cfg.split, split_column=cfg.split_column,
                       ood_tasks=cfg.ood_tasks, folds=cfg.folds, seed=cfg.seed)
    blocks, timings, truth, shared = [], [], set(), {}
    simulated = bool(data.meta.get("simulated", False))
    total = _count_steps(cfg, protocols, folds)
    bar = tqdm(total=total, desc="routers x settings", disable=not progress, unit="step")
    for fold in folds:
        keep = complete_queries(fold.test)
        test = fold.test if keep.all() else fold.test.subset(np.flatnonzero(keep))
        if not keep.all():
            notes.append(f"fold {fold.fold}: {int((~keep).sum())} test queries with unobserved "
                         f"scores dropped ({int(keep.sum())} kept)")
        qcode = pd.Index(data.query_ids).get_indexer(test.query_ids)
        pools = resolve_pools(fold.train, cfg.pools, cfg.groups, seed=cfg.seed)
        preds = {}
        for name in cfg.routers:
            label = _label(name, cfg)
            bar.set_postfix_str(f"fold {fold.fold} fit {label}")
            try:
                router = _build_router(name, cfg, shared, data, notes)
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
            except (ValueError, TypeError, RuntimeError, ImportError, KeyError) as exc:
                notes.append(f"router {label} failed on fold {fold.fold} and is left out: "
                             f"{type(exc).__name__}: {exc}")
                log.warning("router %s failed: %s", label, exc)
                continue
            finally:
                bar.update(1)
            preds[label] = (P, C, probs)
            if getattr(router, "uses_ground_truth", False):
                truth.add(label)
            timings.append({"dataset": data.name, "fold": fold.fold, "router": label,
                            "fit_s": t1 - t0, "predict_s": t2 - t1, "n_train": fold.train.n_queries,
                            "n_test": test.n_queries})
        for pool, group, names in pools:
            cols = test.llm_index(names)
            S = test.scores[:, cols]
            Ct = None if test.costs is None else test.costs[:, cols]
            meta = {"dataset": data.name, "pool": pool, "group": group, "fold": fold.fold}
            nm = pd.Index(data.llm_names).get_indexer(names)
            for proto in protocols:
                pcols = np.arange(len(names))
                pair = None
                if proto == "routellm":
                    pair = _routellm_pair(fold.train, names, cfg, notes, f"pool {pool}/{group}")
                    if pair is None:
                        continue
                    pcols = np.array([names.index(pair[0]), names.index(pair[1])])
                m = {**meta, "protocol": proto}
                for k, j in enumerate(pcols):
                    tag = ("strong" if k == 0 else "weak") if proto == "routellm" else "single"
                    blocks.append(_block(m, LLM_PREFIX + names[j], tag, np.nan, qcode, nm,
                                         np.full(len(qcode), j), S, Ct, None))
                for label, (P, C, probs) in preds.items():
                    Pp, Cp = P[:, cols], (None if C is None else C[:, cols])
                    ent = None
                    if proto == "routereval" and probs is not None:
                        ent = query_prob_entropy(np.asarray(probs, dtype=np.float64)[:, cols])
                    if proto == "routereval":
                        sname, pts = argmax_settings(Pp, Cp)
                    elif proto == "routerbench":
                        sname, pts = wtp_settings(Pp, Cp, cfg.n_wtp)
                    elif proto == "orbit":
                        sname, pts = budget_settings(Pp, Cp, cfg.max_budgets)
                    else:
                        sname, pts = threshold_settings(Pp, int(pcols[0]), int(pcols[1]),
                                                        cfg.n_thresholds)
                    for value, choice in pts:
                        blocks.append(_block(m, label, sname, value, qcode, nm, choice, S, Ct,
                                             ent))
                    bar.update(1)
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
            "protocols_run": protocols, "llms": data.llm_names,
            "ground_truth_routers": sorted(truth)}
    return EvalResult(data.name, cfg, decisions, metrics, curves, pd.DataFrame(timings), notes,
                      simulated, info)


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


def _count_steps(cfg: EvalConfig, protocols: list[str], folds) -> int:
    n_pools = sum(1 if p == "all" else len(cfg.groups or ("a", "b", "c")) for p in cfg.pools)
    return len(folds) * len(cfg.routers) * (1 + n_pools * len(protocols))
