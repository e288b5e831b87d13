"""What a signed-in user may see of the pipelines: those whose DAG Airflow's auth manager lets them read.

Under the FAB auth manager a role may read some DAGs and not others (permissions on `DAG:<dag_id>`); the lag and
explain pages and a user's view of the metrics show the pipelines of those DAGs and nothing of the rest. Declaration
errors name files and fields of every pipeline, so only a user who may read every DAG sees them."""

from __future__ import annotations

from collections.abc import Sequence

from airflow.api_fastapi.app import get_auth_manager
from fastapi import HTTPException

from microingest.declare.pipeline import Pipeline


def readable(pipelines: Sequence[Pipeline], user) -> list[Pipeline]:
    allowed = get_auth_manager().filter_authorized_dag_ids(dag_ids={p.dag_id for p in pipelines}, user=user)
    return [p for p in pipelines if p.dag_id in allowed]


def reads_every_dag(user) -> bool:
    return get_auth_manager().is_authorized_dag(method="GET", user=user)


def require_readable(pipeline: Pipeline, user) -> None:
    if not readable([pipeline], user):
        raise HTTPException(status_code=403, detail=f"you may not read DAG {pipeline.dag_id}")
