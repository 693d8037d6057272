"""Train/val/test folds and candidate pools for the evaluation runner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..data import RoutingData
from ..errors import DataValidationError

__all__ = ["Fold", "make_folds", "resolve_pools", "GROUPS", "parse_pools", "check_group_options",
           "complete_queries", "text_overlap_note"]

#: RouterEval's candidate-group kinds, in report order
GROUPS = ("all-strong", "all-weak", "strong-to-weak")


@dataclass
class Fold:
    """One train/val/test split; ``val`` may be None."""

    fold: int
    train: RoutingData
    val: RoutingData | None
    test: RoutingData


def make_folds(data: RoutingData, *, split: Sequence[float] | None = None,
               split_column: str | None = None, ood_tasks: Sequence[str] | None = None,
               folds: int = 1, seed: int = 0) -> list[Fold]:
    """Split ``data`` into one or more folds.

    Parameters
    ----------
    data : RoutingData
    split : sequence of float, optional
        Train/val/test (or train/test) fractions; default ``(0.8, 0.1, 0.1)``.
    split_column : str, optional
        Query column holding ``train``/``val``/``test`` labels.
    ood_tasks : sequence of str, optional
        Tasks held out as the test set (out-of-domain protocol).
    folds : int
        ``K >= 2`` gives K seeded folds over queries (each fold the test set once, no val).
    seed : int

    Returns
    -------
    list of Fold

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> [f.test.n_queries for f in make_folds(make_synthetic(30, 3, 2), folds=3)]
    [10, 10, 10]
    """
    given = [x is not None for x in (split, split_column, ood_tasks)]
    if split_column is not None and (split is not None or ood_tasks is not None):
        raise ValueError("give only one of --split-fractions, --split-column and --ood-tasks "
                         "(--ood-tasks may be combined with --split-fractions)")
    if not 1 <= folds <= data.n_queries:
        raise ValueError(f"--folds must be a whole number from 1 to {data.n_queries} (the "
                         f"data's queries), got {folds}")
    if folds > 1:
        if sum(given):
            raise ValueError("--folds K cannot be combined with --split-column or --ood-tasks "
                             "or --split-fractions: folds split the queries themselves")
        return [Fold(k, tr, None, te) for k, (tr, te) in enumerate(data.kfold(folds, seed=seed))]
    ratios = tuple(split) if split is not None else (0.8, 0.1, 0.1)
    if split_column is not None:
        parts = data.split(None, column=split_column)
    else:
        parts = data.split(ratios, seed=seed, ood_tasks=ood_tasks)
    for key in ("train", "test"):
        if key not in parts:
            raise DataValidationError(f"the split has no {key!r} part (parts: {sorted(parts)}); "
                                      f"expected train and test queries", source=data.source,
                                      column=split_column or "split")
    return [Fold(0, parts["train"], parts.get("val"), parts["test"])]


def text_overlap_note(fold: Fold) -> str | None:
    """A run note when test queries share their exact text with a train query, else None.

    Splits are drawn over query ids, so two ids with the same text can land one in train and
    one in test (a text-based router then sees a test text at fit time). The splits are left
    as they are; the note makes the overlap visible. Texts are compared exactly, through a
    hash set of the train texts (queries without a text are left out).

    Parameters
    ----------
    fold : Fold

    Returns
    -------
    str or None
        ``"fold K: N of M test queries have the same text as a train query"``, or None when
        no test text is also a train text.

    Example
    -------
    >>> import pandas as pd
    >>> q = pd.DataFrame({"query_id": list("abcd"), "text": ["x", "y", "x", None]})
    >>> d = RoutingData(q, ["m"], np.ones((4, 1)))
    >>> text_overlap_note(Fold(0, d.subset([0, 1]), None, d.subset([2, 3])))
    'fold 0: 1 of 2 test queries have the same text as a train query'
    """
    train = {t for t in fold.train.texts if isinstance(t, str)}
    if not train:
        return None
    n = sum(1 for t in fold.test.texts if isinstance(t, str) and t in train)
    if not n:
        return None
    return (f"fold {fold.fold}: {n} of {fold.test.n_queries} test queries have the same text "
            f"as a train query")


def parse_pools(text: str | Sequence) -> list:
    """Parse ``"3,5,all"`` into ``[3, 5, "all"]`` (validating each entry)."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list = []
    for it in items:
        s = str(it).strip().lower()
        if s == "all":
            out.append("all")
            continue
        try:
            m = int(s)
        except ValueError:
            raise ValueError(f"pool size {it!r} is neither an integer nor 'all'") from None
        if m < 1:
            raise ValueError(f"pool size must be >= 1, got {m}")
        out.append(m)
    if not out:
        raise ValueError("--pools needs at least one entry (sizes or 'all')")
    return list(dict.fromkeys(out))


