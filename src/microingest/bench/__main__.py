"""`make bench`: python -m microingest.bench [--records N] [--partitions P] ... ; see microingest.bench."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from microingest import settings
from microingest.bench import report
from microingest.bench.contenders import CONTENDERS
from microingest.bench.dataset import TIMESTAMPS
from microingest.bench.runner import Options, run_bench


def main(argv: list[str]) -> int:
    defaults = Options()
    parser = argparse.ArgumentParser(
        prog="python -m microingest.bench",
        description="this platform side by side with the alternatives, on the same "
        "Kafka data; writes report.md, report.json and chart.png",
    )
    parser.add_argument("--records", type=int, default=defaults.records)
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument("--batch-records", type=int, default=defaults.batch_records)
    parser.add_argument("--small-records", type=int, default=defaults.small_records)
    parser.add_argument("--small-batches", type=int, default=defaults.small_batches)
    parser.add_argument(
        "--contenders", default=",".join(defaults.contenders), help=f"comma-separated, of {', '.join(CONTENDERS)}"
    )
    parser.add_argument(
        "--warm-up-records",
        type=int,
        default=None,
        help="records of each of the untimed runs warming the long-lived driver (default: --records, at most "
        "500,000; 0: no warm-up)",
    )
    parser.add_argument(
        "--timestamps",
        choices=TIMESTAMPS,
        default=defaults.timestamps,
        help="how the JSON events write event_time: ISO-8601 text with offsets (as most producers do) or epoch ms",
    )
    parser.add_argument(
        "--malformed-share",
        type=float,
        default=defaults.malformed_share,
        help="of the records, cut off halfway: dead letters, not rows (0 to 0.05)",
    )
    parser.add_argument("--out", type=Path, default=settings.state_dir() / "bench")
    args = parser.parse_args(argv)
    for name in ("records", "partitions", "batch_records", "small_records"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("small_batches", "warm_up_records"):
        if (getattr(args, name) or 0) < 0:
            parser.error(f"--{name.replace('_', '-')} must be 0 or more")
    if not 0 <= args.malformed_share <= 0.05:  # a pipeline fails a batch past a tenth bad (dead_letter.max_fraction)
        parser.error("--malformed-share must be from 0 to 0.05")
    served = settings.pipelines_dir().resolve()
    if served == (settings.repo_root() / "pipelines").resolve():
        parser.error(
            f"the platform serves {served}; the bench declares its pipelines in a folder of its own: run it "
            "with `make bench`, which restarts the platform on one"
        )
    opts = Options(
        args.records,
        args.partitions,
        args.batch_records,
        args.small_records,
        args.small_batches,
        tuple(c for c in args.contenders.split(",") if c),
        args.out,
        args.warm_up_records,
        args.timestamps,
        args.malformed_share,
    )
    result = run_bench(opts, say=lambda m: print(m, flush=True))
    paths = report.write(result, args.out)
    print(report.markdown(result))
    print("written: " + ", ".join(map(str, paths)))
    wrong = [m["key"] for m in result["measurements"] if not m["exact"]]
    if wrong:
        print(f"WRONG: {', '.join(wrong)} did not land exactly what was read", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
