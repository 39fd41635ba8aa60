"""Content blocks, as ACP defines them: relay prompts and transcripts and journal messages hold
them (a leaf module: pydantic only, no I/O, no database)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator


class ContentBlock(BaseModel):
    """An ACP content block: `{"type": "text", "text": ...}`; other block types are kept as
    opaque JSON (their fields are preserved as extras)."""

    model_config = ConfigDict(extra="allow", revalidate_instances="always")

    type: str

    @model_validator(mode="after")
    def _text_blocks_have_text(self) -> ContentBlock:
        if self.type == "text" and not isinstance(getattr(self, "text", None), str):
            raise ValueError("a text block needs a string `text`")
        return self