def check_group_options(pools: Sequence, groups: Sequence[str] | None,
                        method: str = "routereval") -> None:
    """Refuse candidate-group options that would do nothing: ``groups`` or a ``method`` other
    than ``"routereval"`` with no sized pool among ``pools`` (groups are formed only for pool
    sizes m; ``"all"`` is the whole pool), and group names that are not :data:`GROUPS`.

    Raises
    ------
    ValueError
        Naming the option and what it needs.

    Example
    -------
    >>> check_group_options([3, "all"], ["all-weak"])
    >>> check_group_options(["all"], ["all-weak"])
    Traceback (most recent call last):
    ...
    ValueError: groups (--groups all-weak) apply only to sized candidate pools (--pools 3,5,...); the pools asked for are: all. Give a pool size or leave --groups out
    """
    unknown = [g for g in (groups or ()) if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown candidate group(s) {unknown}; valid: {', '.join(GROUPS)}")
    if any(p != "all" for p in parse_pools(pools)):
        return
    given = ([("groups", f"--groups {','.join(groups)}")] if groups else []) + \
        ([("group method", f"--group-method {method}")] if method != "routereval" else [])
    if given:
        what = " and ".join(f"{name} ({flag})" for name, flag in given)
        flags = " and ".join(flag.split()[0] for _, flag in given)
        verb = "applies" if given == [("group method", given[0][1])] else "apply"
        raise ValueError(f"{what} {verb} only to sized candidate pools (--pools 3,5,...); the "
                         f"pools asked for are: all. Give a pool size or leave {flags} out")


def resolve_pools(train: RoutingData, pools: Sequence, groups: Sequence[str] | None = None, *,
                  seed: int = 0, notes: list[str] | None = None, method: str = "routereval"
                  ) -> list[tuple[str, str, list[str]]]:
    """Candidate LLM sets per (pool, group).

    ``"all"`` is the whole LLM pool (group ``"all"``). An integer ``m`` takes RouterEval's
    candidate groups from :func:`recsys_router.pools.candidate_groups` computed on the
    *train* data (no test leakage), filtered by ``groups``.

    Parameters
    ----------
    notes : list of str, optional
        When given, a sized pool whose ``all-strong``/``all-weak`` groups cannot be formed
        (``method="routereval"``: their region of ``max(N // 5, m)`` LLMs is larger than the
        qualifying list, :func:`recsys_router.pools.region_problem`) keeps its
        ``strong-to-weak`` group and a note says what was skipped. Without it (or when no
        group can be formed) that is an error.
    method : {"routereval", "oracle-best"}
        How the groups are built (``candidate_groups(method=)``).

    Returns
    -------
    list of (pool label, group, LLM names)
    """
    wanted = list(dict.fromkeys(groups)) if groups else list(GROUPS)  # once each, as pools
    out = []
    for p in pools:
        if p == "all":
            out.append(("all", "all", list(train.llm_names)))
            continue
        m = int(p)
        if m > train.n_llms:
            raise ValueError(f"pool size {m} exceeds the {train.n_llms} LLMs of the data")
        from ..pools import candidate_groups  # noqa: PLC0415 (imported only for sized pools)
        unknown = [g for g in wanted if g not in GROUPS]
        if unknown:
            raise ValueError(f"unknown candidate group(s) {unknown}; valid: {', '.join(GROUPS)}")
        kept = _formable(train, m, wanted, notes, method)
        got = candidate_groups(train, m, method=method, seed=seed, groups=kept)
        for g in kept:
            names = [str(n) for n in got[g]]
            if len(names) != m:
                raise RuntimeError(f"candidate_groups gave {len(names)} LLMs for group {g!r}, "
                                   f"expected {m}")
            out.append((str(m), g, names))
    return out


def _formable(train: RoutingData, m: int, wanted: list[str], notes: list[str] | None,
              method: str = "routereval") -> list[str]:
    """``wanted`` less the all-strong/all-weak groups whose region cannot be formed for ``m``
    (with a note), when ``notes`` is given and ``strong-to-weak`` remains; otherwise
    ``wanted`` (errors come from :func:`~recsys_router.pools.candidate_groups`). Regions
    are never smaller than ``m``, so only a ``"routereval"`` region larger than the
    qualifying list is skipped."""
    ranged = [g for g in wanted if g in ("all-strong", "all-weak")]
    if notes is None or not ranged or "strong-to-weak" not in wanted:
        return wanted
    from ..pools import region_problem  # noqa: PLC0415
    problem = region_problem(train, m, method=method)
    if problem is None:
        return wanted
    notes.append(f"pool {m}: group(s) {', '.join(ranged)} skipped: {problem}; strong-to-weak "
                 f"kept")
    return [g for g in wanted if g not in ranged]


def complete_queries(test: RoutingData) -> np.ndarray:
    """Boolean mask of queries with every score (and every cost, when the data has costs)
    observed; metrics need complete rows."""
    ok = ~np.isnan(test.scores).any(axis=1)
    if test.costs is not None:
        ok &= ~np.isnan(test.costs).any(axis=1)
    return ok
