"""deploy/kubernetes/ on paper, checked: every manifest valid against the Kubernetes API's schemas (strict: no field
the API does not know), and the Helm values wired to the same connections, Secrets and images as docker-compose.yml."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from microingest.settings import repo_root

FOLDER = repo_root() / "deploy" / "kubernetes"
KUBERNETES = "1.34.0"  # the oldest Kubernetes still supported upstream when this was written
COMPOSE = yaml.safe_load((repo_root() / "docker-compose.yml").read_text())
VALUES = yaml.safe_load((FOLDER / "values.yaml").read_text())


def manifests():
    for path in sorted(FOLDER.glob("*.yaml")):
        if path.name != "values.yaml":
            for n, doc in enumerate(yaml.safe_load_all(path.read_text())):
                yield pytest.param(doc, id=f"{path.name}#{n}:{doc['kind']}/{doc['metadata']['name']}")


@pytest.mark.parametrize("manifest", list(manifests()))
def test_every_manifest_is_valid_for_the_kubernetes_api(manifest):
    kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def secrets() -> dict[str, dict]:
    docs = [
        d for path in FOLDER.glob("*.yaml") if path.name != "values.yaml" for d in yaml.safe_load_all(path.read_text())
    ]
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}


def test_the_airflow_pods_get_every_connection_compose_gives_its_airflow_from_a_secret_key_that_exists():
    compose_connections = {k for k in COMPOSE["x-airflow-common"]["environment"] if k.startswith("AIRFLOW_CONN_")}
    given = {s["envName"]: s for s in VALUES["secret"]}
    assert set(given) == compose_connections
    known = secrets()
    for entry in given.values():
        assert entry["secretKey"] in known[entry["secretName"]]["stringData"], entry
    for name in (VALUES["fernetKeySecretName"], VALUES["apiSecretKeySecretName"], VALUES["jwtSecretName"]):
        assert {"fernet-key", "api-secret-key", "jwt-secret"} <= set(known[name]["stringData"])
    assert "connection" in known[VALUES["data"]["metadataSecretName"]]["stringData"]


def keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys(v)}
    return {k for v in value for k in keys(v)} if isinstance(value, list) else set()


def test_no_secret_value_is_filled_in_and_the_values_hold_none():
    for secret in secrets().values():
        for key, value in secret["stringData"].items():
            if "password" in value or key.endswith(("key", "secret")) or "@" in value:
                assert "REPLACE_ME" in value, (secret["metadata"]["name"], key)
    # the chart's own secret-bearing keys (a default user's password, keys given inline) are not set here
    assert not keys(VALUES) & {"password", "fernetKey", "apiSecretKey", "jwtSecret", "webserverSecretKey"}


def test_the_images_are_the_ones_docker_builds():
    assert VALUES["images"]["airflow"]["repository"].endswith("/microingest-airflow")
    assert (
        VALUES["config"]["core"]["auth_manager"]
        == COMPOSE["x-airflow-common"]["environment"]["AIRFLOW__CORE__AUTH_MANAGER"]
    )
    spark = [c for d in yaml.safe_load_all((FOLDER / "spark.yaml").read_text()) if d["kind"] == "Deployment"
             for c in d["spec"]["template"]["spec"]["containers"]]  # fmt: skip
    assert {c["image"].rsplit(":", 1)[0].rsplit("/", 1)[1] for c in spark} == {"microingest-spark"}
    connect = next(c for c in spark if c["name"] == "spark-connect")["command"]
    assert connect[connect.index("--class") + 1] == "org.apache.spark.sql.connect.service.SparkConnectServer"
