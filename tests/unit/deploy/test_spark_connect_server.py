"""The Spark Connect server's own settings (`spark.connect.SERVER_CONF`, `SERVER_JAVA_OPTIONS`) reach every server
the project starts: `make up`'s and `microingest spark-connect-server`'s (`server_argv`), compose's and Kubernetes'
(their commands, written out: the Spark image holds nothing of microingest)."""

import pytest
import yaml

from microingest.settings import repo_root
from microingest.spark.connect import SERVER_CONF, SERVER_JAVA_OPTIONS, server_argv

REPO = repo_root()


def confs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def compose_command() -> list[str]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["spark-connect"]["command"]


def kubernetes_command() -> list[str]:
    docs = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "spark.yaml").read_text())
    containers = [c for d in docs if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]]
    return next(c for c in containers if c["name"] == "spark-connect")["command"]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(server_argv("127.0.0.1", 15002), id="server_argv"),
        pytest.param(compose_command(), id="docker-compose"),
        pytest.param(kubernetes_command(), id="kubernetes"),
    ],
)
def test_every_server_gets_the_servers_settings(argv):
    conf = confs(argv)
    assert {key: conf.get(key) for key in SERVER_CONF} == SERVER_CONF
    assert SERVER_JAVA_OPTIONS in conf["spark.driver.extraJavaOptions"].split()


def test_the_servers_java_options_keep_the_jobs_own():
    java = confs(server_argv("127.0.0.1", 15002))["spark.driver.extraJavaOptions"].split()
    assert any(option.startswith("-Dlog4j2.configurationFile=") for option in java)


def test_a_collector_chosen_in_the_servers_conf_is_the_only_one():
    given = "-XX:+UseG1GC -Dx=1"
    argv = server_argv("127.0.0.1", 15002, extra_conf={"spark.driver.extraJavaOptions": given})
    assert confs(argv)["spark.driver.extraJavaOptions"] == given
