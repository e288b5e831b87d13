"""The lag page in the Airflow UI: every pipeline with its state, per-partition offset and time lag, its last batches
and its lag over time. Served by the api-server in the plugin's FastAPI app (microingest.airflow.plugin_app), shown
in the UI's navigation through an external view.

Plugin FastAPI apps are not behind Airflow's authentication on their own: every route here depends on Airflow's own
check (a valid JWT from the UI's session cookie or an Authorization header, and read access to DAGs), so anonymous
requests get 401 and invalid tokens 403.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse, JSONResponse

from microingest.declare.files import load_declarations
from microingest.declare.pipeline import Pipeline
from microingest.lag.status import BatchSummary, PipelineStatus
from microingest.lag.text import age

CHART_SPAN = timedelta(hours=24)
COLOURS = {"OK": "#2e7d32", "WARN": "#f9a825", "STALL": "#ef6c00", "STOP": "#c62828", "ERR": "#6a1b9a"}

router = APIRouter(dependencies=[Depends(requires_access_dag("GET"))])


def declarations() -> tuple[list[Pipeline], list[str]]:
    """The valid declarations, and the errors of the malformed ones: those are shown on the page, never a failure of
    the page for every pipeline."""
    pipelines, errors = load_declarations()
    return pipelines, [str(error) for error in errors]


def statuses(pipelines: list[Pipeline]) -> list[tuple[PipelineStatus, list[tuple[datetime, int]]]]:
    from microingest.lag.status import pipeline_status
    from microingest.systems.pipeline_systems import PipelineSystems

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
def lag_page() -> str:
    pipelines, errors = declarations()
    return render(statuses(pipelines), datetime.now(timezone.utc), errors)


@router.get("/lag.json")
def lag_json() -> JSONResponse:
    return JSONResponse([status.to_dict() for status, _ in statuses(declarations()[0])])


def chart(series: list[tuple[datetime, int]], now: datetime, width: int = 560, height: int = 120) -> str:
    if len(series) < 2:
        return '<p class="muted">lag over time: fewer than two observations in the last 24 hours</p>'
    # From the first observation shown, so a young pipeline's few minutes are not squeezed into a 24-hour axis.
    span = max(now - series[0][0], timedelta(minutes=1))
    start = now - span
    top = max(lag for _, lag in series) or 1

    def x(t):
        return round((t - start) / span * width, 1)

    def y(lag):
        return round(height - lag / top * (height - 10), 1)

    points = " ".join(f"{x(t)},{y(lag)}" for t, lag in series)
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height + 16}" role="img" aria-label="offset lag over the last '
        f'{age(span)}"><polyline fill="none" stroke="#017cee" stroke-width="1.5" points="{points}"/>'
        f'<line x1="0" y1="{height}" x2="{width}" y2="{height}" stroke="#999"/>'
        f'<text x="2" y="10" font-size="10">{top:,} records</text>'
        f'<text x="2" y="{height + 13}" font-size="10">-{age(span)}</text>'
        f'<text x="{width - 24}" y="{height + 13}" font-size="10">now</text></svg>'
    )


def malformed(errors: Sequence[str]) -> str:
    items = "".join(f"<li>{html.escape(error)}</li>" for error in errors)
    return (
        f'<section class="malformed"><h2>Malformed declarations</h2><p class="muted">These pipelines have no DAG '
        f"and are not shown below until their files are fixed.</p><ul>{items}</ul></section>"
    )


def kind_cell(batch: BatchSummary) -> str:
    """The batch's kind, with who made it and why for an operator's batch (a skip)."""
    note = f"<br><small>{html.escape(batch.note)}</small>" if batch.note else ""
    return html.escape(batch.kind) + note


def render(
    pipelines: list[tuple[PipelineStatus, list[tuple[datetime, int]]]], now: datetime, errors: Sequence[str] = ()
) -> str:
    e = html.escape
    parts = []
    for status, series in pipelines:
        state = status.verdict.state.name
        rows = "".join(
            f"<tr><td>{lag.partition}</td><td>{lag.position:,}</td><td>{lag.latest:,}</td><td>{lag.lag:,}</td>"
            f"<td>{age(lag.time_lag)}{' ~' if lag.time_source == 'interpolated' else ''}</td>"
            f'<td><span class="state" style="background:{COLOURS[v.state.name]}">{v.state.name}</span></td>'
            f"<td>{e(v.reason)}</td></tr>"
            for lag, v in status.partitions
        )
        batches = "".join(
            f"<tr><td>{b.committed_at:%Y-%m-%d %H:%M:%S}</td><td>{kind_cell(b)}</td><td>{b.records_read:,}</td>"
            f"<td>{b.rows_written:,}</td><td>{b.dead_letters:,}</td><td>{b.seconds:.1f}s</td>"
            f"<td>{b.rows_per_second:,.0f}</td></tr>"
            for b in status.batches
        )
        last = f"{age(now - status.last_commit)} ago" if status.last_commit else "never"
        parts.append(f"""
