"""The protocol record and its registry.

A protocol is everything the evaluation needs to score routers one way: which reference LLMs
of a candidate pool it records, how it sweeps a router's operating points, which metrics it
computes from the resulting decisions, its leaderboard columns, its report section and its
plots. :class:`Protocol` holds those pieces; :func:`register_protocol` files it under its
name in :data:`PROTOCOLS` (a :class:`~recsys_router.registries.Registry`, the package's one
registration mechanism). Every module of this package whose name does not start with ``_`` is
imported on the first lookup, so adding a protocol is one new file that ends with a
``register_protocol`` call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from ...metrics.routereval import mu_o
from ...registries import Registry

__all__ = ["Protocol", "Block", "mean_paid", "PoolView", "Predictions", "Sweep", "MetricContext",
           "ProtocolOption", "RunOutcome", "train_test_parts",
           "register_protocol", "unregister_protocol", "get_protocol", "protocol_names",
           "registered_protocols", "parse_protocols", "all_singles", "metric_row", "curve_row",
           "LLM_PREFIX", "PROTOCOLS"]

#: prefix of the decision rows (and metric rows) that describe a single LLM, not a router
LLM_PREFIX = "LLM:"


class Block(NamedTuple):
    """Decisions of one (dataset, protocol, pool, group, fold), as matrices.

    ``scores``/``costs`` are the true matrices (queries x pool LLMs, from the ``LLM:`` rows),
    ``roles`` the setting of each reference LLM (``single``/``strong``/``weak``), ``runs``
    router -> list of (setting, value, chosen column per query, prob entropy per query);
    ``paid`` router -> the cost paid per query of each of its runs (same order; from the
    decisions' ``cost`` column, which for most routers is the chosen LLM's cost and for a
    cascade the sum over the LLMs it tried). Read mean costs with :func:`mean_paid`.
    """
    scores: np.ndarray
    costs: np.ndarray | None
    llms: list[str]
    roles: dict
    runs: dict
    paid: dict | None = None


def mean_paid(block: Block, router: str, k: int) -> float:
    """Mean cost paid by run ``k`` of ``router`` over the queries whose paid cost is known
    (NaN when none is); without ``paid`` records, the chosen LLMs' true costs
    (:func:`~recsys_router.metrics.routereval.mu_o` on ``block.costs``).

    Example
    -------
    >>> b = Block(np.ones((2, 2)), np.array([[1., 10.], [1., 10.]]), ["a", "b"], {},
    ...           {"r": [("wtp", 1.0, np.array([0, 1]), None)]}, {"r": [np.array([1., 11.])]})
    >>> mean_paid(b, "r", 0), mean_paid(b._replace(paid=None), "r", 0)
    (6.0, 5.5)
    """
    if block.paid is not None and router in block.paid:
        v = np.asarray(block.paid[router][k], dtype=np.float64)
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else float("nan")
    return mu_o(block.costs, block.runs[router][k][2])


class Predictions(NamedTuple):
    """One fitted router's predictions on the test queries of one candidate pool.

    ``decide`` is the router's :meth:`~recsys_router.router.Router.decide` when the router
    says what it pays itself (``own_costs``, e.g. a cascade) or decides with its own
    ``route_indices`` (zero's budget mix; :func:`~recsys_router.router.custom_routing`);
    ``evaluate`` then takes each
    wtp, budget or argmax point's choices and paid costs from it, not from the sweep of
    these predictions; ``answer_costs`` (its :meth:`~recsys_router.router.Router.answer_costs`)
    then prices the points of a sweep that is no policy of the router (RouteLLM's thresholds).
    ``by_observed``: the router picks from its own predictions (zero), so ``evaluate`` gives
    each query only its observed LLMs as candidates, as the sweeps mask unobserved cells (a
    cascade reads the true scores and skips unobserved cells itself). ``for_pool``: a safe
    fallback's :class:`~recsys_router.fallback_pools.PoolPredictions`, which gives a
    candidate pool's ``(scores, probs, record)`` with the fallback decided on that pool's
    LLMs alone (columns in the pool's order); None: the pool takes these predictions' columns."""
    scores: np.ndarray
    costs: np.ndarray | None
    probs: np.ndarray | None
    decide: Callable | None = None
    answer_costs: Callable | None = None
    by_observed: bool = False
    for_pool: Callable | None = None


class Sweep(NamedTuple):
    """A router's operating points: ``points`` is a list of (value, chosen column per query)."""
    setting: str
    points: list
    prob_entropy: np.ndarray | None = None


@dataclass
class PoolView:
    """One candidate pool of one fold, as a protocol sees it while sweeping.

    Parameters
    ----------
    pool, group : str
        Labels of the pool (``"all"`` or a size) and candidate group.
    names : list of str
        The pool's LLM names (columns of every matrix the sweep receives).
    train : RoutingData
        The fold's training data (e.g. to pick a reference pair).
    config : EvalConfig
        The run's configuration (sweep sizes, protocol options).
    notes : list of str
        Notes of the run; a protocol appends what it skipped or adapted.
    refs : list of (int, str)
        The reference columns and their roles, once :attr:`Protocol.references` chose them.
    """

    pool: str
    group: str
    names: list
    train: object
    config: object
    notes: list
    refs: list = field(default_factory=list)


class ProtocolOption(NamedTuple):
    """A command-line option of one protocol (``recsys-router evaluate`` adds it).

    ``kind`` is ``"str"``, ``"int"``, ``"count"`` (a whole number >= 0), ``"positive"`` (a
    whole number >= 1), ``"float"`` or ``"list"`` (comma and/or space separated strings); the
    command line refuses a value outside its kind, and the value reaches :attr:`Protocol.run`
    under the flag's name with ``_`` for ``-``. ``check``, when given, is called on a
    ``"str"`` value as the command line is parsed and raises ``ValueError`` for a bad one.
    """
    flag: str
    default: object
    help: str
    kind: str = "str"
    check: Callable[[str], object] | None = None


class RunOutcome(NamedTuple):
    """What a protocol with its own procedure wrote (``out``) and its summary text."""
    out: object
    text: str


class MetricContext(NamedTuple):
    """What a protocol's metrics may know besides the decisions."""
    dataset: str
    reference_score: float | None = None


def all_singles(view: PoolView) -> list[tuple[int, str]]:
    """Default reference LLMs: every LLM of the pool, role ``single``.

    Example
    -------
    >>> all_singles(PoolView("all", "all", ["a", "b"], None, None, []))
    [(0, 'single'), (1, 'single')]
    """
    return [(j, "single") for j in range(len(view.names))]


def metric_row(router: str, metric: str, value) -> dict:
    """One metric row (router, metric, value as float)."""
    return {"router": router, "metric": metric, "value": float(value)}


def curve_row(router: str, curve: str, setting: str, value, x, y) -> dict:
    """One curve point row."""
    return {"router": router, "curve": curve, "setting": setting, "setting_value": float(value),
            "x": float(x), "y": float(y)}


@dataclass(frozen=True)
class Protocol:
    """One evaluation protocol, as a record.

    Parameters
    ----------
    name : str
        Registry name (``--protocol NAME``).
    sweep : callable, optional
        ``(Predictions, PoolView) -> Sweep``: the router's operating points on the pool.
    metrics : callable, optional
        ``(Block, MetricContext) -> (metric rows, curve rows)``, computed from decisions only.
    rank : int
        Position in ``all`` and in the report (smaller first).
    needs_costs : bool
        Skipped (with a note) on data without costs.
    in_all : bool
        Included when the user asks for ``all``.
    references : callable
        ``PoolView -> list of (pool column, role)`` or None to skip the pool (with a note).
    leaderboard : tuple of (metric, title)
        Leaderboard columns; the first one orders the leaderboard.
    report : callable, optional
        ``(metrics, pool, timings) -> (heading, markdown table) or None``.
    plots : tuple of (file name, callable)
        ``fn(result, path) -> bool`` writes one PNG (False when there is nothing to draw).
    description : str
        One line for ``--help``.
    run : callable, optional
        A protocol evaluated by its own procedure instead of the shared sweep (e.g. onboarding
        new LLMs, learning from logged feedback): ``run(data, settings) -> RunOutcome``, where
        ``settings`` holds ``routers``, ``encoder``, ``split_column``, ``seed``, ``out``,
        ``plots``, ``progress`` and the values of :attr:`options`. It runs alone.
    options : tuple of ProtocolOption
        The protocol's own command-line options.
    test_notes : callable, optional
        ``(PoolView, true scores of the pool's scored test queries) -> list of str``: what the
        run should note about a pool's test queries (e.g. a reference pair that makes a metric
        undefined there); each note is prefixed with the protocol, pool, group and fold.
    """

    name: str
    sweep: Callable | None = None
    metrics: Callable | None = None
    rank: int = 100
    needs_costs: bool = False
    in_all: bool = True
    references: Callable = all_singles
    leaderboard: tuple = ()
    report: Callable | None = None
    plots: tuple = ()
    description: str = ""
    run: Callable | None = None
    options: tuple = ()
    test_notes: Callable | None = None


#: every protocol by name; the public modules of this package are imported on first lookup
PROTOCOLS = Registry("protocol", discover="recsys_router.evaluation.protocols")


def register_protocol(protocol: Protocol, *, overwrite: bool = False) -> Protocol:
    """File ``protocol`` under its name; returns it.

    Example
    -------
    >>> p = register_protocol(Protocol("toy", run=print, in_all=False))
    >>> get_protocol("toy") is p, "toy" in protocol_names()
    (True, True)
    >>> unregister_protocol("toy")
    """
    if not isinstance(protocol, Protocol):
        raise TypeError(f"register_protocol takes a Protocol record, got {type(protocol).__name__}")
    name = protocol.name
    if not isinstance(name, str) or not name or name != name.strip().lower() or "," in name:
        raise ValueError(f"protocol name must be a lower-case word without commas, got {name!r}")
    if name == "all":
        raise ValueError("'all' is reserved (it means every protocol)")
    if (protocol.run is None) == (protocol.sweep is None or protocol.metrics is None):
        raise ValueError(f"protocol {name!r} needs either sweep and metrics, or run")
    if protocol.run is not None and protocol.in_all:
        raise ValueError(f"protocol {name!r} runs on its own: register it with in_all=False")
    PROTOCOLS.register(name, protocol, overwrite=overwrite)
    return protocol


def unregister_protocol(name: str) -> None:
    """Remove a registered protocol (KeyError when absent)."""
    PROTOCOLS.unregister(name)


def registered_protocols() -> list[Protocol]:
    """Every registered protocol, by rank then name."""
    return sorted((p for _, p in PROTOCOLS.items()), key=lambda p: (p.rank, p.name))


def protocol_names(*, all_only: bool = False) -> list[str]:
    """Registered names, by rank (``all_only``: those that ``all`` expands to)."""
    return [p.name for p in registered_protocols() if p.in_all or not all_only]


def get_protocol(name: str) -> Protocol:
    """The protocol registered as ``name``; a ValueError lists the valid names."""
    try:
        return PROTOCOLS.get(name)
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; registered: "
                         f"{', '.join(protocol_names())}") from None


def parse_protocols(text) -> list[str]:
    """``"all"`` or a comma/space list of protocol names -> validated list (no repeats).

    Example
    -------
    >>> parse_protocols("orbit, routereval orbit")
    ['orbit', 'routereval']
    """
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    items = [str(s).strip().lower() for s in items if str(s).strip()]
    if "all" in items:
        return protocol_names(all_only=True)
    bad = [s for s in items if s not in PROTOCOLS]
    if bad or not items:
        raise ValueError(f"unknown protocol(s) {bad}; valid: {', '.join(protocol_names())}, all")
    return list(dict.fromkeys(items))


def train_test_parts(data, split_column: str | None, seed: int):
    """(train, test) for the protocols that run on their own: the ``split_column`` labels when
    given (both ``train`` and ``test`` needed), else a seeded 80/20 split."""
    if split_column:
        parts = data.split(column=split_column)
        if "test" not in parts or "train" not in parts:
            raise ValueError(f"split column {split_column!r}: needs 'train' and 'test' labels")
    else:
        parts = data.split((0.8, 0.2), seed=seed)
    return parts["train"], parts["test"]
