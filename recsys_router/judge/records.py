"""Judged comparisons: the record type, duel selection and per-router attribution.

RouteJudge-style evaluation (a human -- or a simulated person -- judges two answers
to one query; the routers whose choices produced those answers are credited). Rules:

* **Votes.** Every router picks one LLM for the query; the vote count of an LLM is
  the number of routers that picked it.
* **Duel selection.** The two *distinct* LLMs with the most votes are shown. Ties in
  vote count are broken first by fewer past comparisons (LLMs that were shown less
  often go first), then at random with a seeded generator. When every router chose
  the same LLM, the second one comes from the remaining feasible LLMs (0 votes each)
  under the same tie-breaking rules.
* **Attribution (eq. 1).** The label gives ``(s_A, s_B)`` = (1, 0) for "A wins",
  (0, 1) for "B wins", (0.5, 0.5) for a tie and (0, 0) for "both bad". A router that
  chose A gets ``s_A``, one that chose B gets ``s_B``; any other router does not
  participate in this record (its attribution is ``None``).

Reference: Lai, Hu, Ye, "RouteJudge: An Open Platform for Reproducible and Preference-Aware
LLM Routing", arXiv:2606.18774 (2026).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import DataValidationError
from ..state.numbers import is_json_number
from .record_checks import brief, nonfinite, require, unencodable

__all__ = ["LABELS", "MAX_RECORD_ID", "LABEL_SCORES", "JudgeRecord", "count_votes", "select_duel", "attribute",
           "side_scores", "utc_now"]

#: the four judgement labels, in button order
LABELS = ("A", "B", "tie", "both_bad")
#: longest ``record_id`` a new record may have (the stores' column width)
MAX_RECORD_ID = 64
#: (s_A, s_B) per label (paper eq. 1)
LABEL_SCORES: dict[str, tuple[float, float]] = {"A": (1.0, 0.0), "B": (0.0, 1.0),
                                                 "tie": (0.5, 0.5), "both_bad": (0.0, 0.0)}


def utc_now() -> str:
    """Current UTC time as an ISO-8601 string with a ``Z``-free ``+00:00`` offset."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def side_scores(label: str) -> tuple[float, float]:
    """``(s_A, s_B)`` for a label (paper eq. 1).

    Example
    -------
    >>> side_scores("tie")
    (0.5, 0.5)
    """
    if label not in LABEL_SCORES:
        raise ValueError(f"label must be one of {LABELS}, got {label!r}")
    return LABEL_SCORES[label]


def count_votes(router_choices: Mapping[str, str], feasible: Sequence[str] | None = None) -> dict[str, int]:
    """Number of routers that chose each LLM.

    Parameters
    ----------
    router_choices : mapping router name -> chosen LLM
    feasible : sequence of str, optional
        When given, every feasible LLM appears in the result (0 when nobody chose it).

    Returns
    -------
    dict LLM -> votes, in feasible order (then first-seen order for other LLMs).

    Example
    -------
    >>> count_votes({"r1": "x", "r2": "y", "r3": "x"}, ["x", "y", "z"])
    {'x': 2, 'y': 1, 'z': 0}
    """
    c = Counter(router_choices.values())
    out = {m: 0 for m in (feasible or [])}
    for m in router_choices.values():
        out[m] = c[m]
    return out


