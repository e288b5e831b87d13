"""docker-compose.yml run for real under podman (`make compose-test`): images built with podman from the compose
file's own build sections, the stack driven by docker-compose through podman's API socket, and the health checks
run by a loop (podman schedules them with systemd timers, which this machine has not)."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import psycopg2
import yaml

from microingest.declare.files import get_pipeline
from microingest.settings import repo_root
from microingest.systems.kafka_access import create_topic, produce
from microingest.systems.pipeline_systems import PipelineSystems

REPO = repo_root()
COMPOSE_FILE = REPO / "docker-compose.yml"
BASE_IMAGE = os.environ.get("MICROINGEST_BASE_IMAGE", "localhost/microingest-base:bookworm")
DATA_SERVICES = ("postgres", "kafka-1", "kafka-2", "kafka-3", "schema-registry")
AIRFLOW_URL = "http://127.0.0.1:8080"
REGISTRY = "http://127.0.0.1:8081/apis/ccompat/v7"
PARTITIONS = 3  # of each topic the tests make
REQUIRED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?")


def operator_secrets() -> dict[str, str]:
    """A value for every variable the compose file requires (`${VAR:?...}`): what an operator sets once."""
    names = sorted(set(REQUIRED.findall(COMPOSE_FILE.read_text())))
    return {name: secrets.token_urlsafe(24) for name in names}


class Stack:
    def __init__(self, project: str, state: Path, reuse: bool = False) -> None:
        """`reuse`: the secrets of the stack left up before (its Postgres keeps the password it was made with)."""
        self.project = project
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self.socket = state / "podman.sock"
        kept = state / "secrets.json"
        self.operator_secrets = json.loads(kept.read_text()) if reuse and kept.exists() else operator_secrets()
        kept.touch(mode=0o600)
        kept.write_text(json.dumps(self.operator_secrets))
        self.env = {
            **os.environ,
            **self.operator_secrets,
            "MICROINGEST_BASE_IMAGE": BASE_IMAGE,
            "DOCKER_HOST": f"unix://{self.socket}",
            "COMPOSE_PROJECT_NAME": project,
        }
        self._api: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._health = threading.Thread(target=self._run_health_checks, daemon=True)
        self.spec = yaml.safe_load(COMPOSE_FILE.read_text())

    # --- the engine ------------------------------------------------------------------------------------------
    def start_engine(self) -> None:
        self.socket.unlink(missing_ok=True)
        log = (self.state / "podman-service.log").open("w")
        self._api = subprocess.Popen(
            ["podman", "system", "service", "--time", "0", f"unix://{self.socket}"], stdout=log, stderr=log
        )
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if time.monotonic() > deadline or self._api.poll() is not None:
                raise RuntimeError(f"podman's API socket did not appear: see {log.name}")
            time.sleep(0.2)
        self._health.start()

    def stop_engine(self) -> None:
        self._stop.set()
        if self._api is not None:
            self._api.terminate()
            self._api.wait(30)

    def _run_health_checks(self) -> None:
        while not self._stop.wait(2):
            listed = subprocess.run(
                [
                    "podman",
                    "ps",
                    "--filter",
                    f"label=com.docker.compose.project={self.project}",
                    "--format",
                    "{{.ID}} {{.Status}}",
                ],
                capture_output=True,
                text=True,
            ).stdout.splitlines()
            for line in listed:
                cid, _, status = line.partition(" ")
                if "starting" in status or "unhealthy" in status:
                    subprocess.run(["podman", "healthcheck", "run", cid], capture_output=True)

    # --- images ----------------------------------------------------------------------------------------------
    def build(self, services: Iterable[str]) -> dict[str, float]:
        """Each image the services name built with podman from its build section; seconds per image."""
        seconds: dict[str, float] = {}
        for name in services:
            service = self.spec["services"][name]
            build, image = service.get("build"), service.get("image")
            if build is None or image in seconds:
                continue
            started = time.monotonic()
            subprocess.run(
                [
                    "podman",
                    "build",
                    "--quiet",
                    # The build's downloads take the host's way out (this host's bridge has no route out of it).
                    "--network",
                    "host",
                    "--build-arg",
                    f"BASE={BASE_IMAGE}",
                    "-f",
                    str(REPO / build.get("context", ".") / build["dockerfile"]),
                    "-t",
                    image,
                    str(REPO / build.get("context", ".")),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            seconds[image] = time.monotonic() - started
        return seconds

    # --- compose ---------------------------------------------------------------------------------------------
    def compose(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            ["docker-compose", "-f", str(COMPOSE_FILE), *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"docker-compose {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return done.stdout

    def up(self, *services: str) -> float:
        started = time.monotonic()
        self.compose("up", "-d", "--no-build", *services)
        return time.monotonic() - started

    def down(self, volumes: bool = False) -> None:
        self.compose("down", *(["--volumes"] if volumes else []))

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def kill(self, service: str) -> None:
        subprocess.run(["podman", "kill", self.container(service)], check=True, capture_output=True)

    def logs(self, service: str) -> str:
        done = subprocess.run(["podman", "logs", self.container(service)], capture_output=True, text=True)
        return done.stdout + done.stderr

    def memory_mib(self) -> dict[str, float]:
        """Each running container's memory use now (podman stats), in MiB."""
        listed = subprocess.run(
            ["podman", "stats", "--no-stream", "--no-reset", "--format", "{{.Name}} {{.MemUsage}}"],
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        units = {"B": 1 / 2**20, "kB": 1 / 1024, "KiB": 1 / 1024, "MB": 1, "MiB": 1, "GB": 1024, "GiB": 1024}
        memory = {}
        for line in listed:
            name, used = line.split(" ", 1)
            number, unit = re.fullmatch(r"([\d.]+)\s*([A-Za-z]+)", used.split("/")[0].strip()).groups()
            if name.startswith(f"{self.project}_"):
                memory[name.removeprefix(f"{self.project}_").removesuffix("_1")] = round(float(number) * units[unit], 1)
        return memory

    def volume_file(self, volume: str, path: str) -> bytes:
        """A file in one of the stack's named volumes, read on the host (podman keeps volumes in its storage)."""
        mount = subprocess.run(
            ["podman", "volume", "inspect", f"{self.project}_{volume}", "--format", "{{.Mountpoint}}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return (Path(mount) / path).read_bytes()

    def postgres(self):
        """A connection to the stack's Postgres, database microingest, through its published port."""
        return psycopg2.connect(
            host="127.0.0.1",
            port=5432,
            user="microingest",
            dbname="microingest",
            password=self.env["MICROINGEST_POSTGRES_PASSWORD"],
            connect_timeout=10,
        )

    def query(self, statement: str, args=()) -> list[tuple]:
        with self.postgres() as conn, conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall()

    def exec(self, service: str, *argv: str, stdin: str = "") -> str:
        """A command in a service's running container; what it reads comes on stdin (a password, never an argument)."""
        done = subprocess.run(
            ["podman", "exec", "-i", self.container(service), *argv], input=stdin, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {service} exited {done.returncode}: {done.stderr[-3000:]}")
        return done.stdout

    def exec_fails(self, service: str, *argv: str) -> str:
        """What a command that must fail in a service's container says (its stderr)."""
        done = subprocess.run(["podman", "exec", self.container(service), *argv], capture_output=True, text=True)
        if done.returncode == 0:
            raise AssertionError(f"{' '.join(argv)} in {service} succeeded: {done.stdout[-2000:]}")
        return done.stderr

    def restart(self) -> None:
        """`compose down` then `up`: every container recreated, the volumes kept."""
        self.down()
        self.up()
        self.wait_healthy(DATA_SERVICES)
        self.wait_airflow()

    def exit_code(self, service: str) -> int:
        """A one-shot service's exit code, once it has exited."""
        done = subprocess.run(["podman", "wait", self.container(service)], capture_output=True, text=True)
        return int(done.stdout.strip() or -1)

    def wait_airflow(self, timeout: float = 600) -> float:
        """Until airflow-init has finished and the API server answers its health check."""
        started = time.monotonic()
        if (code := self.exit_code("airflow-init")) != 0:
            raise RuntimeError(f"airflow-init exited {code}:\n{self.logs('airflow-init')[-4000:]}")
        while True:
            try:
                with urllib.request.urlopen(f"{AIRFLOW_URL}/api/v2/monitor/health", timeout=5) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except OSError:
                pass
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"Airflow's API did not answer in {timeout:.0f} s")
            time.sleep(2)

    def wait_healthy(self, services: Iterable[str], timeout: float = 300) -> float:
        started = time.monotonic()
        waiting = set(services)
        while waiting:
            for service in list(waiting):
                status = subprocess.run(
                    ["podman", "inspect", self.container(service), "--format", "{{.State.Health.Status}}"],
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                if status == "healthy":
                    waiting.discard(service)
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"not healthy after {timeout:.0f} s: {sorted(waiting)}")
            time.sleep(1)
        return time.monotonic() - started


def produce_to(pipeline_name: str, records: list[tuple]) -> None:
    """Records into a served pipeline's topic (made with 3 partitions when missing), through the stack's external
    listener: the `platform` fixture's connections."""
    systems = PipelineSystems.of(get_pipeline(pipeline_name))
    [topic] = get_pipeline(pipeline_name).topics
    create_topic(systems.kafka_client, topic, PARTITIONS)
    produce(systems.kafka_client, topic, records)
