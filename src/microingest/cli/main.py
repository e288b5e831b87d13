"""`microingest` command line: inspect and operate pipelines without the Airflow UI.

microingest validate            check every declaration in the pipelines folder
microingest plan PIPELINE       show what the next live run would read, in how many batches (writes nothing)
microingest lag [PIPELINE]      lag state, offset and time lag per partition, last batches (--json)
microingest backfill PIPELINE   replay offsets or a time window through Airflow (REST API), print the outcome
microingest skip PIPELINE --partition P --until OFFSET --reason TEXT
                                move a stuck partition's live position through Airflow, keeping the skipped
                                records as dead letters
microingest redrive PIPELINE    decode the unresolved dead letters again through Airflow, once their cause is fixed;
                                those that now decode land, each once (--dry-run: how many would, writing nothing)
microingest explain PIPELINE --partition P --offset O
                                the story of one offset: the batch that read it and what became of it
microingest doctor [PIPELINE]   the ledger, history, consumer group mirror, Asset events and Kafka compared: what
                                disagrees and what to do (exit 1 when something is wrong)
microingest schema PIPELINE     the schema fields its registered writer schema gives, as YAML to declare
microingest migrate             apply sql/ migrations to the pipelines' Postgres, then create or evolve each
                                declared pipeline's target table (audited in microingest.schema_changes)
microingest spark-connect-server   run the long-lived Spark driver pipelines can select (see spark_connect)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime, timezone

from microingest.cli.remote_run import run_and_report
from microingest.commit.overlap import OVERLAP_POLICIES
from microingest.commit.target_tables import prepare_targets
from microingest.declare.files import get_pipeline, load_declarations
from microingest.declare.pipeline import Pipeline
from microingest.declare.registry_schema import derive
from microingest.errors import MicroingestError, Refused
from microingest.plan.request import (
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
    parse_request,
)
from microingest.systems.airflow_api import AirflowClient, credentials
from microingest.systems.connections import get_connection, postgres_params
from microingest.systems.migrations import migrate

_SPEC_ORDER = ("type", "items", "precision", "scale", "rounding", "path", "required")  # a field as `schema` prints it


class UsageError(Refused, ValueError):
    """Arguments that do not make a request; reported like argparse's own errors (exit 2)."""


def cmd_validate(args) -> int:
    pipelines, errors = load_declarations()
    for p in pipelines:
        print(f"ok  {p.name}: {p.sources_named} -> {p.target_table} (DAG {p.dag_id}, schedule {p.schedule})")
    for error in errors:
        print(f"bad {error}")
    print(f"{len(pipelines)} pipeline declaration(s) valid" + (f", {len(errors)} malformed" if errors else ""))
    return 2 if errors else 0


def declared_pipelines() -> list[Pipeline]:
    """The valid declarations; each malformed one is reported on stderr and left out, as the DAG file does."""
    pipelines, errors = load_declarations()
    for error in errors:
        print(f"microingest: skipping a malformed declaration: {error}", file=sys.stderr)
    return pipelines


def cmd_plan(args) -> None:
    from microingest.plan.live import plan_live_run  # kafka-python: imported by the commands that reach Kafka

    plan = plan_live_run(get_pipeline(args.pipeline), record_pins=False)
    print(json.dumps({**plan.to_dict(), "batches": plan.batches_needed}, indent=2))


def cmd_lag(args) -> None:
    from microingest.lag.status import pipeline_status  # kafka-python, as in cmd_plan
    from microingest.lag.text import status_lines

    names = [args.pipeline] if args.pipeline else [p.name for p in declared_pipelines()]
    statuses = [pipeline_status(get_pipeline(name)) for name in names]
    if args.json:
        print(json.dumps([s.to_dict() for s in statuses] if not args.pipeline else statuses[0].to_dict(), indent=2))
        return
    for status in statuses:
        print("\n".join(status_lines(status)) + "\n")


_TOPIC_HELP = "the topic whose partitions are meant (needed when the pipeline reads several)"


