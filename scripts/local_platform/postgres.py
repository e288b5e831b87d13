"""The local Postgres cluster (Debian's server binaries), used when no Postgres connection is configured.

initdb and postgres refuse to run as root. Run as root, the cluster is therefore owned by the `postgres` system user
and lives under that user's home (/var/lib/postgresql/microingest/<state folder>-<hash>), a directory it can reach
without changing the permissions of any directory on the way to the state folder. Run as anyone else, it lives in the
state folder. The password, which only the platform reads, stays in the state folder either way.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from local_platform.config import PG_PORT, STATE, private_file
from local_platform.processes import log_tail, say, wait_for


def cluster_root() -> Path:
    if (
        os.geteuid() != 0 or (STATE / "postgres" / "data" / "PG_VERSION").exists()
    ):  # the latter: made by an older version
        return STATE / "postgres"
    tag = hashlib.sha256(str(STATE.resolve()).encode()).hexdigest()[:12]
    return Path(pwd.getpwnam("postgres").pw_dir) / "microingest" / f"{STATE.resolve().name.lstrip('.')}-{tag}"


def data_dir() -> Path:
    return cluster_root() / "data"


def log_file() -> Path:
    return cluster_root() / "postgres.log"


def reachable(params: dict) -> bool:
    import psycopg2

    try:
        psycopg2.connect(**{**params, "connect_timeout": 3}).close()
        return True
    except psycopg2.OperationalError:
        return False


def bindir() -> Path:
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if candidates:
        return candidates[0].parent
    raise SystemExit("[platform] no PostgreSQL server binaries found; `make install` installs Debian's postgresql")


def run_as_pg_user(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a server binary as the cluster's owner, from / (the `postgres` user may not enter the caller's folder)."""
    argv = ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv
    return subprocess.run(argv, cwd="/", **kwargs)


def _prepare_root(root: Path) -> None:
    if os.geteuid() != 0:
        root.mkdir(parents=True, exist_ok=True)
        return
    run_as_pg_user(["mkdir", "-p", "-m", "0700", str(root)], check=True)


def start() -> dict:
    root, data, log = cluster_root(), data_dir(), log_file()
    password_file = STATE / "postgres" / "password"
    if not password_file.exists():
        if (data / "PG_VERSION").exists():
            # The state folder was deleted without `make clean`: its cluster, kept outside it (see the module doc),
            # holds the data of a platform that is gone, behind a password nobody has any more.
            say(f"the state folder has no Postgres password: removing the cluster it left in {root}")
            remove()
        private_file(password_file, secrets.token_urlsafe(18))
    password = password_file.read_text().strip()
    params = {
        "host": "127.0.0.1",
        "port": PG_PORT,
        "user": "microingest",
        "password": password,
        "dbname": "microingest",
    }
    _prepare_root(root)
    if not (data / "PG_VERSION").exists():
        say(f"initdb {data}")
        pwfile = root / "initdb.pw"  # in the cluster's own 0700 folder, removed once initdb has read it
        private_file(pwfile, password)
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres")
        try:
            run_as_pg_user(
                [
                    str(bindir() / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "microingest",
                    f"--pwfile={pwfile}",
                    "--auth-local=scram-sha-256",
                    "--auth-host=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        finally:
            pwfile.unlink()
    admin = {**params, "dbname": "postgres"}
    if not reachable(admin):
        opts = f"-c listen_addresses=127.0.0.1 -p {PG_PORT} -c unix_socket_directories={root} -c max_connections=200"
        started = run_as_pg_user(
            [str(bindir() / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start"],
            stdout=subprocess.DEVNULL,
        )
        if started.returncode:
            raise SystemExit(f"[platform] Postgres did not start on 127.0.0.1:{PG_PORT}{log_tail(log)}")
        say(f"started Postgres {bindir().parent.name} on 127.0.0.1:{PG_PORT} (data {data}, log {log})")
    wait_for("Postgres", lambda: reachable(admin), 60, log)
    ensure_database(admin, params["dbname"])
    return params


def pg_ctl(*args: str, check: bool = True) -> None:
    run_as_pg_user(
        [str(bindir() / "pg_ctl"), "-D", str(data_dir()), "-w", "-t", "60", *args],
        check=check,
        stdout=subprocess.DEVNULL,
    )


def stop() -> None:
    if (data_dir() / "postmaster.pid").exists():
        pg_ctl("-m", "fast", "stop", check=False)
        say("stopped Postgres")


def restart() -> None:
    pg_ctl("-m", "fast", "restart")
    say("restarted Postgres")


def crash() -> None:
    """Stop as a power cut would (no checkpoint), then start: crash recovery empties every UNLOGGED table."""
    pg_ctl("-m", "immediate", "restart")
    say("crashed and restarted Postgres")


def is_local_cluster() -> bool:
    return (data_dir() / "PG_VERSION").exists()


def server_pid() -> str:
    pid_file = data_dir() / "postmaster.pid"
    return pid_file.read_text().split()[0] if pid_file.exists() else "-"


def remove() -> None:
    """Delete the cluster's files (`make clean`); they may live outside the state folder, see the module doc."""
    stop()
    if cluster_root().exists():
        shutil.rmtree(cluster_root())
        say(f"removed the Postgres cluster {cluster_root()}")


def ensure_database(params: dict, name: str) -> None:
    import psycopg2

    conn = psycopg2.connect(**params)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if not cur.fetchone():
            cur.execute(f'CREATE DATABASE "{name}"')
            say(f"created database {name}")
    conn.close()
