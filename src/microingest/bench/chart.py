"""The bench chart: records per second of every contender against the two limits, and each one's time for a small
batch (the fixed cost of a run)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

_COLOURS = {"microingest": "#d9822b", "alternative": "#5a7fa8", "limit": "#9a9a9a"}


def draw(report: dict, path: Path) -> None:
    rows = report["measurements"]
    small = [m for m in rows if m["small_median"] is not None]
    fig, axes = plt.subplots(2 if small else 1, 1, figsize=(10, 7 if small else 4.5), squeeze=False)
    ax = axes[0][0]
    labels = [m["label"] for m in rows][::-1]
    ax.barh(labels, [m["rate"] for m in rows][::-1], color=[_COLOURS[m["family"]] for m in rows][::-1])
    for y, m in enumerate(rows[::-1]):
        ax.text(m["rate"], y, f" {m['rate']:,.0f}", va="center", fontsize=8)
    opts = report["options"]
    ax.set_title(
        f"records/s, {opts['records']:,} records in {opts['partitions']} partitions ({report['machine']['cpus']} CPUs)",
        fontsize=10,
    )
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("records per second (launch → last commit; limits: their work alone)")
    if small:
        ax2 = axes[1][0]
        ax2.barh(
            [m["label"] for m in small][::-1],
            [m["small_median"] for m in small][::-1],
            color=[_COLOURS[m["family"]] for m in small][::-1],
        )
        for y, m in enumerate(small[::-1]):
            ax2.text(m["small_median"], y, f" {m['small_median']:.1f}s", va="center", fontsize=8)
        ax2.set_title(f"a batch of {opts['small_records']} new records: launch → committed (median)", fontsize=10)
        ax2.tick_params(axis="y", labelsize=8)
        ax2.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
