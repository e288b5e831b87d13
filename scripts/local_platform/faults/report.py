"""The soak's report: faults by kind with the time each took to recover, and what the platform could not survive
without a person."""

from __future__ import annotations

import statistics
from dataclasses import asdict


def by_kind(faults: list) -> dict[str, dict]:
    kinds: dict[str, dict] = {}
    for fault in faults:
        row = kinds.setdefault(
            fault.kind,
            {
                "injected": 0,
                "not_struck": 0,
                "at_moment": None,
                "recovered": 0,
                "not_recovered": 0,
                "recovery_seconds": [],
            },
        )
        if fault.error:
            row["not_struck"] += 1
            continue
        row["injected"] += 1
        if fault.at_moment is not None:  # the kinds that wait for a moment count how often it came
            row["at_moment"] = (row["at_moment"] or 0) + fault.at_moment
        if fault.recovered_after is None:
            row["not_recovered"] += 1
        else:
            row["recovered"] += 1
            row["recovery_seconds"].append(round(fault.recovered_after, 1))
    for row in kinds.values():
        seconds = row["recovery_seconds"]
        row["recovery_median_s"] = round(statistics.median(seconds), 1) if seconds else None
        row["recovery_max_s"] = max(seconds) if seconds else None
    return kinds


def table(kinds: dict[str, dict]) -> str:
    lines = [f"{'fault':<36} {'injected':>8} {'at moment':>9} {'recovered':>9} {'median s':>9} {'max s':>7}"]
    for kind, row in kinds.items():
        at_moment = "-" if row["at_moment"] is None else row["at_moment"]
        lines.append(
            f"{kind:<36} {row['injected']:>8} {at_moment:>9} {row['recovered']:>9} "
            f"{_shown(row['recovery_median_s']):>9} {_shown(row['recovery_max_s']):>7}"
        )
    total = sum(r["injected"] for r in kinds.values())
    lines.append(f"{'all':<36} {total:>8} {'':>9} {sum(r['recovered'] for r in kinds.values()):>9}")
    return "\n".join(lines)


def _shown(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def unsurvived(faults: list) -> list[dict]:
    """The faults after which the platform was not well again within the limit: each would have needed a person."""
    return [asdict(f) for f in faults if not f.error and f.recovered_after is None]
