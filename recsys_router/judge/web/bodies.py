"""The voting page's request bodies (pydantic models) and the route class that refuses a JSON
body naming a key twice."""

from __future__ import annotations

import json
from typing import Literal

from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from ...serving.guards import SafeJSONResponse, SafeStr

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


class _RepeatedKey(ValueError):
    pass


def _no_repeated_keys(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _RepeatedKey(k)
        out[k] = v
    return out


class UniqueKeysRoute(APIRoute):
    """A route whose JSON body may not name a key twice (``{"label": "A", "label": "B"}``
    would keep the last value silently): 422 naming the key, as ``judge import`` refuses it.
    Other malformed bodies are left to FastAPI's own validation."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def checked(request: Request):
            body = await request.body()  # cached: the handler reads the same bytes
            if body:
                try:
                    json.loads(body, object_pairs_hook=_no_repeated_keys)
                except _RepeatedKey as exc:
                    return SafeJSONResponse({"detail": f"the request body names the key {exc.args[0]!r} more "
                                                       "than once; give each field once"}, status_code=422)
                except (ValueError, RecursionError):
                    pass
            return await handler(request)
        return checked
