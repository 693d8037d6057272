"""The voting page's request bodies (pydantic models) and the route class that refuses a JSON
body naming a key twice."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ...serving.guards import SafeStr
from ...serving.json_body import JSONBodyRoute

__all__ = ["DuelRequest", "Turn", "UniqueKeysRoute", "VoteRequest"]


class Turn(BaseModel):
    """One earlier conversation turn."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: SafeStr = Field(max_length=100_000)


class DuelRequest(BaseModel):
    """Body of ``POST /api/duel``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    query_id: SafeStr | None = Field(default=None, max_length=1_000, description="prompt id; omitted = random draw")
    budget: float | None = Field(default=None, ge=0, strict=True,  # true / "1.5": a 422
                                 description="per-query cost budget C (USD)")
    task: SafeStr | None = Field(default=None, max_length=1_000,
                                 description="random draws: only prompts of this task")
    text: SafeStr | None = Field(default=None, min_length=1, max_length=100_000,
                                 description="live mode: a custom prompt instead of a dataset prompt")
    history: list[Turn] | None = Field(default=None, max_length=100, description="live mode: earlier turns")


class VoteRequest(BaseModel):
    """Body of ``POST /api/vote``."""

    model_config = ConfigDict(extra="forbid")
    token: SafeStr = Field(min_length=8, max_length=128)
    label: Literal["A", "B", "tie", "both_bad"]


class UniqueKeysRoute(JSONBodyRoute):
    """A route whose JSON body may not name a key twice (``{"label": "A", "label": "B"}``
    would keep the last value silently): 422 ``{"detail": ...}`` naming the key, as ``judge
    import`` refuses it. Other malformed bodies are left to FastAPI's own validation."""

    error_field = "detail"
