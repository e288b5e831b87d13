"""The long-lived Spark driver: a Spark Connect server that runs every run's batches, so a run pays no JVM start.

A pipeline selects it through its Spark connection (`spark_conn_id`): a connection of the Spark provider's type
`spark_connect` (host `sc://<host>`, port, optional token as password, user id as login, extra `use_ssl`). The ingest
job then runs as a plain Python process, a Spark Connect client of that server; the server's executors and Python
workers decode, with the job's Spark conf given to the server when it starts (`server_argv`).

The jobs of one build of the decoder jar share a session (`job_session`, `shared_session_id`). In Spark 4.0 the
server starts a Python worker daemon for each session and keeps it until the server stops (SPARK-54055): with a
session per run, every run would pay the daemon's start (about 1.5 s here) and leave a process behind. Jobs on a
shared session keep it open when they end, tag their operations, and interrupt only their own.

Connections still travel only in the job's process environment. The Python worker code the job ships to the server
(the pickled `Decoder`) carries no Postgres parameters: only the job's process writes to Postgres. It carries the
schema registry's settings for pipelines that read a registry format, as it does to executors under spark-submit.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlsplit

from microingest import settings
from microingest.batches import RunInfo, RunPlan
from microingest.declare.pipeline import Pipeline
from microingest.spark import job_bundle
from microingest.spark.submit import JOB_CONF, job_args, job_conf
from microingest.systems.connections import ConnectionConfigError, ConnectionInfo

log = logging.getLogger(__name__)

CONN_TYPE = "spark_connect"  # the Airflow Spark provider's connection type for Spark Connect
# The connection `make up` and docker compose define as the long-lived driver: every pipeline's default Spark
# connection (a user who sets it to a `spark` connection gets a Spark application per run instead).
PLATFORM_CONN_ID = "microingest_spark"
DEFAULT_PORT = 15002  # Spark Connect's own default
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_CLIENT_MARKS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")
# SQL conf is per session: set by every job on its session, whatever the server was started with.
SESSION_CONF = {key: value for key, value in JOB_CONF.items() if key.startswith("spark.sql.")}
# Per session, the executors' Python for Python workers (the server's spark.pyspark.python otherwise).
PYTHON_CONF = "spark.sql.execution.pyspark.python"
_SHARED_SESSION_SEED = b"microingest jobs"
SERVER_CONF = {
    # Our server keeps the shared session however long it idles; a closed session's id cannot be used again.
    "spark.connect.session.manager.defaultSessionTimeout": "3650d",
    # Every job's driver, and in the single topology its executors: on Spark's default of 1 GiB the old generation
    # stayed about 70% full (docs/performance.md, "The server's JVM").
    "spark.driver.memory": "2g",
}
# The throughput collector: a batch job waits on its whole batch, never on one pause, and G1's write barriers and
# concurrent work cost the warm server about a sixth of its CPU in the engine probe's decoding stages. Not added to
# options that choose a collector already.
SERVER_JAVA_OPTIONS = "-XX:+UseParallelGC"
_CHOOSES_GC = re.compile(r"-XX:\+Use\w+GC\b")


def is_spark_connect(conn: ConnectionInfo) -> bool:
    return conn.conn_type.replace("-", "_") == CONN_TYPE


def remote_url(conn: ConnectionInfo, session_id: str | None = None) -> str:
    """The `sc://` URL of the connection, as the provider's SparkConnectHook builds it. It carries the token: it goes
    to SparkSession.builder.remote() in the job's process, never to a command line or a log."""
    host = conn.host if "://" in conn.host else f"sc://{conn.host}"
    parts = urlsplit(host)
    if parts.scheme != "sc" or not parts.hostname:
        raise ConnectionConfigError(
            f"connection '{conn.conn_id}': Spark Connect needs a host like sc://spark-host, got {conn.host!r}"
        )
    if parts.path.strip("/"):
        raise ConnectionConfigError(f"connection '{conn.conn_id}': a Spark Connect host takes no path ({parts.path!r})")
    port = conn.port or parts.port or DEFAULT_PORT
    params = []
    if conn.login:
        params.append(f"user_id={quote(conn.login)}")
    if conn.password:
        params.append(f"token={quote(conn.password, safe='')}")
    if "use_ssl" in conn.extra:
        params.append(f"use_ssl={str(conn.extra['use_ssl']).lower()}")
    if session_id:
        params.append(f"session_id={session_id}")
    return f"sc://{parts.hostname}:{port}/" + "".join(f";{p}" for p in params)


def job_command(pipeline: Pipeline, plan: RunPlan, run: RunInfo) -> list[str]:
    """The ingest job as a Spark Connect client: this interpreter, the job script, the plan; no secret."""
    return [
        sys.executable,
        str(settings.spark_job_path()),
        *job_args(pipeline.name, plan, run),
        "--spark-connect",
        pipeline.spark_conn_id,
    ]


