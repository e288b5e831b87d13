"""The lag page in the Airflow UI: every pipeline with its state, per-partition offset and time lag, its last batches
and its lag over time. Served by the api-server in the plugin's FastAPI app (microingest.airflow.plugin_app), shown
in the UI's navigation through an external view.

Plugin FastAPI apps are not behind Airflow's authentication on their own: every route here depends on Airflow's own
check (a valid JWT from the UI's session cookie or an Authorization header), so anonymous requests get 401 and invalid
tokens 403; each user sees the pipelines whose DAGs they may read (`dag_access`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from airflow.api_fastapi.core_api.security import GetUserDep, get_user
from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from microingest.airflow.dag_access import readable, reads_every_dag
from microingest.declare.files import load_declarations
from microingest.declare.pipeline import Pipeline
from microingest.lag.status import PipelineStatus, pipeline_status
from microingest.lag.text import age
from microingest.systems.pipeline_systems import PipelineSystems

CHART_SPAN = timedelta(hours=24)
COLOURS = {
    "OK": "#2e7d32",
    "WARN": "#f9a825",
    "STALL": "#ef6c00",
    "STOP": "#c62828",
    "ERR": "#6a1b9a",
    "AT_RISK": "#b71c1c",
}

router = APIRouter(dependencies=[Depends(get_user)])

_TEMPLATES = Environment(
    loader=PackageLoader("microingest.airflow", "templates"), autoescape=True, undefined=StrictUndefined
)
_TEMPLATES.filters.update(
    age=age, seconds_age=lambda seconds: age(timedelta(seconds=seconds or 0)), thousands="{:,}".format
)


def declarations(user) -> tuple[list[Pipeline], list[str]]:
    """The valid declarations the user may read, and the errors of the malformed ones: those are shown on the page,
    never a failure of the page for every pipeline."""
    pipelines, errors = load_declarations()
    return readable(pipelines, user), [str(error) for error in errors] if reads_every_dag(user) else []


def statuses(pipelines: list[Pipeline]) -> list[tuple[PipelineStatus, list[tuple[datetime, int]]]]:

    out = []
    for pipeline in pipelines:
        systems = PipelineSystems.of(pipeline)
        status = pipeline_status(pipeline, systems=systems)
        with systems.db() as conn:
            out.append((status, lag_series(conn, pipeline.name, datetime.now(timezone.utc) - CHART_SPAN)))
    return out


def lag_series(conn, pipeline: str, since: datetime) -> list[tuple[datetime, int]]:
    """Total offset lag per planning: a planning observes every partition at once, while a lag check records only
    the partitions it saw caught up, whose sum would draw a drop to zero that never happened."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT date_trunc('second', observed_at) AS t, sum(greatest(log_end - coalesce(position, 0), 0)) "
            "FROM microingest.lag_observations WHERE pipeline = %s AND observed_at >= %s AND source = 'plan' "
            "GROUP BY t ORDER BY t",
            (pipeline, since),
        )
        return [(t, int(lag)) for t, lag in cur.fetchall()]


@router.get("/lag", response_class=HTMLResponse)
def lag_page(user: GetUserDep) -> str:
    pipelines, errors = declarations(user)
    return render(statuses(pipelines), datetime.now(timezone.utc), errors)


@router.get("/lag.json")
def lag_json(user: GetUserDep) -> JSONResponse:
    return JSONResponse([status.to_dict() for status, _ in statuses(declarations(user)[0])])


def chart(series: list[tuple[datetime, int]], now: datetime, width: int = 560, height: int = 120) -> Markup:
    """The pipeline's total offset lag over time as an SVG polyline, from the first observation shown to now (so a
    young pipeline's few minutes are not squeezed into a 24-hour axis)."""
    if len(series) < 2:
        return Markup(_TEMPLATES.get_template("lag_chart.svg.j2").render(points=None))
    span = max(now - series[0][0], timedelta(minutes=1))
    start = now - span
    top = max(lag for _, lag in series) or 1

    def x(t):
        return round((t - start) / span * width, 1)

    def y(lag):
        return round(height - lag / top * (height - 10), 1)

    points = " ".join(f"{x(t)},{y(lag)}" for t, lag in series)
    return Markup(
        _TEMPLATES.get_template("lag_chart.svg.j2").render(
            points=points, width=width, height=height, span=span, top=top
        )
    )


def render(
    pipelines: list[tuple[PipelineStatus, list[tuple[datetime, int]]]], now: datetime, errors: Sequence[str] = ()
) -> str:
    shown = [{"status": status, "chart": chart(series, now)} for status, series in pipelines]
    return _TEMPLATES.get_template("lag_page.html.j2").render(pipelines=shown, now=now, errors=errors, colours=COLOURS)
