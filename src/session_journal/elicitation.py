"""Questions a session's agent asks its user (MCP/ACP form elicitation)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class ElicitationRequest(BaseModel):
    """A form question: a message and a flat JSON object schema describing the answer."""

    id: str
    session_id: str
    mode: Literal["form"] = "form"
    message: str
    requested_schema: dict[str, Any]
