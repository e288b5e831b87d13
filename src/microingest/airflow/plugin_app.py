"""The FastAPI app the api-server serves under /microingest (microingest.airflow.plugin): the lag page and the story
of an offset, behind Airflow's login, and the Prometheus metrics, behind a scrape token of their own."""

from __future__ import annotations

from fastapi import FastAPI

from microingest.airflow import explain_page, lag_page, metrics_endpoint

# FastAPI adds its /docs, /redoc and /openapi.json routes outside every router's dependencies, so they would be
# served without a login: nothing here needs documenting, and every route left is behind a check.
app = FastAPI(title="microingest", docs_url=None, redoc_url=None, openapi_url=None)
app.include_router(lag_page.router)
app.include_router(explain_page.router)
app.include_router(metrics_endpoint.router)
