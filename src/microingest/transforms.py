"""Ready-made record transforms a declaration can name (`transform: microingest.transforms:<function>`).

A transform gets one record's decoded fields as a dict and returns them (changed or not). Raising rejects the
record: it goes to the dead-letter table with the exception as its reason. Transforms run on Spark executors, so a
pipeline's own transforms must live in a module importable there.
"""

from __future__ import annotations


def require_positive_amount(record: dict) -> dict:
    """Reject records whose `amount` is present and not positive (a typical business rule)."""
    amount = record.get("amount")
    if amount is not None and amount <= 0:
        raise ValueError(f"amount must be positive, got {amount}")
    return record


def drop_all_fields(record: dict) -> dict:
    """Returns nothing of the record; exists to show that a transform's output is checked against the schema."""
    return {}
