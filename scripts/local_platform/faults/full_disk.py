"""A Postgres tablespace on a small filesystem of its own (a tmpfs the soak mounts), which the soak fills up and
frees again: the targets' tables live there, so a commit that needs a new page fails with 'No space left on device'
while the rest of Postgres (its WAL, the ledger, Airflow's metadata) goes on."""

from __future__ import annotations

import os
import pwd
import subprocess

import psycopg2
from psycopg2 import sql

from local_platform import postgres
from microingest.systems.postgres import connection

TABLESPACE = "microingest_soak_small"
SIZE = "256m"


def available() -> bool:
    """Mounting takes root; the tablespace goes beside the data of a Postgres cluster of this platform."""
    return os.geteuid() == 0 and postgres.is_local_cluster()


class SmallTablespace:
    def __init__(self, pg: dict):
        # Beside the local Postgres cluster's data, where its user can reach (the state folder may be in a folder
        # only root may enter, as mktemp's are).
        self.pg, self.mountpoint = pg, postgres.cluster_root() / "soak-tablespace"
        self.filler = self.mountpoint / "filler"

    def create(self, tables: list[str]) -> None:
        """Mount the filesystem, make the tablespace on it and move these tables there (after removing what an
        interrupted soak may have left)."""
        self.remove()
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0700", "tmpfs", str(self.mountpoint)],
            check=True,
            capture_output=True,
            text=True,
        )
        data = self.mountpoint / "pg"
        data.mkdir()
        postgres = pwd.getpwnam("postgres")
        os.chown(self.mountpoint, postgres.pw_uid, postgres.pw_gid)
        os.chown(data, postgres.pw_uid, postgres.pw_gid)
        with connection(self.pg) as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(
                    sql.SQL("CREATE TABLESPACE {} LOCATION %s").format(sql.Identifier(TABLESPACE)), (str(data),)
                )
                for table in tables:
                    schema, name = table.split(".", 1)
                    cur.execute(
                        sql.SQL("ALTER TABLE {} SET TABLESPACE {}").format(
                            sql.Identifier(schema, name), sql.Identifier(TABLESPACE)
                        )
                    )

    def fill(self) -> int:
        """Take every free byte of the filesystem; returns how many."""
        free = os.statvfs(self.mountpoint)
        size = free.f_bavail * free.f_frsize
        with open(self.filler, "wb") as f:
            try:
                f.write(b"\0" * size)
            except OSError:  # full: what was written stays
                pass
        return size

    def free(self) -> None:
        if os.path.ismount(self.mountpoint):
            self.filler.unlink(missing_ok=True)

    def free_bytes(self) -> int:
        stat = os.statvfs(self.mountpoint)
        return stat.f_bavail * stat.f_frsize

    def remove(self) -> None:
        """Move every table in the tablespace back to the default one, drop it, unmount."""
        self.free()
        try:
            with connection(self.pg) as conn:
                conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute("SELECT 1 FROM pg_tablespace WHERE spcname = %s", (TABLESPACE,))
                    if cur.fetchone():
                        try:
                            cur.execute(
                                sql.SQL("ALTER TABLE ALL IN TABLESPACE {} SET TABLESPACE pg_default").format(
                                    sql.Identifier(TABLESPACE)
                                )
                            )
                        except psycopg2.Error:  # its filesystem went away (an interrupted soak): the data is gone
                            cur.execute(
                                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_tablespace t ON "
                                "t.oid = c.reltablespace WHERE t.spcname = %s AND c.relkind = 'r'",
                                (TABLESPACE,),
                            )
                            for (table,) in cur.fetchall():
                                cur.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
                        cur.execute(sql.SQL("DROP TABLESPACE {}").format(sql.Identifier(TABLESPACE)))
        finally:
            if os.path.ismount(self.mountpoint):
                subprocess.run(["umount", str(self.mountpoint)], check=True, capture_output=True, text=True)
