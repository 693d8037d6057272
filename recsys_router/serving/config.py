"""The limits and options of the router service (:class:`ServiceConfig`)."""

from __future__ import annotations

import numbers
from typing import Optional

from pydantic import BaseModel, Field, field_validator

from ..feedback.writer import MAX_PENDING
from .keys import ApiKey

__all__ = ["ServiceConfig"]


class ServiceConfig(BaseModel):
    """Limits and options of the service.

    Limits are checked when the config is made (a ``pydantic.ValidationError``, a
    ``ValueError``, naming the field): counts and sizes must be >= 1, times finite and >= 0
    (the backend timeout, the body deadline ``body_timeout_s``: seconds a request body may
    take to arrive whole, the log's flush interval and ``log_timeout_s``, the time limit of
    each decision-log database call, > 0), the seed >= 0, ``log_batch`` at most the decision
    log's queue bound (:data:`~recsys_router.feedback.writer.MAX_PENDING`, 10,000), counts whole
    numbers (numpy integers too), and no unknown field is accepted.
    """

    max_batch: int = Field(default=256, ge=1)
    max_body_bytes: int = Field(default=1_000_000, ge=1)
    max_text_chars: int = Field(default=100_000, ge=1)
    api_key: Optional[ApiKey] = None   # visible ASCII: what a client can send reliably
    batch_wait_ms: float = Field(default=5.0, ge=0, allow_inf_nan=False)
    backends: Optional[dict] = None
    backend_timeout_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    body_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    explore: str = "none"
    log_db: Optional[str] = None
    log_text: str = "hash"
    log_batch: int = Field(default=256, ge=1, le=MAX_PENDING)   # a batch fits in the log's queue
    log_flush_ms: float = Field(default=200.0, gt=0, allow_inf_nan=False)
    log_timeout_s: float = Field(default=5.0, gt=0, allow_inf_nan=False)
    instance: Optional[str] = Field(default=None, min_length=1, max_length=128)
    seed: int = Field(default=0, ge=0)

    model_config = {"extra": "forbid", "hide_input_in_errors": True}   # never echo the API key

    @field_validator("max_batch", "max_body_bytes", "max_text_chars", "log_batch", "seed",
                     mode="before")
    @classmethod
    def _whole_number(cls, v):
        # an int or a numpy integer; never a bool, a float such as 2.5 or 8.0, or a string
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"must be a whole number, got {v!r}")
        return int(v)

    @field_validator("instance")
    @classmethod
    def _printable_name(cls, v):
        # logged with every decision and mixed into the exploration seed: printable text
        if v is not None and (not v.isprintable() or v != v.strip()):
            raise ValueError("must be printable characters without leading or trailing spaces")
        return v
