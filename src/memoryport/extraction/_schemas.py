"""The shapes the model must answer in, validated with pydantic (anything else is malformed)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ConsolidationAnswer", "Decision", "ExtractionAnswer", "Note", "PairVerdict", "ReconciliationAnswer"]

Text = Annotated[str, Field(min_length=1, max_length=2_000)]
Handle = Annotated[str, Field(min_length=1, max_length=64)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Entities = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=16)]


class _Answer(BaseModel):
    # Extra keys (a "reason", say) are ignored; missing or ill-typed required ones are errors.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=False)

    @field_validator("relation", mode="before", check_fields=False)
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


class Add(_Answer):
    action: Literal["ADD"]
    text: Text
    kind: str | None = Field(default=None, max_length=32)
    entities: Entities = []
    confidence: Confidence


class Update(_Answer):
    action: Literal["UPDATE"]
    memory: Handle
    text: Text
    confidence: Confidence


class Delete(_Answer):
    action: Literal["DELETE"]
    memory: Handle
    confidence: Confidence


class Noop(_Answer):
    action: Literal["NOOP"]
    memory: Handle | None = None
    confidence: Confidence | None = None


Decision = Annotated[Union[Add, Update, Delete, Noop], Field(discriminator="action")]


class ExtractionAnswer(_Answer):
    decisions: Annotated[list[Decision], Field(max_length=32)]

    @model_validator(mode="before")
    @classmethod
    def _actions(cls, value: Any) -> Any:
        # The discriminator is read before field validators run: "add" must become "ADD" here.
        if isinstance(value, dict) and isinstance(value.get("decisions"), list):
            value = {**value, "decisions": [
                {**d, "action": d["action"].strip().upper()} if isinstance(d, dict) and isinstance(
                    d.get("action"), str) else d
                for d in value["decisions"]
            ]}
        return value


class Note(_Answer):
    text: Text
    entities: Entities = []


class ConsolidationAnswer(_Answer):
    notes: Annotated[list[Note], Field(max_length=32)]


class PairVerdict(_Answer):
    pair: Handle
    relation: Literal["REINFORCE", "CONTRADICT", "WEAKEN", "UNRELATED"]


class ReconciliationAnswer(_Answer):
    pairs: Annotated[list[PairVerdict], Field(max_length=64)]
