"""The part of each stored record that the live statistics read, loaded without the rest.

The voting page's ``/api/stats`` (leaderboard, head-to-head matrix, Elo with bootstrap
intervals) reads a record's router choices, duel pair, label, feasible LLMs and costs, and
nothing else: not the prompt, the conversation history or the metadata (which holds both
answer texts on the voting page). :func:`read_outcomes` selects only those columns, and
:class:`DuelOutcome` carries them with the same ``attribution``, ``votes`` and ``consensus``
as :class:`~recsys_router.judge.records.JudgeRecord`, so every function of
:mod:`~recsys_router.judge.metrics` and :mod:`~recsys_router.judge.rating` gives the same
numbers on either.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from ..errors import DataValidationError
from ..state.numbers import is_json_number
from .records import LABELS, attribute, count_votes
from .schema import READ_ONLY, choices_t, records_t

if TYPE_CHECKING:  # pragma: no cover
    from .store import JudgeStore

__all__ = ["DuelOutcome", "read_outcomes", "store_state"]


class DuelOutcome:
    """A judged duel as the statistics see it (a stored record without its texts).

    Parameters
    ----------
    router_choices : dict router -> LLM
    llm_a, llm_b : str
    label : {"A", "B", "tie", "both_bad"}
    feasible : list of str
    costs : dict LLM -> float

    Example
    -------
    >>> o = DuelOutcome({"r1": "x", "r2": "y"}, "x", "y", "A", ["x", "y"], {})
    >>> o.attribution, o.votes
    ({'r1': 1.0, 'r2': 0.0}, {'x': 1, 'y': 1})
    """

    __slots__ = ("router_choices", "llm_a", "llm_b", "label", "feasible", "costs", "attribution")

    def __init__(self, router_choices: dict, llm_a: str, llm_b: str, label: str, feasible: list,
                 costs: dict):
        self.router_choices, self.llm_a, self.llm_b = router_choices, llm_a, llm_b
        self.label, self.feasible, self.costs = label, feasible, costs
        #: attributed score per router (eq. 1), computed once (a JudgeRecord recomputes it per read)
        self.attribution = attribute(router_choices, llm_a, llm_b, label)

    @property
    def votes(self) -> dict[str, int]:
        """Vote count per feasible LLM."""
        return count_votes(self.router_choices, self.feasible)

    @property
    def consensus(self) -> float:
        """Consensus strength: ``max votes / N`` with N routers."""
        return max(self.votes.values()) / len(self.router_choices)


def store_state(store: "JudgeStore") -> tuple[int, int]:
    """``(number of records, id of the last one)``, 0 for an empty database: records are only
    ever appended, so a new one changes both."""
    try:
        with store.engine.connect().execution_options(**{READ_ONLY: True}) as conn:
            n, last = conn.execute(select(func.count(), func.max(records_t.c.id))
                                   .select_from(records_t)).one()
    except SQLAlchemyError as exc:
        raise store._db_error(exc) from None
    return int(n), int(last or 0)


def read_outcomes(store: "JudgeStore", last_id: int | None = None) -> list[DuelOutcome]:
    """Every stored record up to row id ``last_id`` (all when None), in insertion order, as
    :class:`DuelOutcome` (only the columns the statistics read are selected).

    Raises
    ------
    DataValidationError
        A stored row whose label, duel pair, feasible set or costs are not those of a valid
        record, naming the database and the ``record_id``.
    """
    r = records_t.c
    q = select(r.id, r.record_id, r.llm_a, r.llm_b, r.label, r.feasible, r.costs).order_by(r.id)
    cq = select(choices_t.c.record, choices_t.c.router, choices_t.c.llm)
    if last_id is not None:
        q, cq = q.where(r.id <= last_id), cq.where(choices_t.c.record <= last_id)
    try:
        with store.engine.connect().execution_options(**{READ_ONLY: True}) as conn:  # one snapshot
            rows = conn.execute(q).all()
            ch: dict[int, dict[str, str]] = {}
            for pk, router, m in conn.execute(cq.order_by(choices_t.c.record, choices_t.c.router)):
                ch.setdefault(pk, {})[router] = m
    except SQLAlchemyError as exc:
        raise store._db_error(exc) from None
    out = []
    for row in rows:
        try:
            feasible, costs = json.loads(row.feasible), json.loads(row.costs)
            choices = ch.get(row.id, {})
            if row.label not in LABELS or row.llm_a == row.llm_b or not isinstance(feasible, list) \
                    or not isinstance(costs, dict) or not choices \
                    or not all(is_json_number(v) for v in costs.values()):
                raise ValueError(f"label {row.label!r}, pair {row.llm_a!r}/{row.llm_b!r}, "
                                 f"{len(choices)} router choices, costs not a map to numbers")
            out.append(DuelOutcome(choices, row.llm_a, row.llm_b, row.label, feasible, costs))
        except (ValueError, TypeError, RecursionError) as exc:
            raise DataValidationError(f"stored row is not a valid record ({type(exc).__name__}: "
                                      f"{str(exc)[:200]})", source=f"{store.path}, record {row.record_id!r}") from None
    return out
