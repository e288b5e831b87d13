"""How the ingest operator hands the job to its launcher: the command the provider's hook builds carries no
credential, a missing Spark connection means local[*], a broken one fails with its reason, and masters whose
provider code would put the environment on the command line are refused. A Spark Connect connection runs the job as
that server's client, its token in the environment like every other secret."""

import json
import logging
import signal
import sys
import threading
import time
from urllib.parse import quote

import pytest
from airflow.sdk.exceptions import AirflowFailException

from microingest.airflow.job_process import JobProcess
from microingest.airflow.launchers import ConnectLauncher, SubmitLauncher
from microingest.airflow.operators import SparkIngestOperator
from microingest.batches import OffsetRange, RunInfo, RunPlan
from microingest.declare.validate import parse_pipeline
from microingest.spark.connect import remote_url
from microingest.systems.connections import ConnectionConfigError, ConnectionInfo, parse_connection

PIPELINE = parse_pipeline(
    {"name": "orders", "topic": "orders", "target_table": "public.orders", "schema": {"order_id": "string"}}
)
PLAN = RunPlan("ingest", (OffsetRange("orders", 0, 0, 10, None),), batch_cap=10)
RUN = RunInfo("microingest_orders", "manual__1", 1)
KAFKA_SECRET, PG_SECRET = 'k-"se\\cr\u00e9t', "pg-s3cret-value"


@pytest.fixture
def operator(monkeypatch, tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-sql-kafka.jar").write_bytes(b"")
    monkeypatch.setenv("MICROINGEST_SPARK_JARS_DIR", str(jars))
    monkeypatch.setenv(
        "AIRFLOW_CONN_MICROINGEST_KAFKA",
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": {
                    "bootstrap.servers": "127.0.0.1:9094",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "ingest",
                    "sasl.password": KAFKA_SECRET,
                },
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_MICROINGEST_POSTGRES",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "127.0.0.1",
                "port": 5432,
                "login": "u",
                "password": PG_SECRET,
                "schema": "db",
            }
        ),
    )
    monkeypatch.delenv("AIRFLOW_CONN_MICROINGEST_SPARK", raising=False)
    return SparkIngestOperator(task_id="ingest", pipeline=PIPELINE)


def test_the_hooks_command_has_no_credential_and_the_environment_has_them(operator, tmp_path):
    launcher = operator.launcher(PLAN, RUN, str(tmp_path / "outcome.json"))
    assert isinstance(launcher, SubmitLauncher)
    hook = launcher.hook
    argv = hook._build_spark_submit_command(launcher.application)
    assert argv[argv.index("--master") + 1] == "local[*]"
    joined = " ".join(argv)
    for secret in (KAFKA_SECRET, json.dumps(KAFKA_SECRET)[1:-1], PG_SECRET, "password"):
        assert secret not in joined
    env = {name: json.loads(value) for name, value in hook._env_vars.items() if name.startswith("AIRFLOW_CONN_")}
    assert env["AIRFLOW_CONN_MICROINGEST_KAFKA"]["extra"]["sasl.password"] == KAFKA_SECRET
    assert env["AIRFLOW_CONN_MICROINGEST_POSTGRES"]["password"] == PG_SECRET


@pytest.mark.parametrize(
    "spark",
    [{"conn_type": "spark", "host": "yarn"}, {"conn_type": "spark", "host": "k8s://https://10.0.0.1", "port": 6443}],
)
def test_masters_that_would_put_secrets_on_the_command_line_are_refused(operator, monkeypatch, tmp_path, spark):
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_SPARK", json.dumps(spark))
    with pytest.raises(AirflowFailException, match="refuses these masters"):
        operator.launcher(PLAN, RUN, str(tmp_path / "outcome.json"))


