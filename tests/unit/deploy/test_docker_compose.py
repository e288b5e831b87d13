"""docker-compose.yml read, not run (`make compose-test` runs it under podman): it parses and wires every service the
code expects."""

import ipaddress
import json
import re
from urllib.parse import urlsplit

import yaml

from microingest.declare.files import load_pipelines
from microingest.settings import repo_root
from microingest.systems.connections import env_name, kafka_bootstrap, parse_connection, schema_registry_config

REPO = repo_root()
TEXT = (REPO / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(TEXT)
AIRFLOW_COMPONENTS = (
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-edge-worker-1",
    "airflow-edge-worker-2",
)
BROKERS = ("kafka-1", "kafka-2", "kafka-3")

# Secure by default (issue 20): compose's `${VAR:?message}` refuses to start while VAR is unset or empty.
REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}")
SECRET_NAME = re.compile(r"JWT|PASSWORD|SECRET|FERNET|TOKEN", re.I)
SPARK_FORBIDDEN = re.compile(r"JWT|PASSWORD|SECRET|FERNET|^AIRFLOW_CONN_|SQL_ALCHEMY_CONN", re.I)
SPARK_SERVICES = ("spark-master", "spark-worker-1", "spark-worker-2", "spark-connect")

# What an operator sets (docker compose would refuse to start without them).
SET_BY_OPERATOR = {
    m["name"]: f"set-{m['name'].lower().replace('_', '-')}" for m in REFERENCE.finditer(TEXT) if m["op"] == ":?"
}


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation of ${VAR}, ${VAR:-default} and ${VAR:?error}, the forms this file uses."""

    def one(m):
        if m["op"] == ":?" and not env.get(m["name"]):
            raise LookupError(m["name"])
        return env.get(m["name"]) or (m["arg"] if m["op"] == ":-" else "")

    return REFERENCE.sub(one, text)


def service_env(name):
    return {
        key: interpolate(str(value), SET_BY_OPERATOR) for key, value in COMPOSE["services"][name]["environment"].items()
    }


def test_names_every_service_of_the_cluster_topology():
    """The same shape as `make up TOPOLOGY=cluster`: three brokers, a Spark master with two workers, two Edge
    workers; and every long-running service is restarted when it dies, as the local supervisord does."""
    assert {"postgres", *BROKERS, *SPARK_SERVICES, *AIRFLOW_COMPONENTS} <= set(COMPOSE["services"])
    voters = set()
    for n, broker in enumerate(BROKERS, start=1):
        service = COMPOSE["services"][broker]
        env = {k: str(v) for k, v in service["environment"].items()}
        assert service["build"]["dockerfile"] == "docker/kafka/Dockerfile" and service["hostname"] == broker
        assert env["KAFKA_NODE_ID"] == str(n)
        voters.add(env["KAFKA_VOTERS"])
    assert voters == {",".join(f"{n}@{b}:9093" for n, b in enumerate(BROKERS, start=1))}
    for name in ("spark-connect", "spark-worker-1", "spark-worker-2"):
        assert "spark://spark-master:7077" in COMPOSE["services"][name]["command"]
    assert [COMPOSE["services"][f"airflow-edge-worker-{n}"]["command"][4] for n in (1, 2)] == [
        "edge-worker-1",
        "edge-worker-2",
    ]
    for name, service in COMPOSE["services"].items():
        one_shot = name in ("airflow-init", "kafka-certs", "kafka-users")
        assert service.get("restart") == ("no" if one_shot else "unless-stopped"), name


def test_airflow_components_get_every_connection_the_pipelines_use():
    services = set(COMPOSE["services"])
    for component in AIRFLOW_COMPONENTS:
        env = service_env(component)
        assert env["AIRFLOW__CORE__EXECUTOR"] == "airflow.providers.edge3.executors.EdgeExecutor"
        assert urlsplit(env["AIRFLOW__EDGE__API_URL"]).hostname in services
        for p in load_pipelines(REPO / "pipelines"):  # the ones compose mounts
            for conn_id in (p.kafka_conn_id, p.postgres_conn_id, p.spark_conn_id):
                assert env_name(conn_id) in env, f"{component} lacks {env_name(conn_id)}"
            kafka = parse_connection(p.kafka_conn_id, env[env_name(p.kafka_conn_id)])
            assert {s.split(":")[0] for s in kafka_bootstrap(kafka).split(",")} <= services
            # the brokers take SCRAM users over TLS only (docker/kafka/broker.sh), on the Python and the Spark side
            assert kafka.extra["security.protocol"] == "SASL_SSL" and kafka.extra["sasl.mechanism"] == "SCRAM-SHA-512"
            # the CA's file for kafka-python; Spark's executors get its certificates inline (spark_kafka_options)
            assert kafka.extra["ssl.ca.location"].startswith("/etc/kafka/ca/")
            assert "ssl.truststore.location" not in kafka.extra
            pg = parse_connection(p.postgres_conn_id, env[env_name(p.postgres_conn_id)])
            assert pg.host in services
            spark = json.loads(env[env_name(p.spark_conn_id)])
            assert urlsplit(spark["host"]).hostname in services
        assert urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).hostname in services
        # every pipeline's default Spark connection is the long-lived driver; microingest_spark_submit, spark-submit
        spark_connect = json.loads(env[env_name("microingest_spark")])
        assert spark_connect["conn_type"] == "spark_connect" and urlsplit(spark_connect["host"]).hostname in services
        submit = json.loads(env[env_name("microingest_spark_submit")])
        assert submit["conn_type"] == "spark" and urlsplit(submit["host"]).hostname in services
        # what a pipeline with value_format avro reads its writer schemas from
        registry = parse_connection("r", env[env_name("microingest_schema_registry")])
        assert urlsplit(schema_registry_config(registry)["url"]).hostname in services


def test_airflow_runs_the_production_auth_manager_and_its_own_image_with_only_the_declarations_mounted():
    for component in (*AIRFLOW_COMPONENTS, "airflow-init"):
        service = COMPOSE["services"][component]
        env = service_env(component)
        assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("fab_auth_manager.FabAuthManager")
        assert not [k for k in env if "SIMPLE_AUTH_MANAGER" in k]
        assert service["build"]["dockerfile"] == "docker/airflow/Dockerfile"
        binds = [interpolate(v, {}) for v in service["volumes"] if v.startswith(("./", "${"))]
        assert binds == ["./pipelines:/opt/microingest/pipelines:ro"], component


def test_the_spark_image_holds_nothing_of_microingest():
    """Spark's services run pyspark's distribution and its requirements; the only files of this repository in the
    image are the Kafka source's POM and log4j's configuration, and the services mount nothing."""
    dockerfile = (REPO / "docker" / "spark" / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.M)
    assert copied == [
        "build/maven/spark-kafka/pom.xml",
        "constraints.txt",
        "src/microingest/spark/entry/log4j2.properties",
    ]
    instructions = [line for line in dockerfile.splitlines() if not line.startswith("#")]
    assert [line for line in instructions if "microingest" in line] == [
        "COPY src/microingest/spark/entry/log4j2.properties /opt/spark/conf/log4j2.properties"
    ]
    for name in SPARK_SERVICES:
        service = COMPOSE["services"][name]
        assert service["build"]["dockerfile"] == "docker/spark/Dockerfile" and "volumes" not in service, name


def test_mounts_and_build_files_exist():
    for name, service in COMPOSE["services"].items():
        if "build" in service:
            assert (REPO / service["build"]["dockerfile"]).exists(), name
        for volume in service.get("volumes", []):
            source = interpolate(volume, {}).split(":")[0]
            if source.startswith("."):
                assert (REPO / source).exists(), (name, volume)
            else:  # a named volume: the state that outlives its containers
                assert source in COMPOSE["volumes"], (name, volume)


def secrets_of(key: str, raw: str) -> list[str]:
    """The parts of an environment value holding a secret: all of it under a secret's name, a URL's password, a JSON
    connection's password. References are masked first: an error message's `?` would end a URL's netloc."""
    refs, numbers = list(REFERENCE.finditer(raw)), iter(range(1000))
    masked = REFERENCE.sub(lambda m: f"REF{next(numbers)}", raw)
    if SECRET_NAME.search(key) and not key.endswith("_FILE"):
        found = [masked]
    elif "://" in masked:
        found = [urlsplit(masked).password]
    elif masked.startswith("{"):
        conn = json.loads(masked)
        found = [conn.get("password"), conn.get("extra", {}).get("sasl.password")]
    else:
        found = []
    return [re.sub(r"REF(\d+)", lambda m: refs[int(m[1])][0], s) for s in found if s is not None]


