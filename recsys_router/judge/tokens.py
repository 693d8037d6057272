"""One-time duel tokens of the voting page, kept in the RouteJudge database
(:class:`TokenStore`, mixed into :class:`~recsys_router.judge.store.JudgeStore`)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from .records import JudgeRecord, utc_now
from .schema import tokens_t

__all__ = ["EXPIRED_KEEP_S", "TokenError", "TokenStore"]

#: seconds an expired, unvoted token's id is kept (its duel dropped) so a late vote gets 410
EXPIRED_KEEP_S = 86_400.0
_EXPIRED = '{"expired": true}'  # the payload of such a token


class TokenError(LookupError):
    """A duel token is unknown (``status=404``), was already used (``status=409``), has
    expired (``status=410``), or its client holds too many unvoted ones (``status=429``)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _cutoff(ttl_s: float) -> str:
    """The ``issued_at`` string of a token issued ``ttl_s`` seconds ago (same format as
    :func:`utc_now`, so strings compare in time order)."""
    return (datetime.now(timezone.utc) - timedelta(seconds=float(ttl_s))).isoformat(timespec="milliseconds")


class TokenStore:
    """The duel-token methods of :class:`~recsys_router.judge.store.JudgeStore` (which gives
    them ``engine``, ``path`` and ``_insert``)."""

    def issue_token(self, token: str, payload: dict, *, client: str | None = None,
                    max_pending: int | None = None, ttl_s: float | None = None) -> None:
        """Remember a duel (the hidden pair, choices, answers) under a one-time token.

        Parameters
        ----------
        token : str
        payload : dict
            JSON-serialisable duel state, handed back to :meth:`redeem`.
        client : str, optional
            Who asked (an address); counted for ``max_pending``.
        max_pending : int, optional
            Refuse (:class:`TokenError`, 429) when ``client`` already holds this many
            unvoted, unexpired tokens. Checked in the same transaction as the insert.
        ttl_s : float, optional
            Unvoted tokens older than this lose their duel first (and do not count); their
            ids are deleted :data:`EXPIRED_KEEP_S` seconds later.
        """
        with self.engine.begin() as conn:
            if ttl_s is not None:  # expired: the duel is dropped, the id kept a while (a late vote: 410)
                unvoted = tokens_t.c.used_at.is_(None)
                conn.execute(delete(tokens_t).where(unvoted)
                             .where(tokens_t.c.issued_at < _cutoff(float(ttl_s) + EXPIRED_KEEP_S)))
                conn.execute(update(tokens_t).where(unvoted).where(tokens_t.c.issued_at < _cutoff(ttl_s))
                             .where(tokens_t.c.payload != _EXPIRED).values(payload=_EXPIRED))
            if max_pending is not None and client is not None:
                n = self._pending(conn, client, ttl_s)
                if n >= max_pending:
                    raise TokenError(f"client {client} holds {n} unvoted duels (the limit is {max_pending}); "
                                     "vote on them or wait for them to expire", 429)
            conn.execute(tokens_t.insert().values(token=token, payload=json.dumps(payload),
                                                  issued_at=utc_now(), client=client))

    @staticmethod
    def _pending(conn: Connection, client: str, ttl_s: float | None) -> int:
        q = select(func.count()).select_from(tokens_t).where(tokens_t.c.client == client) \
            .where(tokens_t.c.used_at.is_(None))
        if ttl_s is not None:
            q = q.where(tokens_t.c.issued_at >= _cutoff(ttl_s))
        return int(conn.execute(q).scalar_one())

    def pending_count(self, client: str, ttl_s: float | None = None) -> int:
        """Unvoted (and, with ``ttl_s``, unexpired) tokens issued to ``client``."""
        with self.engine.connect() as conn:
            return self._pending(conn, client, ttl_s)

    def get_token(self, token: str) -> dict:
        """Payload of an unused token; raises :class:`TokenError` otherwise."""
        with self.engine.connect() as conn:
            row = conn.execute(select(tokens_t).where(tokens_t.c.token == token)).first()
        if row is None:
            raise TokenError(f"unknown duel token {token!r}", 404)
        if row.used_at is not None:
            raise TokenError(f"duel token {token!r} was already used (record {row.record_id})", 409)
        if row.payload == _EXPIRED:
            raise TokenError(f"duel token {token!r} has expired: ask for a new duel", 410)
        return json.loads(row.payload)

    def redeem(self, token: str, build, *, ttl_s: float | None = None) -> JudgeRecord:
        """Consume ``token`` and write ``build(payload)`` in one transaction.

        ``build`` maps the token's payload to a :class:`JudgeRecord`; if it raises, the record
        fails :meth:`JudgeRecord.check_storable` (as in :meth:`add`), or the token is unknown,
        used or (with ``ttl_s``) older than ``ttl_s`` seconds, nothing is written.
        """
        with self.engine.begin() as conn:
            row = conn.execute(select(tokens_t).where(tokens_t.c.token == token)).first()
            if row is None:
                raise TokenError(f"unknown duel token {token!r}", 404)
            if row.used_at is not None:
                raise TokenError(f"duel token {token!r} was already used (record {row.record_id})", 409)
            if row.payload == _EXPIRED or (ttl_s is not None and row.issued_at < _cutoff(ttl_s)):
                ttl = "" if ttl_s is None else f"; unvoted duels expire after {ttl_s:g} s"
                raise TokenError(f"duel token {token!r} has expired (issued {row.issued_at}{ttl}): "
                                 "ask for a new duel", 410)
            rec = build(json.loads(row.payload))
            rec.check_storable(source=f"{self.path}, duel token {token!r}")  # as add/add_many do
            res = conn.execute(update(tokens_t).where(tokens_t.c.token == token)
                               .where(tokens_t.c.used_at.is_(None))
                               .values(used_at=utc_now(), record_id=rec.record_id))
            if res.rowcount != 1:  # guarded by BEGIN IMMEDIATE; kept as a second check
                raise TokenError(f"duel token {token!r} was already used", 409)
            self._insert(conn, rec)
        return rec
