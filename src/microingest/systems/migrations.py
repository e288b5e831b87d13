"""Apply sql/NNN_*.sql in order, each once, each in its own transaction; safe to run concurrently and repeatedly."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from microingest import settings
from microingest.systems.postgres import advisory_lock, connection, require_utf8

log = logging.getLogger(__name__)
_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def migration_files(folder: Path | None = None) -> list[Path]:
    folder = folder or settings.sql_dir()
    files = sorted(p for p in folder.glob("*.sql") if _NAME.match(p.name))
    numbers = [p.name[:3] for p in files]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"duplicate migration numbers in {folder}: {numbers}")
    return files


def migrate(params: dict[str, Any], folder: Path | None = None) -> list[str]:
    """Returns the names of the migrations applied now (empty when already up to date); DatabaseEncodingError, with
    nothing applied, for a database that is not UTF8."""
    applied_now = []
    with connection(params) as conn:
        with conn, conn.cursor() as cur:
            require_utf8(cur)
            advisory_lock(cur, "microingest:migrations")
            cur.execute("CREATE SCHEMA IF NOT EXISTS microingest")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS microingest.schema_migrations "
                "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur.execute("SELECT name FROM microingest.schema_migrations")
            done = {r[0] for r in cur.fetchall()}
        for path in migration_files(folder):
            if path.name in done:
                continue
            with conn, conn.cursor() as cur:
                cur.execute(path.read_text())
                cur.execute("INSERT INTO microingest.schema_migrations (name) VALUES (%s)", (path.name,))
            log.info("applied migration %s", path.name)
            applied_now.append(path.name)
    return applied_now