def environments():
    for name, service in COMPOSE["services"].items():
        for key, raw in (service.get("environment") or {}).items():
            yield name, key, str(raw)


def test_every_secret_is_a_required_variable_with_no_default():
    secrets = [(name, key, s) for name, key, raw in environments() for s in secrets_of(key, raw)]
    for component in AIRFLOW_COMPONENTS:  # the keys Airflow would otherwise generate per container, or leave unset
        assert {"AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY"} <= {
            key for name, key, _ in secrets if name == component
        }
    assert any(key == "POSTGRES_PASSWORD" for _, key, _ in secrets)
    for name, key, secret in secrets:
        ref = REFERENCE.fullmatch(secret)
        assert ref and ref["op"] == ":?", f"{name}: {key} is not one ${{VAR:?message}}"
        assert "python3 -c" in ref["arg"], f"{name}: {key}'s message does not say how to generate one"


def test_every_published_port_binds_to_loopback_unless_told_otherwise():
    published = [(name, port) for name, service in COMPOSE["services"].items() for port in service.get("ports", [])]
    assert {"airflow-api-server"} <= {name for name, _ in published}
    for name, port in published:
        for env, bound in (({}, "loopback"), ({"MICROINGEST_BIND": "192.0.2.1"}, "192.0.2.1")):
            if isinstance(port, dict):  # compose's long syntax
                host_ip = interpolate(str(port.get("host_ip", "")), env)
            else:  # [HOST_IP:]HOST_PORT:CONTAINER_PORT[/PROTOCOL]
                parts = interpolate(str(port), env).rsplit(":", 2)
                host_ip = parts[0].strip("[]") if len(parts) == 3 else ""
            assert host_ip, f"{name} publishes {port} on every interface"
            ip = ipaddress.ip_address(host_ip)
            assert ip.is_loopback if bound == "loopback" else str(ip) == bound, (name, port, env)


def test_spark_services_hold_no_credential_and_publish_no_port():
    secret_variables = {
        ref["name"] for _, key, raw in environments() for s in secrets_of(key, raw) if (ref := REFERENCE.fullmatch(s))
    }
    for name in SPARK_SERVICES:
        service = COMPOSE["services"][name]
        assert "ports" not in service and "env_file" not in service, name
        for key, raw in (service.get("environment") or {}).items():
            assert not SPARK_FORBIDDEN.search(key), f"{name} gets {key}"
            assert not {m["name"] for m in REFERENCE.finditer(str(raw))} & secret_variables, f"{name}: {key}"
            assert not secrets_of(key, str(raw)), f"{name}: {key} holds a credential"
