"""Fitting RouteJudge's routers (specs resolved by :func:`recsys_router.router_spec.resolve_router`)
and the judge's train/test split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from ..data import RoutingData
from ..router import Router
from ..router_spec import resolve_router

__all__ = ["fit_routers", "parse_router_params", "train_test", "judge_pool", "replay_train"]


def fit_routers(specs, train: RoutingData, val: RoutingData | None = None,
                params: Mapping[str, Mapping] | None = None, progress: bool = False, *,
                seed: int | None = None) -> dict[str, Router]:
    """Resolve and (when needed) fit every router.

    Parameters
    ----------
    specs : sequence of str/Router, or mapping display name -> spec
    train, val : RoutingData
    params : mapping name -> constructor parameters (for registry names)
    seed : int, optional
        Given as ``seed`` / ``random_state`` to every registry router that takes one and
        whose ``params`` do not set it (as ``evaluate --seed`` does); None keeps each
        router's own default. Router objects and artifact folders keep theirs.

    Returns
    -------
    dict display name -> fitted Router
    """
    if isinstance(specs, Mapping):
        items = list(specs.items())
    else:
        items = [(s if isinstance(s, str) else type(s).__name__, s) for s in specs]
    names = [n for n, _ in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"router names must be unique, repeated: {dup}")
    if len(items) < 1:
        raise ValueError("give at least one router")
    out = {}
    it = items
    if progress:
        from tqdm import tqdm  # noqa: PLC0415
        it = tqdm(items, desc="fitting routers", unit="router")
    for name, spec in it:
        router, needs_fit = resolve_router(spec, (params or {}).get(name), seed=seed)
        if needs_fit:
            router.fit(train, val)
        if list(router.llm_names_) != list(train.llm_names):
            raise ValueError(f"router {name!r} knows LLMs {router.llm_names_}, but the data has "
                             f"{train.llm_names}; use the same LLM pool and order")
        out[name] = router
    return out


def parse_router_params(text: str | None, routers=None) -> dict[str, dict]:
    """Parse ``--router-params`` JSON: ``{"knn": {"k": 10}}`` (or a path to such a file).

    With ``routers`` (the names given), a key that names none of them is an error rather than
    silently ignored.

    Example
    -------
    >>> parse_router_params('{"knn": {"k": 3}}', ["knn", "svm"])
    {'knn': {'k': 3}}
    >>> parse_router_params('{"knnn": {"k": 3}}', ["knn", "svm"])
    Traceback (most recent call last):
    ...
    ValueError: --router-params names router(s) ['knnn'] that are not among the routers given (['knn', 'svm'])
    """
    if not text:
        return {}
    raw = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--router-params must be JSON like '{{\"knn\": {{\"k\": 10}}}}': {exc}") from None
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise ValueError("--router-params must map router names to objects of constructor parameters")
    if routers is not None:
        unknown = [k for k in d if k not in set(routers)]
        if unknown:
            raise ValueError(f"--router-params names router(s) {unknown} that are not among the "
                             f"routers given ({list(routers)})")
    return d


def train_test(data: RoutingData, *, test_size: float = 0.3, seed: int = 0,
               splits: Sequence[str] = ("train", "test")) -> tuple[RoutingData, RoutingData]:
    """The dataset's own train/test split when its ``split`` column has both, else a seeded one."""
    vals = set(data.queries["split"].dropna().astype(str).str.lower())
    if set(splits) <= vals:
        parts = data.split(column="split")
        return parts[splits[0]], parts[splits[1]]
    if not 0 < test_size < 1:
        raise ValueError(f"test_size must be in (0, 1), got {test_size}")
    parts = data.split((1 - test_size, test_size), seed=seed)
    return parts["train"], parts["test"]


def judge_pool(data: RoutingData, split: str = "test", *, test_size: float = 0.3,
               seed: int = 0) -> tuple[RoutingData, RoutingData]:
    """(train, prompts to judge): the dataset's own ``train`` and ``split`` parts when every
    query has a split label and both exist, else :func:`train_test`'s seeded split."""
    parts = data.split(column="split") if data.queries["split"].notna().all() else None
    if parts and split in parts and "train" in parts and split != "train":
        return parts["train"], parts[split]
    return train_test(data, test_size=test_size, seed=seed)


def replay_train(truth: RoutingData, records, *, test_size: float = 0.3,
                 seed: int = 0) -> tuple[RoutingData, int]:
    """Training data for a router replayed on ``records``: :func:`train_test`'s train part
    without any judged query, and how many judged queries it left out.

    The records may come from a split other than this one (``judge simulate`` with another
    ``--seed``, the voting page on another split), so without the exclusion the replayed
    router could be trained on the very queries it is then judged on. Judged queries are
    matched by ``query_id``, and by text for records without one.

    Example
    -------
    >>> import numpy as np, pandas as pd
    >>> d = RoutingData(pd.DataFrame({"query_id": list("abcdef"), "text": list("ABCDEF"),
    ...                               "split": ["train"] * 4 + ["test"] * 2}), ["m", "n"], np.ones((6, 2)))
    >>> class R:  # a record judged on query "b", and one without an id on text "C"
    ...     def __init__(self, q, t): self.query_id, self.query = q, t
    >>> train, n = replay_train(d, [R("b", "B"), R(None, "C"), R("e", "E")])
    >>> train.query_ids, n
    (['a', 'd'], 2)
    """
    train, _ = train_test(truth, test_size=test_size, seed=seed)
    ids = {r.query_id for r in records if r.query_id is not None}
    texts = {r.query for r in records if r.query_id is None}
    judged = [q in ids or t in texts for q, t in zip(train.query_ids, train.texts)]
    keep = [i for i, j in enumerate(judged) if not j]
    if not keep:
        raise ValueError(f"{truth.name}: every training query was judged in the stored records; "
                         "nothing is left to fit the replayed router on")
    return (train if len(keep) == train.n_queries else train.subset(keep)), train.n_queries - len(keep)

