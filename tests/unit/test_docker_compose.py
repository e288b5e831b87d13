"""docker-compose.yml cannot run here (no engine); check it parses and wires every service the code expects."""

import json
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from microingest.connections import env_name, kafka_bootstrap, parse_connection
from microingest.declarations import load_pipelines

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
AIRFLOW_COMPONENTS = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


def service_env(name):
    return COMPOSE["services"][name]["environment"]


def test_names_every_service():
    assert {"kafka", "postgres", "spark-master", "spark-worker", "spark-connect", *AIRFLOW_COMPONENTS} <= set(
        COMPOSE["services"])
    assert COMPOSE["services"]["kafka"]["image"].startswith("apache/kafka:4.")
    assert COMPOSE["services"]["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"


def test_airflow_components_get_every_connection_the_pipelines_use():
    services = set(COMPOSE["services"])
    for component in AIRFLOW_COMPONENTS:
        env = service_env(component)
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        for p in load_pipelines(REPO / "pipelines"):  # the ones compose mounts
            for conn_id in (p.kafka_conn_id, p.postgres_conn_id, p.spark_conn_id):
                assert env_name(conn_id) in env, f"{component} lacks {env_name(conn_id)}"
            kafka = parse_connection(p.kafka_conn_id, env[env_name(p.kafka_conn_id)])
            assert {s.split(":")[0] for s in kafka_bootstrap(kafka).split(",")} <= services
            pg = parse_connection(p.postgres_conn_id, env[env_name(p.postgres_conn_id)])
            assert pg.host in services
            spark = json.loads(env[env_name(p.spark_conn_id)])
            assert urlsplit(spark["host"]).hostname in services
        assert urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).hostname in services
        # what a pipeline selects with spark_conn_id: microingest_spark_connect
        spark_connect = json.loads(env[env_name("microingest_spark_connect")])
        assert spark_connect["conn_type"] == "spark_connect" and urlsplit(spark_connect["host"]).hostname in services


def test_mounts_and_build_files_exist():
    assert (REPO / COMPOSE["services"]["airflow-scheduler"]["build"]["dockerfile"]).exists()
    for volume in COMPOSE["services"]["airflow-scheduler"]["volumes"] + COMPOSE["services"]["postgres"]["volumes"]:
        assert (REPO / volume.split(":")[0]).exists(), volume
