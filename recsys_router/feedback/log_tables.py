"""The tables of a decision log (schema version :data:`SCHEMA_VERSION`), described in
:mod:`recsys_router.feedback.store`, which creates, migrates and reads them."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["SCHEMA_VERSION", "SCHEMA_LOCK_KEY", "METADATA", "META_T", "DECISIONS_T", "FEEDBACK_T",
           "TEXT_COLUMNS"]

SCHEMA_VERSION = 1
#: PostgreSQL advisory lock key taken while a writer creates the log's tables (any constant
#: that other software in the database is unlikely to use: ``rr_log`` in ASCII, 0x72725f6c6f67)
SCHEMA_LOCK_KEY = 0x72725F6C6F67
METADATA = sa.MetaData()
META_T = sa.Table("rr_meta", METADATA, sa.Column("key", sa.String(64), primary_key=True),
                  sa.Column("value", sa.String(256), nullable=False))
DECISIONS_T = sa.Table(
    "rr_decisions", METADATA,
    sa.Column("decision_id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False, index=True),
    sa.Column("instance", sa.String(128)),
    sa.Column("artifact_sha", sa.String(128)),
    sa.Column("policy", sa.String(32), nullable=False),
    sa.Column("policy_value", sa.Float),
    sa.Column("explore", sa.String(64), nullable=False),
    sa.Column("candidates", sa.Text, nullable=False),
    sa.Column("chosen", sa.Text, nullable=False),   # an LLM name, of any length
    sa.Column("propensity", sa.Float, nullable=False),
    sa.Column("probs", sa.Text, nullable=False),
    sa.Column("scores", sa.Text, nullable=False),
    sa.Column("costs", sa.Text),
    sa.Column("query_text", sa.Text),
    sa.Column("query_hash", sa.String(64)),
    sa.Column("task", sa.String(1000)),
)
#: the text columns of a decision log as :meth:`DecisionLog.read` (and ``log export``) gives it
TEXT_COLUMNS = frozenset([c.name for c in DECISIONS_T.c if isinstance(c.type, sa.String)] + ["thumbs"])
FEEDBACK_T = sa.Table(
    "rr_feedback", METADATA,
    sa.Column("decision_id", sa.String(64), sa.ForeignKey("rr_decisions.decision_id"),
              primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("score", sa.Float),
    sa.Column("thumbs", sa.String(8)),
    sa.Column("cost", sa.Float),
    sa.Column("latency_ms", sa.Float),
)