def backfill_conf(args) -> dict:
    """The DAG run's Params for `microingest backfill`; Airflow and the run's planning judge the values."""
    by_offsets = args.partition or args.from_offset or args.until_offset
    by_time = args.from_time or args.until_time
    if bool(by_offsets) == bool(by_time):
        raise UsageError("give --partition/--from/--until (offsets) or --from-time/--until-time, one of the two")
    conf = {"overlap": args.overlap, "dry_run": args.dry_run, **_topic(args)}
    if by_time:
        if not (args.from_time and args.until_time):
            raise UsageError("a time window needs both --from-time and --until-time")
        return {
            **conf,
            "backfill_from_time": _utc_iso(args.from_time, "--from-time"),
            "backfill_until_time": _utc_iso(args.until_time, "--until-time"),
        }
    counts = {len(args.partition or []), len(args.from_offset or []), len(args.until_offset or [])}
    if len(counts) != 1:
        raise UsageError("give one --from and one --until for each --partition")
    ranges: dict[str, list[int]] = {}
    for p, lo, hi in zip(args.partition, args.from_offset, args.until_offset):
        if str(p) in ranges:
            raise UsageError(f"partition {p} given twice")
        ranges[str(p)] = [lo, hi]
    return {**conf, "backfill_ranges": ranges}


def _topic(args) -> dict:
    """The run's topic Param, when the command names one (a pipeline reading several topics needs it)."""
    return {} if args.topic is None else {TOPIC: args.topic}


def _utc_iso(value: str, option: str) -> str:
    """ISO 8601 with an explicit offset, as the Params require; a time without one is taken as UTC."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option}: not an ISO 8601 time: {value!r} (e.g. 2026-11-23T08:00:00Z)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).isoformat()


def cmd_backfill(args) -> int:
    return _through_airflow(get_pipeline(args.pipeline), backfill_conf(args), "microingest backfill", args.timeout)


def cmd_skip(args) -> int:
    from microingest.plan.skip import plan_skip, skip_summary  # kafka-python, as in cmd_plan

    pipeline = get_pipeline(args.pipeline)
    conf = {SKIP_PARTITION: args.partition, SKIP_UNTIL: args.until, SKIP_REASON: args.reason, **_topic(args)}
    request = parse_request(conf).skip
    assert request is not None
    # Checked here first for an answer at once (the run's plan checks again). Who skips is the Airflow user the run
    # is triggered as, as in the UI.
    checked = plan_skip(pipeline, request, credentials()[0])
    if args.dry_run:
        print(f"{skip_summary(checked)}; dry run: nothing written")
        return 0
    return _through_airflow(pipeline, conf, "microingest skip", args.timeout)


def cmd_redrive(args) -> int:
    from microingest.plan.redrive import plan_redrive, redrive_summary
    from microingest.plan.redrive_preview import preview_redrive

    pipeline = get_pipeline(args.pipeline)
    if (args.from_offset is None) != (args.until_offset is None):
        raise UsageError("give --from and --until together")
    conf = {
        REDRIVE: True,
        REDRIVE_CLASS: args.error_class,
        REDRIVE_PARTITION: args.partition,
        REDRIVE_FROM: args.from_offset,
        REDRIVE_UNTIL: args.until_offset,
        REDRIVE_SINCE: args.since and _utc_iso(args.since, "--since"),
        **_topic(args),
    }
    conf = {k: v for k, v in conf.items() if v is not None}
    request = parse_request(conf).redrive
    assert request is not None
    if args.dry_run:  # decoded here, as the run's planning would: the answer at once, nothing written
        plan, groups = plan_redrive(pipeline, request, credentials()[0])
        print(redrive_summary(plan, groups))
        for line in preview_redrive(pipeline, plan).lines() if plan.ranges else []:
            print(line)
        print("dry run: nothing written")
        return 0
    return _through_airflow(pipeline, conf, "microingest redrive", args.timeout)


def cmd_explain(args) -> None:
    from microingest.observe.offset_reads import offset_facts  # kafka-python, as in cmd_plan
    from microingest.observe.offset_story import story, to_dict

    if args.partition < 0 or args.offset < 0:
        raise UsageError("--partition and --offset are numbers >= 0")
    pipeline = get_pipeline(args.pipeline)
    try:
        topic = pipeline.topic_asked(args.topic)
    except ValueError as exc:
        raise UsageError(f"--topic: {exc}") from None
    facts = offset_facts(pipeline, topic, args.partition, args.offset)
    print(json.dumps(to_dict(facts), indent=2, default=str) if args.json else "\n".join(story(facts)))


def cmd_doctor(args) -> int:
    from microingest.observe.doctor import examine  # kafka-python, as in cmd_plan
    from microingest.observe.doctor_rules import BAD

    airflow = None
    if not args.no_airflow:
        try:
            airflow = AirflowClient()
        except MicroingestError as exc:
            print(f"microingest: Asset events not compared (--no-airflow to leave them out): {exc}", file=sys.stderr)
    names = [args.pipeline] if args.pipeline else [p.name for p in declared_pipelines()]
    wrong = 0
    for name in names:
        findings = examine(get_pipeline(name), airflow)
        print(f"{name}:\n" + "\n".join("  " + line for f in findings for line in f.lines()) + "\n")
        wrong += sum(f.severity == BAD for f in findings)
    return 1 if wrong else 0


def _through_airflow(pipeline: Pipeline, conf: dict, note: str, timeout: float) -> int:
    """Trigger the pipeline's DAG with these Params, follow the run, report it; the exit code says how it ended."""
    run = run_and_report(
        AirflowClient(), pipeline, conf, say=lambda m: print(m, flush=True), note=note, timeout=timeout
    )
    return 0 if run.state == "success" else 1


