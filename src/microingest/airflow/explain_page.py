"""The story of an offset in the Airflow UI (`/microingest/explain`, and `/microingest/explain.json` for scripts):
what `microingest explain` prints, for a pipeline, partition and offset asked in the lag page's form. Behind
Airflow's login like the lag page (see `lag_page`), for the pipelines whose DAGs the user may read."""

from __future__ import annotations

import json
from typing import Annotated

from airflow.api_fastapi.core_api.security import GetUserDep, get_user
from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from microingest.airflow.dag_access import require_readable
from microingest.declare.files import load_declarations
from microingest.observe.offset_reads import offset_facts
from microingest.observe.offset_story import OffsetFacts, story, to_dict

router = APIRouter(dependencies=[Depends(get_user)])
_TEMPLATES = Environment(
    loader=PackageLoader("microingest.airflow", "templates"), autoescape=True, undefined=StrictUndefined
)
Position = Annotated[int, Query(ge=0)]


def _facts(user, pipeline: str, topic: str | None, partition: int, offset: int) -> OffsetFacts:
    declared = {p.name: p for p in load_declarations()[0]}
    if pipeline not in declared:
        raise HTTPException(status_code=404, detail=f"no valid declaration of a pipeline named {pipeline!r}")
    require_readable(declared[pipeline], user)
    try:
        asked = declared[pipeline].topic_asked(topic or None)  # the form sends an empty topic for "its only one"
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from None
    return offset_facts(declared[pipeline], asked, partition, offset)


@router.get("/explain", response_class=HTMLResponse)
def explain_page(
    user: GetUserDep, pipeline: str, partition: Position, offset: Position, topic: str | None = None
) -> str:
    facts = _facts(user, pipeline, topic, partition, offset)
    return _TEMPLATES.get_template("explain.html.j2").render(facts=facts, lines=story(facts))


@router.get("/explain.json")
def explain_json(
    user: GetUserDep, pipeline: str, partition: Position, offset: Position, topic: str | None = None
) -> JSONResponse:
    # datetimes as ISO text, as the command's --json gives them
    facts = _facts(user, pipeline, topic, partition, offset)
    return JSONResponse(json.loads(json.dumps(to_dict(facts), default=str)))
