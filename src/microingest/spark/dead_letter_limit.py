"""The dead-letter guard (`dead_letter:` of the declaration): a batch with more bad records than its limits is refused
whole, before anything of it is written: probably a broken producer, which an operator should see rather than a
table of dead letters."""

from __future__ import annotations

from collections.abc import Callable

from microingest.commit.ledger import LedgerError
from microingest.commit.sinks import StagedCounts
from microingest.declare.pipeline import Pipeline


class DeadLetterLimitError(LedgerError):
    """Too many bad records in one batch: probably a broken producer. Nothing was committed."""


def check_dead_letters(
    pipeline: Pipeline, batch_id: str, counts: StagedCounts, sample: Callable[[], list[str]]
) -> None:
    too_many = pipeline.dead_letter.exceeded(counts.dead, counts.records)
    if too_many:
        raise DeadLetterLimitError(
            f"batch {batch_id} of pipeline '{pipeline.name}' refused: {too_many}. Nothing was committed; "
            f"first reasons: {'; '.join(sample())}"
        )
