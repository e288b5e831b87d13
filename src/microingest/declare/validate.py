"""Validate a pipeline declaration (parsed from YAML) into a `Pipeline`, by the model in `declare.model`. Every error
names the file and the offending field, so an operator can fix the declaration without reading this module.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from microingest.declare.lag_policy import GatePolicy, LagPolicy, OnRecords, SlaPolicy
from microingest.declare.model import Declaration, FieldSpec
from microingest.declare.pipeline import (
    Aggregate,
    DeadLetterPolicy,
    DeclarationError,
    Field,
    Measure,
    PartitionBy,
    Pipeline,
)

_FIRST = ("extra_forbidden", "missing")  # in a mapping, before what its fields hold


def parse_pipeline(raw: Any, source: str = "<declaration>") -> Pipeline:
    """Validate one declaration (already parsed from YAML) and return the pipeline it declares."""
    try:
        declaration = Declaration.model_validate(raw)
    except ValidationError as exc:
        error = _first(exc.errors())
        loc = error["loc"][:-1] if error["loc"][-1:] == ("[key]",) else error["loc"]  # a mapping's key: at the key
        raise DeclarationError(source, ".".join(map(str, loc)) or "<root>", _problem(error)) from None
    return _pipeline(declaration, source)


def _first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The error to report, as an operator reads a mapping: a field it does not know (the first by name), then one it
    lacks, then what its fields hold, in their order. Pydantic lists the fields' errors in their order, each section's
    within its field's, and the unknown fields of a mapping after all of them."""
    at: dict[tuple, int] = {}  # each field with errors in it, by its first
    for i, error in enumerate(errors):
        for depth in range(1, len(error["loc"])):
            at.setdefault(error["loc"][:depth], i)

    def order(i: int) -> tuple:
        loc, kind = errors[i]["loc"], errors[i]["type"]
        within = tuple((len(_FIRST), at[loc[:depth]]) for depth in range(1, len(loc)))
        if kind == "extra_forbidden":
            return (*within, (0, str(loc[-1])))
        return (*within, (_FIRST.index(kind) if kind in _FIRST else len(_FIRST), i))

    return errors[min(range(len(errors)), key=order)]


def _problem(error: ErrorDetails) -> str:
    """The error in the declaration's words: the model's own (a ValueError), or pydantic's structural ones reworded."""
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "extra_forbidden":
        return f"unknown field (known: {', '.join(_known(error['loc'][:-1]))})"
    if error["type"] == "model_type":  # a lag section
        return f"must be a mapping, got {type(error['input']).__name__}"
    return error["msg"]


def _known(loc: tuple[int | str, ...]) -> list[str]:
    """The fields of the mapping at `loc`: the declaration's own, or a section's such as lag.gate."""
    model: type[BaseModel] = Declaration
    for name in loc:
        if isinstance(name, int):  # an item of a list of sections (checks)
            continue
        model = _section(model.model_fields[str(name)].annotation)
    return sorted(field.alias or name for name, field in model.model_fields.items())


def _section(annotation: Any) -> type[BaseModel]:
    """The section model an annotation holds: itself, or inside an Optional or a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(found for arg in get_args(annotation) if (found := _section_or_none(arg)) is not None)


def _section_or_none(annotation: Any) -> type[BaseModel] | None:
    try:
        return _section(annotation)
    except StopIteration:
        return None


def _field(name: str, spec: FieldSpec) -> Field:
    path = tuple(spec.path.split(".")) if spec.path else ()
    return Field(
        name,
        spec.type,
        spec.required,
        spec.precision,
        spec.scale,
        spec.rounding,
        spec.items,
        () if path == (name,) else path,
        spec.from_,
        spec.name,
    )


def _pipeline(declaration: Declaration, source: str) -> Pipeline:
    dead_letter, lag, aggregate = declaration.dead_letter, declaration.lag, declaration.aggregate
    partition_by, on_records = declaration.partition_by, declaration.on_records
    return Pipeline(
        **declaration.model_dump(
            exclude={
                "topic",
                "topics",
                "schema_",
                "dead_letter",
                "lag",
                "aggregate",
                "partition_by",
                "on_records",
                "checks",
                "mask",
            }
        ),
        checks=tuple(spec.check() for spec in declaration.checks or ()),
        mask=tuple((declaration.mask or {}).items()),
        topics=(declaration.topic,) if declaration.topic is not None else tuple(declaration.topics or ()),
        on_records=OnRecords() if on_records is None else OnRecords(**on_records.model_dump()),
        partition_by=None if partition_by is None else PartitionBy(**partition_by.model_dump()),
        schema=tuple(_field(name, spec) for name, spec in declaration.schema_.items()),
        dead_letter=DeadLetterPolicy() if dead_letter is None else DeadLetterPolicy(**dead_letter.model_dump()),
        lag=LagPolicy()
        if lag is None
        else LagPolicy(
            lag.window_seconds,
            None if lag.gate is None else GatePolicy(**lag.gate.model_dump()),
            None if lag.sla is None else SlaPolicy(**lag.sla.model_dump()),
            None if lag.retention_margin is None else int(lag.retention_margin),
        ),
        aggregate=None
        if aggregate is None
        else Aggregate(
            tuple(aggregate.group_by or ()),
            tuple(
                Measure(name, "count") if spec.count else Measure(name, "sum", spec.sum)
                for name, spec in aggregate.measures.items()
            ),
            None if aggregate.time_bucket is None else aggregate.time_bucket.field,
            None if aggregate.time_bucket is None else aggregate.time_bucket.width,
        ),
        source=source,
    )
