"""The `microingest` command line against the real platform: bad input ends in a clear error and exit code 2."""

import os
import subprocess


def cli(*args, **env):
    return subprocess.run(
        ["microingest", *args], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )


def test_plan_shows_ranges_and_writes_nothing(env):
    env.produce(90)
    result = cli("plan", env.pipeline.name)
    assert result.returncode == 0, result.stderr
    assert '"records": 90' in result.stdout
    assert env.ledger() == {} and env.batches() == []


def test_unreachable_kafka_is_a_clear_error(env):
    result = cli(
        "plan",
        env.pipeline.name,
        AIRFLOW_CONN_MICROINGEST_KAFKA='{"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}',
    )
    assert result.returncode == 2
    assert "microingest: error: Kafka at 127.0.0.1:9 is unreachable" in result.stderr


def test_unreachable_postgres_is_a_clear_error_without_the_password(env):
    result = cli("lag", env.pipeline.name, AIRFLOW_CONN_MICROINGEST_POSTGRES="postgresql://u:hunter2@127.0.0.1:9/db")
    assert result.returncode == 2
    assert "microingest: error: Postgres at 127.0.0.1:9/db is unreachable" in result.stderr
    assert "hunter2" not in result.stderr


def test_missing_topic_is_a_clear_error(env, tmp_path):
    (env.pipelines_dir / "ghost.yaml").write_text(
        "name: ghost\ntopic: no-such-topic-here\ntarget_table: t\nschema: {a: string}\n"
    )
    result = cli("plan", "ghost")
    assert result.returncode == 2 and "topic 'no-such-topic-here' does not exist" in result.stderr