def select_duel(router_choices: Mapping[str, str], feasible: Sequence[str],
                past_comparisons: Mapping[str, int] | None = None,
                rng: np.random.Generator | int | None = None, *, shuffle: bool = True) -> tuple[str, str]:
    """Choose the pair of LLMs to show (see the module docstring for the rules).

    The ranking key of an LLM is ``(-votes, past_comparisons, random draw)``; the two
    best-ranked distinct LLMs are shown. With ``shuffle=True`` their left/right order
    (A/B) is then randomised, so identities cannot be guessed from the position.

    Parameters
    ----------
    router_choices : mapping router -> chosen LLM
    feasible : sequence of str
        LLMs that may be shown (at least two). Chosen LLMs must be feasible.
    past_comparisons : mapping LLM -> int, optional
        How often each LLM was shown in earlier records (missing = 0).
    rng : numpy Generator or int seed, optional
    shuffle : bool
        Randomise the A/B order; with False, A is the better-ranked LLM.

    Returns
    -------
    (llm_a, llm_b)

    Example
    -------
    >>> select_duel({"r1": "x", "r2": "x", "r3": "y"}, ["x", "y", "z"], shuffle=False)
    ('x', 'y')
    >>> select_duel({"r1": "x", "r2": "y"}, ["x", "y", "z"], {"x": 5, "y": 1}, shuffle=False)
    ('y', 'x')
    """
    feasible = list(dict.fromkeys(feasible))
    if len(feasible) < 2:
        raise ValueError(f"a duel needs at least two feasible LLMs, got {feasible}")
    bad = sorted({m for m in router_choices.values() if m not in set(feasible)})
    if bad:
        raise ValueError(f"router choice(s) {bad} are not in the feasible set {feasible}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    votes = count_votes(router_choices, feasible)
    past = past_comparisons or {}
    draws = rng.random(len(feasible))
    ranked = sorted(range(len(feasible)),
                    key=lambda k: (-votes[feasible[k]], int(past.get(feasible[k], 0)), draws[k]))
    pair = [feasible[ranked[0]], feasible[ranked[1]]]
    if shuffle and rng.random() < 0.5:
        pair.reverse()
    return pair[0], pair[1]


def attribute(router_choices: Mapping[str, str], llm_a: str, llm_b: str, label: str) -> dict[str, float | None]:
    """Per-router attributed score (paper eq. 1); ``None`` = does not participate.

    Example
    -------
    >>> attribute({"r1": "x", "r2": "y", "r3": "z"}, "x", "y", "A")
    {'r1': 1.0, 'r2': 0.0, 'r3': None}
    """
    if llm_a == llm_b:
        raise ValueError(f"the duel pair must be two distinct LLMs, got {llm_a!r} twice")
    s_a, s_b = side_scores(label)
    return {r: (s_a if m == llm_a else s_b if m == llm_b else None) for r, m in router_choices.items()}


@dataclass
class JudgeRecord:
    """One judged comparison.

    Parameters
    ----------
    query : str
        The prompt text.
    router_choices : dict router -> LLM
        Each router's chosen LLM.
    llm_a, llm_b : str
        The duel pair as shown (A left, B right).
    label : {"A", "B", "tie", "both_bad"}
        The judgement.
    feasible : list of str
        LLMs the routers could choose from.
    task, query_id : str, optional
    history : list of dict, optional
        Earlier conversation turns (``{"role", "content"}``).
    budget : float, optional
        Per-query cost budget C given to the routers.
    costs, latencies : dict LLM -> float
        Cost (USD) and latency (s) of the shown LLMs (costs may cover more LLMs).
    created_at, judged_at : str
        ISO timestamps of the duel and of the judgement.
    metadata : dict
        Free-form (e.g. ``{"source": "simulate", "seed": 0}``). ``"wtp"``, when present and
        not null, is the willingness to pay the routers were given (``judge simulate --wtp``);
        ``judge replay`` routes with it.
    record_id : str
        Unique id (a UUID by default): a string of at most 64 characters; a number is
        refused (never coerced), so an id compares equal to the stored one.

    ``votes`` and ``attribution`` are derived from the fields above.
    """

    query: str
    router_choices: dict[str, str]
    llm_a: str
    llm_b: str
    label: str
    feasible: list[str]
    task: str | None = None
    query_id: str | None = None
    history: list[dict] | None = None
    budget: float | None = None
    costs: dict[str, float] = field(default_factory=dict)
    latencies: dict[str, float] = field(default_factory=dict)
    created_at: str = field(default_factory=utc_now)
    judged_at: str = field(default_factory=utc_now)
    metadata: dict[str, Any] = field(default_factory=dict)
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        self.validate()

    def check_storable(self, source: str | None = None, row: int | None = None) -> None:
        """Limits a record must meet to be stored (checked on writing and importing, not on
        reading rows an older version stored): ``record_id`` of at most
        :data:`MAX_RECORD_ID` characters, the database column's width, no string of the
        record (keys, history and metadata included) holding a lone surrogate, and no NaN or
        infinite number anywhere (:meth:`check_json`)."""
        if len(self.record_id) > MAX_RECORD_ID:
            raise DataValidationError(f"record_id must be at most {MAX_RECORD_ID} characters, got "
                                      f"{len(self.record_id)}: {brief(self.record_id)}",
                                      source=source, row=row, column="record_id")
        for key in self.__dataclass_fields__:  # neither the database nor a UTF-8 export can hold it
            bad = unencodable(getattr(self, key))
            if bad is not None:
                raise DataValidationError(f"{key} holds text that cannot be UTF-8 encoded (a lone "
                                          f"surrogate): {brief(bad)}", source=source, row=row,
                                          column=key)
        self.check_json(source=source, row=row)

    def check_json(self, source: str | None = None, row: int | None = None) -> None:
        """Refuse a NaN or infinite float anywhere in the record (``metadata`` and ``history``
        included), which a JSON export cannot hold; checked on writing, importing and
        exporting (a row an older version stored with one is named, not written as
        non-JSON)."""
        for key in self.__dataclass_fields__:
            bad = nonfinite(getattr(self, key))
            if bad is not None:
                raise DataValidationError(f"{key} holds a non-finite number ({bad}); JSON has no NaN "
                                          "or Infinity", source=source, row=row, column=key)

    def validate(self, source: str | None = None, row: int | None = None) -> None:
        """Check the record's types and invariants; raises DataValidationError naming the field.

        Every name (``query``, ``llm_a``/``llm_b``, ``label``, ``record_id``, ``task``,
        ``query_id``, timestamps, router names and their choices, feasible LLMs) must be a
        string: a record id is text, so ``5`` is refused rather than stored as ``'5'``. An integer
        budget or cost too large for a float is not finite.
        """
        def fail(msg, col):
            raise DataValidationError(msg, source=source, row=row, column=col)
        if not isinstance(self.query, str) or not self.query:
            fail("query must be a non-empty string", "query")
        if not isinstance(self.record_id, str) or not self.record_id:
            fail(f"record_id must be a non-empty string, got {brief(self.record_id)}", "record_id")
        for key in ("task", "query_id"):
            if getattr(self, key) is not None and not isinstance(getattr(self, key), str):
                fail(f"{key} must be a string or null, got {brief(getattr(self, key))}", key)
        for key in ("created_at", "judged_at"):
            if not isinstance(getattr(self, key), str):
                fail(f"{key} must be an ISO timestamp string, got {brief(getattr(self, key))}", key)
        if not isinstance(self.label, str) or self.label not in LABELS:
            fail(f"label must be one of {LABELS}, got {brief(self.label)}", "label")
        for key in ("llm_a", "llm_b"):
            if not isinstance(getattr(self, key), str):
                fail(f"{key} must be an LLM name (a string), got {brief(getattr(self, key))}", key)
        if not isinstance(self.feasible, (list, tuple)) or not all(isinstance(m, str) for m in self.feasible):
            fail(f"feasible must be a list of LLM names (strings), got {brief(self.feasible)}", "feasible")
        if not isinstance(self.router_choices, dict) or not self.router_choices:
            fail("router_choices must map at least one router to its chosen LLM", "router_choices")
        for r, m in self.router_choices.items():
            if not isinstance(r, str) or not isinstance(m, str):
                fail(f"router_choices must map router names to LLM names (strings), got "
                     f"{brief(r)}: {brief(m)}", "router_choices")
        if self.llm_a == self.llm_b:
            fail(f"llm_a and llm_b must differ, both are {self.llm_a!r}", "llm_b")
        feas = set(self.feasible)
        for key in ("llm_a", "llm_b"):
            if getattr(self, key) not in feas:
                fail(f"{key} {getattr(self, key)!r} is not in the feasible set {sorted(feas)}", key)
        for r, m in self.router_choices.items():
            if m not in feas:
                fail(f"router {r!r} chose {m!r}, which is not in the feasible set", "router_choices")
        if self.budget is not None and (not is_json_number(self.budget) or self.budget < 0):
            fail(f"budget must be a finite number >= 0 or null, got {brief(self.budget)}", "budget")
        if self.history is not None and (not isinstance(self.history, list)
                                         or not all(isinstance(t, dict) for t in self.history)):
            fail(f"history must be a list of turns (JSON objects) or null, got {brief(self.history)}",
                 "history")
        if not isinstance(self.metadata, dict):
            fail(f"metadata must be a JSON object, got {brief(self.metadata)}", "metadata")
        for key in ("costs", "latencies"):
            values = getattr(self, key)
            if not isinstance(values, dict):
                fail(f"{key} must map LLM names to numbers, got {brief(values)}", key)
            for m, v in values.items():
                if not isinstance(m, str):
                    fail(f"{key} must map LLM names (strings) to numbers, got key {brief(m)}", key)
                if not is_json_number(v) or v < 0:
                    fail(f"{key}[{m!r}] must be a finite number >= 0, got {brief(v)}", key)


    @property
    def votes(self) -> dict[str, int]:
        """Vote count per feasible LLM."""
        return count_votes(self.router_choices, self.feasible)

    @property
    def attribution(self) -> dict[str, float | None]:
        """Attributed score per router (None = not participating)."""
        return attribute(self.router_choices, self.llm_a, self.llm_b, self.label)

    @property
    def consensus(self) -> float:
        """Consensus strength: ``max votes / N`` with N routers."""
        return max(self.votes.values()) / len(self.router_choices)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (with the derived ``votes`` and ``attribution``)."""
        d = asdict(self)
        d["votes"] = self.votes
        d["attribution"] = self.attribution
        return d

    @classmethod
    def from_dict(cls, d: Mapping, *, source: str | None = None, row: int | None = None) -> "JudgeRecord":
        """Inverse of :meth:`to_dict`; derived fields are recomputed, and a given ``votes`` or
        ``attribution`` that disagrees with them raises DataValidationError naming the field."""
        if not isinstance(d, Mapping):
            raise DataValidationError(f"expected a JSON object, got {type(d).__name__}", source=source, row=row)
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: d[k] for k in known if k in d and d[k] is not None}
        for k in ("query", "router_choices", "llm_a", "llm_b", "label", "feasible"):
            require(d, k, source, row)
        try:
            rec = cls(**kw)
        except DataValidationError as exc:
            raise exc.at(source=source, row=row) from None
        except (TypeError, ValueError, OverflowError) as exc:  # never a bare traceback
            raise DataValidationError(f"malformed record: {type(exc).__name__}: {exc}"[:300],
                                      source=source, row=row) from None
        rec.check_storable(source=source, row=row)
        if "votes" in d and d["votes"] is not None and d["votes"] != rec.votes:
            raise DataValidationError(f"stored votes {brief(d['votes'], 120)} disagree with the router "
                                      f"choices ({rec.votes})", source=source, row=row, column="votes")
        if "attribution" in d and d["attribution"] is not None and d["attribution"] != rec.attribution:
            raise DataValidationError(f"stored attribution {d['attribution']} disagrees with eq. 1 "
                                      f"({rec.attribution})", source=source, row=row, column="attribution")
        return rec
