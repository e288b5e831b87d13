"""GET /microingest/metrics: every pipeline's metrics in Prometheus' text format (microingest.observe.metrics).

A scraper sends `Authorization: Bearer <token>`, the token being the password of connection microingest_metrics: a
read-only credential of its own, because Airflow's login tokens expire within a day and a scraper would need
renewing them. Without that connection the endpoint refuses every scrape (503); it never serves anonymously.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Depends, Header, HTTPException
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from microingest.declare.files import load_declarations
from microingest.errors import MicroingestError
from microingest.observe.metrics import PipelineCollector
from microingest.systems.connections import get_connection

METRICS_CONN_ID = "microingest_metrics"


def scrape_token(authorization: str | None = Header(default=None)) -> None:
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        expected = get_connection(METRICS_CONN_ID).password
    except (AirflowNotFoundException, MicroingestError):
        expected = ""
    if not expected:
        raise HTTPException(
            503, f"scraping is off: define connection {METRICS_CONN_ID} with the scrape token as its password"
        )
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "send Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise HTTPException(403, "wrong scrape token")


registry = CollectorRegistry(auto_describe=False)
registry.register(PipelineCollector(lambda: load_declarations()[0]))
router = APIRouter(dependencies=[Depends(scrape_token)])


@router.get("/metrics")
def metrics() -> Response:
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