def retry_policy():
    """How long a job waits for an unreachable server: about 40 s, not pyspark's 10 minutes. A batch does not survive
    a server restart anyway (a new server knows none of the old one's operations); the task's retry starts it again."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    return DefaultPolicy(max_retries=8, backoff_multiplier=2.0, initial_backoff=250, max_backoff=10_000)


def _remote_session(url: str, *, create: bool):
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder.remote(url)  # pyspark types `builder` as a class property mypy cannot call
    spark = builder.create() if create else builder.getOrCreate()
    spark.client.set_retry_policies([retry_policy()])
    return spark


def interrupt_own(spark) -> None:
    """Best effort, once, on a job that did not finish: interrupt the server's operations carrying this job's tags
    (the server would otherwise go on staging for a client that is gone: harmless, as it is fenced, but wasted). No
    retries and no error of its own: when the server is what failed, the job's own error is the one to report."""
    spark.client.set_retry_policies([])
    for tag in spark.getTags():
        try:
            spark.interruptTag(tag)
        except Exception as exc:  # the server may be gone: the job's own error is already on its way
            log.warning("could not interrupt the server's operations of tag %s: %s", tag, str(exc).splitlines()[0])


def job_session(conn: ConnectionInfo, tag: str):
    """The job's session: the shared one, or one of its own when the server has closed the shared one (a server not
    started by this platform closes idle sessions after an hour by default). Its operations carry `tag`."""
    from pyspark.errors import PySparkException

    for session_id in (shared_session_id(), None):
        spark = _remote_session(remote_url(conn, session_id), create=True)
        spark.release_session_on_close = session_id is None  # the shared session outlives every job
        try:
            for key, value in SESSION_CONF.items():  # the first call: it finds out whether the session is usable
                spark.conf.set(key, value)
        except PySparkException as exc:
            spark.stop()
            if session_id is None or exc.getCondition() != "INVALID_HANDLE.SESSION_CLOSED":
                raise
            log.warning(
                "the server closed the shared session %s (idle timeout?); this job uses a session of its own, "
                "whose Python workers start for it alone",
                session_id,
            )
            continue
        ship_bundle(spark)
        spark.addTag(tag)
        return spark
    raise AssertionError("unreachable")


def shared_session_id(digest: str | None = None) -> str:
    """The session the jobs of one build of the decoder share (`digest`: its jar's, by default the installed one's):
    the same on every machine, so that each job's client finds it (pyspark wants the form of a version 4 UUID). A
    session keeps the classes of the first decoder jar it was sent, so each build has a session of its own: after an
    upgrade, jobs decode with the jar they were built with (jobs of the old build, still running, keep theirs),
    without a restart of the server."""
    if digest is None:
        jar = settings.decoder_jar()
        digest = None if jar is None else settings.decoder_digest(jar.read_bytes())
    seed = _SHARED_SESSION_SEED + (b"" if digest is None else b" " + digest.encode())
    return str(uuid.UUID(bytes=hashlib.sha256(seed).digest()[:16], version=4))


def joined_for(session_id: str, own: bool, digest: str) -> bool:
    """Whether a job's session (`own`: one of its own, not a shared one) may be sent the decoder jar of this digest:
    a session of its own, or the shared one of that build. Not when the jar was replaced after the job chose its
    session (an install under way): that build's classes would stay in the other build's session."""
    return own or session_id == shared_session_id(digest)


def ship_bundle(spark) -> None:
    """The job's Python (`job_bundle`) added to the session, and its executors' Python workers told to run it: the
    server's cluster needs none of microingest. Sent once per session and installation (30 MB take 0.3 s): a
    marker cached beside it says it is there (pyspark asks the server about cached artifacts only)."""
    bundle = job_bundle.job_bundle()
    marker = f"microingest job bundle {bundle.name}".encode()
    if not spark.client._artifact_manager.is_cached_artifact(hashlib.sha256(marker).hexdigest()):
        spark.addArtifacts(bundle.archive(), archive=True)
        spark.client.cache_artifact(marker)
    spark.conf.set(PYTHON_CONF, bundle.python)


def answers(conn: ConnectionInfo) -> bool:
    """A session on the server runs a query: the server is up, not merely its port. Raises when it is not.

    pyspark marks its whole process as a Spark Connect client in the environment when it opens a remote session, and
    leaves the mark after stop(); a spark-submit started later by this process would inherit it and refuse to start a
    Spark application of its own. The mark is taken back here."""
    with client_marks_kept():
        spark = _remote_session(remote_url(conn), create=False)
        try:
            return spark.range(3).count() == 3
        finally:
            spark.stop()


@contextlib.contextmanager
def client_marks_kept() -> Iterator[None]:
    """The process's Spark Connect client marks as they were before: a remote session opened inside leaves none."""
    before = {key: os.environ.get(key) for key in _CLIENT_MARKS}
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def server_argv(host: str, port: int, master: str = "local[*]", extra_conf: dict[str, str] | None = None) -> list[str]:
    """spark-submit of a Spark Connect server with the Kafka source's jars and the job's Spark conf (the executors'
    Python and worker daemon apply to the whole server)."""
    conf = {
        **job_conf(),
        **SERVER_CONF,
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        **(extra_conf or {}),
    }
    java = "spark.driver.extraJavaOptions"
    if not _CHOOSES_GC.search(conf.get(java, "")):
        conf[java] = " ".join(filter(None, (conf.get(java), SERVER_JAVA_OPTIONS)))
    argv = [
        "spark-submit",
        "--class",
        SERVER_CLASS,
        "--master",
        master,
        "--name",
        "microingest-spark-connect",
        "--jars",
        ",".join(settings.spark_jars()),
    ]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv
