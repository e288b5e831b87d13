"""Where the local platform lives and which ports it takes (each overridable, so two platforms can run side by side)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("MICROINGEST_STATE", REPO / ".state"))
VENV_BIN = Path(sys.executable).parent
ENV_FILE = STATE / "platform.env"
PG_PORT = int(os.environ.get("MICROINGEST_PG_PORT", "55432"))
KAFKA_PORT = int(os.environ.get("MICROINGEST_KAFKA_PORT", "9092"))
CONTROLLER_PORT = int(os.environ.get("MICROINGEST_KAFKA_CONTROLLER_PORT", "9093"))
KAFKA_SASL_PORT = int(os.environ.get("MICROINGEST_KAFKA_SASL_PORT", "9094"))
AIRFLOW_PORT = int(os.environ.get("MICROINGEST_AIRFLOW_PORT", "8080"))
SPARK_CONNECT_PORT = int(os.environ.get("MICROINGEST_SPARK_CONNECT_PORT", "15002"))
SCHEMA_REGISTRY_PORT = int(os.environ.get("MICROINGEST_SCHEMA_REGISTRY_PORT", "18081"))

if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))


def private_file(path: Path, text: str) -> None:
    """Write a file only its owner can read, without a moment of wider permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT
