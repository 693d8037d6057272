"""The router service: HTTP routing API, Prometheus metrics, OpenAI-compatible proxy."""

from __future__ import annotations

from .app import RouteRequest, ServiceConfig, create_app
from .batcher import MicroBatcher
from .openai_proxy import load_backends

__all__ = ["create_app", "ServiceConfig", "RouteRequest", "MicroBatcher", "load_backends"]
