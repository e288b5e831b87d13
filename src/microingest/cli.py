"""`microingest` command line: inspect and operate pipelines without the Airflow UI.

  microingest validate            check every declaration in the pipelines folder
  microingest plan PIPELINE       show what the next live run would read, in how many batches (writes nothing)
  microingest lag PIPELINE        ledger position, latest offset and lag per partition
  microingest migrate             apply sql/ migrations to the pipelines' Postgres
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from microingest.connections import ConnectionConfigError, get_connection, postgres_params
from microingest.declarations import DeclarationError, get_pipeline, load_pipelines
from microingest.kafka_access import KafkaAccessError
from microingest.ledger import LedgerError
from microingest.planning import PlanningError
from microingest.postgres import PostgresUnavailableError

EXPECTED_ERRORS = (DeclarationError, ConnectionConfigError, KafkaAccessError, LedgerError, PlanningError,
                   PostgresUnavailableError)


def cmd_validate(args) -> None:
    pipelines = load_pipelines()
    for p in pipelines:
        print(f"ok  {p.name}: topic {p.topic} -> {p.target_table} (DAG {p.dag_id}, schedule {p.schedule})")
    print(f"{len(pipelines)} pipeline declaration(s) valid")


def cmd_plan(args) -> None:
    from microingest.live_planning import plan_live_run

    plan = plan_live_run(get_pipeline(args.pipeline), record_pins=False)
    print(json.dumps({**plan.to_dict(), "batches": plan.batches_needed}, indent=2))


def cmd_lag(args) -> None:
    from microingest.lag import partition_lags

    lags = partition_lags(get_pipeline(args.pipeline))
    for lag in lags:
        print(f"{lag.topic}[{lag.partition}] next={lag.next_offset} latest={lag.latest} lag={lag.lag}")
    print(f"total lag {sum(l.lag for l in lags)}")


def cmd_migrate(args) -> None:
    from microingest.migrations import migrate

    conn_ids = sorted({p.postgres_conn_id for p in load_pipelines()} or {"microingest_postgres"})
    for conn_id in conn_ids:
        applied = migrate(postgres_params(get_connection(conn_id)))
        print(f"{conn_id}: {len(applied)} migration(s) applied" + (f": {', '.join(applied)}" if applied else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="microingest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("validate").set_defaults(func=cmd_validate)
    for name, func in (("plan", cmd_plan), ("lag", cmd_lag)):
        cmd = sub.add_parser(name)
        cmd.add_argument("pipeline")
        cmd.set_defaults(func=func)
    sub.add_parser("migrate").set_defaults(func=cmd_migrate)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # its retry chatter; failures surface as our errors
    try:
        args.func(args)
    except EXPECTED_ERRORS as exc:
        print(f"microingest: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