def test_a_standalone_master_from_the_connection_is_used(operator, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_SPARK", "spark://spark-master:7077")
    launcher = operator.launcher(PLAN, RUN, str(tmp_path / "o.json"))
    assert isinstance(launcher, SubmitLauncher)
    argv = launcher.hook._build_spark_submit_command("job.py")
    assert argv[argv.index("--master") + 1] == "spark://spark-master:7077"


def test_a_defined_but_unreadable_spark_connection_fails_instead_of_running_locally(operator, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_SPARK", '{"conn_type": "spark", "host": ')
    with pytest.raises(ConnectionConfigError, match="connection 'microingest_spark': invalid JSON"):
        operator.launcher(PLAN, RUN, str(tmp_path / "outcome.json"))


TOKEN = "c0nnect-t;ken/secret"


def test_a_spark_connect_connection_runs_the_job_as_its_client_with_every_secret_in_the_environment(
    operator, monkeypatch, tmp_path
):
    monkeypatch.setenv(
        "AIRFLOW_CONN_MICROINGEST_SPARK",
        json.dumps(
            {"conn_type": "spark_connect", "host": "sc://spark-connect.internal", "port": 15002, "password": TOKEN}
        ),
    )
    launcher = operator.launcher(PLAN, RUN, str(tmp_path / "outcome.json"))
    assert isinstance(launcher, ConnectLauncher)
    client = launcher.process
    assert client.argv[-2:] == ["--spark-connect", "microingest_spark"]
    assert "spark-submit" not in client.argv[0]
    joined = " ".join(client.argv)
    for secret in (TOKEN, quote(TOKEN, safe=""), KAFKA_SECRET, PG_SECRET, "password"):
        assert secret not in joined
    spark = parse_connection("microingest_spark", client.env["AIRFLOW_CONN_MICROINGEST_SPARK"])
    assert remote_url(spark) == f"sc://spark-connect.internal:15002/;token={quote(TOKEN, safe='')}"
    assert json.loads(client.env["AIRFLOW_CONN_MICROINGEST_POSTGRES"])["password"] == PG_SECRET
    assert client.env["MICROINGEST_OUTCOME_FILE"] == str(tmp_path / "outcome.json")


def test_a_spark_connect_connection_with_a_path_fails_with_its_reason(operator, monkeypatch, tmp_path):
    monkeypatch.setenv(
        "AIRFLOW_CONN_MICROINGEST_SPARK",
        json.dumps({"conn_type": "spark_connect", "host": "sc://spark-host/cluster-a"}),
    )
    with pytest.raises(ConnectionConfigError, match="takes no path"):
        operator.launcher(PLAN, RUN, str(tmp_path / "outcome.json"))


@pytest.mark.parametrize(
    "conn, url",
    [
        (ConnectionInfo("c", "spark_connect", "spark-host"), "sc://spark-host:15002/"),
        (
            ConnectionInfo("c", "spark_connect", "sc://spark-host", 443, login="ingest", extra={"use_ssl": True}),
            "sc://spark-host:443/;user_id=ingest;use_ssl=true",
        ),
        (ConnectionInfo("c", "spark_connect", "sc://spark-host:15003"), "sc://spark-host:15003/"),
    ],
)
def test_spark_connect_urls_follow_the_providers_connection_fields(conn, url):
    assert remote_url(conn) == url


def test_the_jobs_output_goes_to_the_task_log_and_a_stop_ends_it(tmp_path, caplog):
    log = logging.getLogger("test-job-process")
    with caplog.at_level(logging.INFO, logger="test-job-process"):
        assert JobProcess([sys.executable, "-c", "print('one'); print('two'); raise SystemExit(3)"], {}, log).run() == 3
    assert [r.getMessage() for r in caplog.records][-2:] == ["one", "two"]

    job = JobProcess([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"], {}, log)
    runner = threading.Thread(target=job.run)
    runner.start()
    deadline = time.time() + 30
    while "up" not in [r.getMessage() for r in caplog.records] and time.time() < deadline:
        time.sleep(0.05)
    job.stop(grace_seconds=10)
    runner.join(10)
    assert not runner.is_alive() and job._proc.returncode == -signal.SIGTERM
