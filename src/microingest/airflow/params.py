"""The Params of every pipeline DAG: the trigger form in the UI and the `conf` of the REST API.

Defaults are what a scheduled run uses (a live run at the declaration's caps), so every field is optional. Types are
checked by Airflow when a run is triggered; what only Kafka or the ledger can judge fails the `ingest` task as it
plans the run.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from microingest.commit.overlap import OVERLAP_POLICIES
from microingest.declare.pipeline import Pipeline
from microingest.plan.request import (
    BACKFILL_RANGES,
    FROM_TIME,
    REDRIVE,
    REDRIVE_CLASS,
    REDRIVE_FROM,
    REDRIVE_PARTITION,
    REDRIVE_SINCE,
    REDRIVE_UNTIL,
    SKIP_PARTITION,
    SKIP_REASON,
    SKIP_UNTIL,
    TOPIC,
    UNTIL_TIME,
)

LIVE, BACKFILL, SKIP, REDRIVE_SECTION = "Live run", "Backfill", "Skip a stuck partition", "Redrive dead letters"
_OFFSET_PAIR = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}


def pipeline_params(pipeline: Pipeline) -> dict[str, Param]:
    return {**_common(pipeline), **_topic(pipeline)}


def _topic(pipeline: Pipeline) -> dict[str, Param]:
    """Which topic a backfill, skip or redrive means: asked only of a pipeline that reads several (or a pattern's)."""
    if pipeline.topic_pattern is None and len(pipeline.topics) == 1:
        return {}
    # a list's topics are offered by name; a pattern's are whatever Kafka has when the run is planned
    named: dict[str, Any] = {} if pipeline.topic_pattern is not None else {"enum": [None, *pipeline.topics]}
    return {
        TOPIC: Param(
            None,
            type=["null", "string"],
            section=BACKFILL,
            **named,
            title="Topic",
            description=f"This pipeline reads {pipeline.sources_named}. A backfill by offsets, a skip and a redrive "
            "of one partition name the partition's topic here; a backfill by time without one replays every "
            "topic, a redrive every topic's dead letters.",
        )
    }


def _common(pipeline: Pipeline) -> dict[str, Param]:
    return {
        "max_records": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            section=LIVE,
            title="Records for this run",
            description=f"Read at most this many records in this run (default: max_records_per_run, "
            f"{pipeline.max_records_per_run:,}). Batches stay at most {pipeline.max_records_per_batch:,} "
            "records, each its own transaction.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            section=LIVE,
            title="Dry run",
            description="Plan and log what this run would read, for a live run or a backfill (for a redrive: how "
            "many dead letters would land, and why the others would not); write nothing and start no Spark job.",
        ),
        BACKFILL_RANGES: Param(
            None,
            type=["null", "object"],
            section=BACKFILL,
            title="Backfill offset ranges",
            patternProperties={r"^[0-9]+$": _OFFSET_PAIR},
            additionalProperties=False,
            minProperties=1,
            description='Replay these offsets, per partition [from, until), e.g. {"0": [100, 5000], "2": [0, 800]}. '
            "They must lie below the live pipeline's position, which does not move.",
        ),
        FROM_TIME: Param(
            None,
            type=["null", "string"],
            format="date-time",
            section=BACKFILL,
            title="Backfill from (time)",
            description="Replay the records timestamped from this time (inclusive), found with Kafka's "
            "offsets-for-times look-up. Needs the 'until' time too.",
        ),
        UNTIL_TIME: Param(
            None,
            type=["null", "string"],
            format="date-time",
            section=BACKFILL,
            title="Backfill until (time)",
            description="...up to this time (exclusive). Whatever of the window lies at or above the live "
            "position is left to the live pipeline.",
        ),
        "overlap": Param(
            "refuse",
            type="string",
            enum=list(OVERLAP_POLICIES),
            section=BACKFILL,
            title="When records are already there",
            values_display={
                "refuse": "refuse: fail, naming the overlapping offsets",
                "replace": "replace: delete the rows and dead letters of the replayed positions, write "
                "the replayed records",
                "skip_existing": "skip_existing: write only positions not yet there",
            },
            description="What a backfill does about source positions already in the target. Aggregate targets "
            "add up, so they refuse already-counted positions whatever this says.",
        ),
        SKIP_PARTITION: Param(
            None,
            type=["null", "integer"],
            minimum=0,
            section=SKIP,
            title="Partition",
            description="Only when a batch is refused for a reason no retry cures (a dead-letter guard tripped by a "
            "broken producer, a target constraint): move this partition's live position forward. "
            "Nothing is lost: the skipped records become dead letters (error_class skipped).",
        ),
        SKIP_UNTIL: Param(
            None,
            type=["null", "integer"],
            minimum=0,
            section=SKIP,
            title="New live position",
            description="The offset the partition's live position moves to (the first record read afterwards).",
        ),
        SKIP_REASON: Param(
            None,
            type=["null", "string"],
            section=SKIP,
            title="Reason",
            description="Why; kept with each skipped record and in the batch history, beside who triggered the run.",
        ),
        REDRIVE: Param(
            False,
            type="boolean",
            section=REDRIVE_SECTION,
            title="Redrive dead letters",
            description="Once their cause is fixed (the declaration, the transform, a schema registered late): decode "
            "the pipeline's unresolved dead letters again with the declaration as it is now. Those that now decode "
            "land in the target by the sink's rules and are marked resolved; the others stay, with today's reason. "
            "Each is resolved at most once. A run of its own: give no backfill or skip with it.",
        ),
        REDRIVE_CLASS: Param(
            None,
            type=["null", "string"],
            section=REDRIVE_SECTION,
            title="Only this error class",
            description="e.g. wrong_type, invalid_json, unknown_schema, transform_failed, skipped (default: all).",
        ),
        REDRIVE_PARTITION: Param(
            None,
            type=["null", "integer"],
            minimum=0,
            section=REDRIVE_SECTION,
            title="Only this partition",
        ),
        REDRIVE_FROM: Param(
            None,
            type=["null", "integer"],
            minimum=0,
            section=REDRIVE_SECTION,
            title="From offset",
            description="With a partition: only dead letters at offsets from this (inclusive)...",
        ),
        REDRIVE_UNTIL: Param(
            None,
            type=["null", "integer"],
            minimum=0,
            section=REDRIVE_SECTION,
            title="Until offset",
            description="...up to this (exclusive).",
        ),
        REDRIVE_SINCE: Param(
            None,
            type=["null", "string"],
            format="date-time",
            section=REDRIVE_SECTION,
            title="Written since",
            description="Only dead letters written at or after this time.",
        ),
    }