def cmd_migrate(args) -> int:

    pipelines = declared_pipelines()
    conn_ids = sorted({p.postgres_conn_id for p in pipelines} or {"microingest_postgres"})
    for conn_id in conn_ids:
        applied = migrate(postgres_params(get_connection(conn_id)))
        print(f"{conn_id}: {len(applied)} migration(s) applied" + (f": {', '.join(applied)}" if applied else ""))
    failed = 0
    for result in prepare_targets(pipelines, "microingest migrate"):
        if isinstance(result, MicroingestError):
            failed += 1
            print(f"microingest: error: {result}", file=sys.stderr)
        else:
            print(result.summary())
    return 2 if failed else 0


def cmd_schema(args) -> None:

    pipeline = get_pipeline(args.pipeline)
    if args.subject is None and (pipeline.topic_pattern is not None or len(pipeline.topics) != 1):
        raise UsageError(f"pipeline {pipeline.name} reads {pipeline.sources_named}: give --subject")
    subject = args.subject or f"{pipeline.topics[0]}-value"
    version = "latest" if args.version == "latest" else int(args.version)
    derived, origin = derive(pipeline.schema_registry_conn_id, subject, version)
    print(f"# the fields of {origin}, as a declaration writes them")
    print("schema:")
    for name, spec in derived.fields.items():
        written = {key: spec[key] for key in _SPEC_ORDER if key in spec and (key != "required" or spec[key])}
        shown = ", ".join(
            f"{key}: {str(value).lower() if isinstance(value, bool) else value}" for key, value in written.items()
        )
        print(f"  {name}: " + (spec["type"] if list(written) == ["type"] else f"{{{shown}}}"))
    for name, choice in derived.chosen.items():
        print(f"# {name}: {choice}")
    for name, why in derived.left_out.items():
        print(f"# left out: {name}: {why}")


def cmd_spark_connect_server(args) -> None:
    from microingest.spark.connect import server_argv  # pyspark, for this command only

    conf = dict(item.split("=", 1) for item in args.conf)
    argv = server_argv(args.host, args.port, args.master, conf)
    os.execvp(argv[0], argv)  # the server is this process: a supervisor or container stops it directly


