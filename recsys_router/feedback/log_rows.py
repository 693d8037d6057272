"""The rows of a decision log: fresh decision ids, query-text hashes and ``rr_decisions`` rows
(the table is described in :mod:`recsys_router.feedback.store`)."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

__all__ = ["decision_row", "new_decision_id", "text_hash"]


def new_decision_id() -> str:
    """A fresh random decision id (32 hex digits)."""
    return uuid.uuid4().hex


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
