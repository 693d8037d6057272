"""The rows of a decision log: fresh decision ids, query-text hashes and ``rr_decisions`` rows
(the table is described in :mod:`recsys_router.feedback.store`)."""

from __future__ import annotations

import hashlib
import json
import os
import time

__all__ = ["decision_row", "decision_time", "new_decision_id", "text_hash"]

_HEX = frozenset("0123456789abcdef")


def new_decision_id(now: float | None = None) -> str:
    """A fresh decision id: 32 hex digits laid out as a UUID of version 7, the issuing time
    (``now``, default the clock; unix milliseconds, 48 bits) then 74 random bits from
    ``os.urandom``, so any instance can tell when a decision was made (:func:`decision_time`)
    and ids of one millisecond still differ at random.

    Example
    -------
    >>> did = new_decision_id(now=1_700_000_000.25)
    >>> len(did), did[:12], did[12], decision_time(did)
    (32, '018bcfe568fa', '7', 1700000000.25)
    """
    ms = int(round((time.time() if now is None else now) * 1000)) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a, rand_b = rand >> 68, rand & ((1 << 62) - 1)          # 12 + 62 random bits
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return f"{value:032x}"


def decision_time(decision_id: str) -> float | None:
    """The unix time (seconds) at which :func:`new_decision_id` issued ``decision_id``; None
    for any other string (such as the random version-4 ids of older versions).

    Example
    -------
    >>> decision_time("nope") is None, decision_time("0" * 32) is None
    (True, True)
    """
    if len(decision_id) != 32 or not _HEX.issuperset(decision_id):
        return None
    if decision_id[12] != "7" or decision_id[16] not in "89ab":
        return None
    return int(decision_id[:12], 16) / 1000.0


def text_hash(text: str) -> str:
    """SHA-256 of a query text (what ``--log-text hash`` stores)."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def decision_row(*, decision_id: str, instance: str, artifact_sha: str | None, policy: str,
                 policy_value: float | None, explore: str, candidates: list[str], chosen: str,
                 propensity: float, probs: dict, scores: dict, costs: dict | None, text: str,
                 log_text: str, task: str | None = None) -> dict:
    """One ``rr_decisions`` row (JSON-encodes the per-LLM fields; keeps the text as
    ``log_text`` says: ``full``, ``hash`` or ``none``, and the query's ``task`` label)."""
    return {"decision_id": decision_id, "created_at": time.time(), "instance": instance,
            "artifact_sha": artifact_sha, "policy": policy,
            "policy_value": None if policy_value is None else float(policy_value),
            "explore": explore, "candidates": json.dumps(list(candidates)), "chosen": chosen,
            "propensity": float(propensity), "probs": json.dumps(probs), "scores": json.dumps(scores),
            "costs": None if costs is None else json.dumps(costs),
            "query_text": text if log_text == "full" else None,
            "query_hash": text_hash(text) if log_text in ("full", "hash") else None,
            "task": task or None}