def _spark_setting(value: str) -> str:
    if "=" not in value or not value.split("=", 1)[0].strip():
        raise argparse.ArgumentTypeError(f"wants KEY=VALUE, not {value!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="microingest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("validate").set_defaults(func=cmd_validate)
    plan = sub.add_parser("plan")
    plan.add_argument("pipeline")
    plan.set_defaults(func=cmd_plan)
    lag = sub.add_parser("lag", help="lag state, offset and time lag per partition, last batches")
    lag.add_argument("pipeline", nargs="?", help="one pipeline (default: every declared one)")
    lag.add_argument("--json", action="store_true", help="machine-readable output")
    lag.set_defaults(func=cmd_lag)
    sub.add_parser("migrate").set_defaults(func=cmd_migrate)
    schema = sub.add_parser(
        "schema",
        help="print the schema fields a registered writer schema gives",
        description="Print, as YAML to paste into PIPELINE's declaration, the schema fields its "
        "writer schema in the schema registry gives (what `schema: {from_registry: ...}` would "
        "derive), and the fields left out with why.",
    )
    schema.add_argument("pipeline")
    schema.add_argument("--subject", help="the registry subject (default: <topic>-value, the serializers' default)")
    schema.add_argument("--version", default="latest", help="a version number or latest (the default)")
    schema.set_defaults(func=cmd_schema)
    skipping = sub.add_parser(
        "skip",
        help="move a stuck partition's live position forward, through Airflow",
        description="Move PIPELINE's live position on one partition to --until, when a batch "
        "is refused for a reason no retry cures: checked here, then run as a DAG run of "
        "PIPELINE triggered through Airflow's REST API (as `backfill` is), whose outcome is "
        "printed. The skipped records are kept whole as dead letters (error_class skipped) "
        "with the reason, in the transaction that moves the position, and the history "
        "records who (the Airflow user) skipped what. To replay records the target already "
        "holds, backfill instead.",
    )
    skipping.add_argument("pipeline")
    skipping.add_argument("--topic", help=_TOPIC_HELP)
    skipping.add_argument("--partition", type=int, required=True)
    skipping.add_argument("--until", type=int, required=True, help="the new live position (exclusive end)")
    skipping.add_argument("--reason", required=True, help="why: kept with the records and in the history")
    skipping.add_argument("--dry-run", action="store_true", help="check against the ledger and Kafka, write nothing")
    skipping.add_argument("--timeout", type=float, default=3600, help="seconds to follow the run (default 3600)")
    skipping.set_defaults(func=cmd_skip)
    explain = sub.add_parser(
        "explain",
        help="the story of one offset: which batch read it and what became of it",
        description="Tell where the record at OFFSET of PIPELINE's topic went: the batch that read it (its kind, DAG "
        "run, note, time), the target row it became (or the aggregate's group, or the newer record its key holds), its "
        "dead letter and whether a redrive resolved it, the skip or the retention gap that passed over it, or why no "
        "batch read it yet; and whether the consumer group mirror agrees with the ledger.",
    )
    explain.add_argument("pipeline")
    explain.add_argument("--topic", help=_TOPIC_HELP)
    explain.add_argument("--partition", type=int, required=True)
    explain.add_argument("--offset", type=int, required=True)
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.set_defaults(func=cmd_explain)
    doctor = sub.add_parser(
        "doctor",
        help="compare the ledger, history, consumer group mirror, Asset events and Kafka; say what disagrees",
        description="For PIPELINE (default: every declared one) compare the ledger with Kafka's offsets (positions "
        "beyond the log end, or below what retention kept), with the batch history (each position where the batch "
        "it names ended), with the consumer group mirror, and the batches of the last day's finished DAG runs with "
        "their Asset events; count the unresolved dead letters. Says in words what disagrees and what to do; exit "
        "1 when something is wrong.",
    )
    doctor.add_argument("pipeline", nargs="?")
    doctor.add_argument("--no-airflow", action="store_true", help="leave out the Asset events (no Airflow API)")
    doctor.set_defaults(func=cmd_doctor)
    redrive = sub.add_parser(
        "redrive",
        help="decode the unresolved dead letters again, through Airflow",
        description="Once the cause of PIPELINE's dead letters is fixed (its declaration, its transform, a schema "
        "registered late), decode them again with the declaration as it is now, as a DAG run of PIPELINE triggered "
        "through Airflow's REST API (as `backfill` is), whose outcome is printed. Those that now decode land in the "
        "target by the sink's rules and their dead letters are marked resolved, in one transaction per batch; the "
        "others keep their row with today's reason. Repeating a redrive resolves nothing twice.",
    )
    redrive.add_argument("pipeline")
    redrive.add_argument("--topic", help="only dead letters of this topic (default: every topic the pipeline reads)")
    redrive.add_argument("--error-class", help="only dead letters of this error class (e.g. wrong_type)")
    redrive.add_argument("--partition", type=int, help="only this partition")
    redrive.add_argument("--from", dest="from_offset", type=int, metavar="OFFSET", help="with --partition: from here")
    redrive.add_argument("--until", dest="until_offset", type=int, metavar="OFFSET", help="... up to here (exclusive)")
    redrive.add_argument("--since", help="only dead letters written at or after this ISO 8601 time (UTC by default)")
    redrive.add_argument(
        "--dry-run", action="store_true", help="decode them here and say how many would land, writing nothing"
    )
    redrive.add_argument("--timeout", type=float, default=3600, help="seconds to follow the run (default 3600)")
    redrive.set_defaults(func=cmd_redrive)
    backfill = sub.add_parser(
        "backfill",
        help="replay offsets or a time window through Airflow",
        description="Trigger a backfill run of PIPELINE's DAG through Airflow's REST API and "
        "wait for its outcome. Credentials: MICROINGEST_AIRFLOW_USERNAME/PASSWORD, or the "
        "local platform's login; API address: AIRFLOW__API__BASE_URL.",
    )
    backfill.add_argument("pipeline")
    backfill.add_argument("--topic", help=_TOPIC_HELP + "; a time window without it replays every topic")
    backfill.add_argument("--partition", type=int, action="append", help="partition to replay (repeatable)")
    backfill.add_argument(
        "--from",
        dest="from_offset",
        type=int,
        action="append",
        metavar="OFFSET",
        help="first offset to replay, one per --partition",
    )
    backfill.add_argument(
        "--until",
        dest="until_offset",
        type=int,
        action="append",
        metavar="OFFSET",
        help="offset to stop before, one per --partition",
    )
    backfill.add_argument(
        "--from-time",
        help="replay records timestamped from this ISO 8601 time (inclusive; UTC unless it has an offset)",
    )
    backfill.add_argument("--until-time", help="... up to this ISO 8601 time (exclusive)")
    backfill.add_argument(
        "--overlap",
        choices=OVERLAP_POLICIES,
        default="refuse",
        help="what to do about positions already in the target (default: refuse)",
    )
    backfill.add_argument("--dry-run", action="store_true", help="plan and print, write nothing")
    backfill.add_argument("--timeout", type=float, default=3600, help="seconds to follow the run (default 3600)")
    backfill.set_defaults(func=cmd_backfill)
    server = sub.add_parser(
        "spark-connect-server",
        help="run a Spark Connect server for pipelines whose Spark "
        "connection is of type spark_connect (in the foreground)",
    )
    server.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    server.add_argument("--port", type=int, default=15002, help="port (default 15002)")
    server.add_argument("--master", default="local[*]", help="where its executors run (default local[*])")
    server.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_spark_setting,
        help="a Spark setting of the server (repeatable), e.g. spark.cores.max=2",
    )
    server.set_defaults(func=cmd_spark_connect_server)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # its retry chatter; failures surface as our errors
    try:
        return args.func(args) or 0
    except UsageError as exc:
        parser.error(str(exc))
    except MicroingestError as exc:
        print(f"microingest: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
