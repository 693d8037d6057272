"""The RouteJudge voting page (FastAPI app + static HTML/JS/CSS) and its live-mode backends."""

from __future__ import annotations

from .app import DuelRequest, JudgeSession, VoteRequest, create_app
from .live import BackendError, ask_backend, load_backends

__all__ = ["JudgeSession", "create_app", "DuelRequest", "VoteRequest", "load_backends", "ask_backend",
           "BackendError"]
