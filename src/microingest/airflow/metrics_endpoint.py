"""GET /microingest/metrics: the pipelines' metrics in Prometheus' text format (microingest.observe.metrics).

A scraper sends `Authorization: Bearer <token>`, the token being the password of connection microingest_metrics: a
read-only credential of its own, because Airflow's login tokens expire within a day and a scraper would need
renewing them; it reads every pipeline. A signed-in user (the UI's session, or an Airflow API token) reads the
pipelines whose DAGs they may read (`dag_access`). Anyone else is refused: 401 without a token, 403 with a wrong one,
503 while connection microingest_metrics is not defined (scraping off); it never serves anonymously.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
from airflow.api_fastapi.auth.managers.models.base_user import BaseUser
from airflow.api_fastapi.core_api.security import resolve_user_from_token
from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from microingest.airflow.dag_access import readable
from microingest.declare.files import load_declarations
from microingest.errors import MicroingestError
from microingest.observe.metrics import PipelineCollector
from microingest.systems.connections import get_connection

METRICS_CONN_ID = "microingest_metrics"


def _scrape_token() -> str:
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return get_connection(METRICS_CONN_ID).password or ""
    except (AirflowNotFoundException, MicroingestError):
        return ""


async def reader(request: Request, authorization: str | None = Header(default=None)) -> BaseUser | None:
    """Who reads: None for the scraper (every pipeline), else the signed-in user."""
    scheme, _, sent = (authorization or "").partition(" ")
    token = sent.strip() if scheme.lower() == "bearer" else ""
    expected = _scrape_token()
    if token and expected and hmac.compare_digest(token.encode(), expected.encode()):
        return None
    if user_token := token or request.cookies.get(COOKIE_NAME_JWT_TOKEN):
        try:
            return await resolve_user_from_token(user_token)
        except HTTPException:
            if not token:
                raise
    if not expected:
        raise HTTPException(
            503, f"scraping is off: define connection {METRICS_CONN_ID} with the scrape token as its password"
        )
    if not token:
        raise HTTPException(401, "send Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
    raise HTTPException(403, "wrong scrape token")


def _every_pipeline():
    return load_declarations()[0]


registry = CollectorRegistry(auto_describe=False)
registry.register(PipelineCollector(_every_pipeline))
router = APIRouter()


@router.get("/metrics")
def metrics(user: Annotated[BaseUser | None, Depends(reader)]) -> Response:
    if user is None:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
    own = CollectorRegistry(auto_describe=False)
    own.register(PipelineCollector(lambda: readable(_every_pipeline(), user)))
    return Response(generate_latest(own), media_type=CONTENT_TYPE_LATEST)
