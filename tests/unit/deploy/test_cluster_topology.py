"""The cluster topology's settings (scripts/local_platform): ports apart from the single topology's, three brokers
in one KRaft quorum replicating three times, Airflow on two Edge workers, one topology per state folder. The
settings are read when the launcher starts, so each case asks a launcher process of its own."""

import json
import os
import subprocess
import sys

from microingest.settings import repo_root

REPO = repo_root()


def ask(code: str, topology: str, state) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MICROINGEST_"))}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO / "scripts",
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "MICROINGEST_TOPOLOGY": topology, "MICROINGEST_STATE": str(state)},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


PORTS = """
import json
from local_platform import config, kafka, spark_cluster
print(json.dumps(sorted({config.PG_PORT, config.AIRFLOW_PORT, config.SCHEDULER_HEALTH_PORT, config.SPARK_CONNECT_PORT,
                         config.SPARK_CONNECT_UI_PORT,
                         config.SCHEMA_REGISTRY_PORT, config.SCHEMA_REGISTRY_PORT + 1, config.SPARK_MASTER_PORT,
                         config.SPARK_MASTER_UI_PORT, *(config.SPARK_MASTER_UI_PORT + n for n in (1, 2)),
                         *(kafka.port(n, first) for n in kafka.nodes() for first in
                           (config.KAFKA_PORT, config.CONTROLLER_PORT, config.KAFKA_SASL_PORT))})))
"""


def test_the_cluster_takes_ports_of_its_own_so_both_topologies_can_run_at_once(tmp_path):
    single, cluster = ask(PORTS, "single", tmp_path / "a"), ask(PORTS, "cluster", tmp_path / "b")
    assert len(cluster) == len(single) + 6  # two more brokers' three listeners each
    assert not set(single) & set(cluster)


BROKERS = """
import json
from local_platform import config, kafka
props = {n: dict(line.split("=", 1) for line in kafka.server_properties(n, config.STATE / f"d{n}").splitlines())
         for n in kafka.nodes()}
print(json.dumps(props))
"""


def test_three_brokers_form_one_quorum_and_replicate_every_topic_three_times(tmp_path):
    props = ask(BROKERS, "cluster", tmp_path)
    assert sorted(props) == ["1", "2", "3"]
    voters = {p["controller.quorum.voters"] for p in props.values()}
    assert len(voters) == 1 and len(voters.pop().split(",")) == 3
    assert [p["node.id"] for p in props.values()] == ["1", "2", "3"]
    assert len({p["listeners"] for p in props.values()}) == 3
    for p in props.values():
        assert p["default.replication.factor"] == p["offsets.topic.replication.factor"] == "3"
        assert p["min.insync.replicas"] == p["transaction.state.log.min.isr"] == "2"
    single = ask(BROKERS, "single", tmp_path / "single")
    assert list(single) == ["1"] and single["1"]["default.replication.factor"] == "1"


AIRFLOW = """
import json
from local_platform import airflow
print(json.dumps({"services": airflow.services(), "executor": airflow.executor_env()["AIRFLOW__CORE__EXECUTOR"],
                  "argv": {s: airflow.argv(s) for s in airflow.services()}}))
"""


def test_the_cluster_runs_airflow_tasks_on_two_edge_workers_the_single_one_on_the_scheduler(tmp_path):
    cluster = ask(AIRFLOW, "cluster", tmp_path)
    workers = [s for s in cluster["services"] if s.startswith("edge-worker-")]
    assert workers == ["edge-worker-1", "edge-worker-2"] and cluster["executor"].endswith("EdgeExecutor")
    # Each worker's own name and pid file: two workers on one machine must not take each other for a duplicate.
    pid_files = {cluster["argv"][w][cluster["argv"][w].index("--pid") + 1] for w in workers}
    names = {cluster["argv"][w][cluster["argv"][w].index("--edge-hostname") + 1] for w in workers}
    assert len(pid_files) == 2 and names == set(workers)
    single = ask(AIRFLOW, "single", tmp_path / "single")
    assert single["executor"] == "LocalExecutor" and not any(s.startswith("edge") for s in single["services"])


def test_a_state_folder_keeps_the_topology_it_was_made_with(tmp_path):
    (tmp_path / "topology").write_text("single\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "MICROINGEST_"))}
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "services.py"), "up", "--no-airflow-services"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "MICROINGEST_TOPOLOGY": "cluster", "MICROINGEST_STATE": str(tmp_path)},
    )
    assert result.returncode != 0
    assert f"{tmp_path} holds a single platform, not a cluster one" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topology"]