<section class="pipeline" id="{e(status.pipeline)}">
  <h2>{e(status.pipeline)} <span class="state" style="background:{COLOURS[state]}">{state}</span></h2>
  <p>{e(status.verdict.reason)}</p>
  <p class="muted">topic {e(status.topic)} · offset lag {status.offset_lag:,} · time lag {age(status.time_lag)} ·
     last commit {last} · window {age(status.window)}</p>
  <table><thead><tr><th>partition</th><th>position</th><th>last stable offset</th><th>offset lag</th>
    <th>time lag</th><th>state</th><th>why</th></tr></thead><tbody>{rows}</tbody></table>
  {chart(series, now)}
  <h3>last batches</h3>
  <table><thead><tr><th>committed</th><th>kind</th><th>records</th><th>rows</th><th>dead letters</th>
    <th>duration</th><th>rows/s</th></tr></thead>
    <tbody>{batches or '<tr><td colspan="7">none yet</td></tr>'}</tbody></table>
</section>""")
    overview = "".join(
        f'<tr><td><a href="#{e(s.pipeline)}">{e(s.pipeline)}</a></td>'
        f'<td><span class="state" style="background:{COLOURS[s.verdict.state.name]}">{s.verdict.state.name}</span>'
        f"</td><td>{s.offset_lag:,}</td><td>{age(s.time_lag)}</td>"
        f"<td>{age(now - s.last_commit) + ' ago' if s.last_commit else 'never'}</td></tr>"
        for s, _ in pipelines
    )
    body = (
        (
            f"<table><thead><tr><th>pipeline</th><th>state</th><th>offset lag</th><th>time lag</th><th>last commit</th>"
            f"</tr></thead><tbody>{overview}</tbody></table>" + "".join(parts)
        )
        if parts
        else "<p>No pipelines declared.</p>"
    )
    if errors:
        body = malformed(errors) + (body if parts else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Pipeline lag · microingest</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 1.2rem; color: #222; }}
  h1 {{ font-size: 1.4rem; }} h2 {{ font-size: 1.15rem; margin-bottom: .3rem; }} h3 {{ font-size: 1rem; }}
  table {{ border-collapse: collapse; margin: .4rem 0 .8rem; font-size: .85rem; }}
  th, td {{ border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }}
  td:last-child, th:last-child {{ text-align: left; }}
  .state {{ color: white; border-radius: .3rem; padding: .05rem .45rem; font-size: .8rem; }}
  .muted {{ color: #666; font-size: .85rem; }} .pipeline {{ margin-bottom: 1.6rem; }}
  .chart {{ width: 560px; max-width: 100%; }}
</style></head>
<body><h1>Pipeline lag</h1>
<p class="muted">Positions from the microingest ledger, offsets from Kafka, as of {now:%Y-%m-%d %H:%M:%S} UTC.
States: OK, WARN (lag not shrinking), STALL (position not moving), STOP (no commit for longer than the window), ERR
(planning failing). ~ marks a time lag interpolated from observations.</p>
{body}
</body></html>"""
