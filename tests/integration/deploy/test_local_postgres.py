"""The local Postgres cluster, run as root, reaches its data without loosening any directory on the way to the
state folder: it lives in the postgres user's home instead."""

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from microingest.settings import repo_root

REPO = repo_root()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the cluster as another user")
def test_a_cluster_for_a_private_state_folder_needs_no_permission_change(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    state = private / "state"
    before = {p: stat.S_IMODE(p.stat().st_mode) for p in [private, *private.parents]}
    port = free_port()
    run = lambda code: subprocess.run(  # noqa: E731
        [sys.executable, "-c", f"import json, local_platform.postgres as pg; {code}"],
        cwd=REPO / "scripts",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MICROINGEST_STATE": str(state), "MICROINGEST_PG_PORT": str(port)},
    )
    started = run("print(json.dumps(pg.start())); print(pg.cluster_root())")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        params, root = started.stdout.splitlines()[-2:]
        assert not Path(root).is_relative_to(state) and Path(root).owner() == "postgres"
        with psycopg2.connect(**json.loads(params)) as conn, conn.cursor() as cur:
            cur.execute("SELECT current_setting('data_directory')")
            assert cur.fetchone()[0] == str(Path(root) / "data")
        assert {p: stat.S_IMODE(p.stat().st_mode) for p in before} == before
        assert stat.S_IMODE((state / "postgres" / "password").stat().st_mode) == 0o600
    finally:
        removed = run("pg.remove()")
    assert removed.returncode == 0, removed.stderr
    assert not Path(root).exists()
