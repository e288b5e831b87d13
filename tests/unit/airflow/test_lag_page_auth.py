"""Every route of the lag page's app is behind Airflow's check: FastAPI's own doc routes (/docs, /redoc,
/openapi.json) are added outside an app's dependencies, so they must not exist."""

from fastapi.routing import APIRoute

from microingest.airflow.lag_page import app

AUTH = "requires_access_dag.<locals>.inner"  # airflow.api_fastapi.core_api.security's check, with its GetUserDep


def calls(dependant):
    yield dependant.call
    for sub in dependant.dependencies:
        yield from calls(sub)


def test_every_route_depends_on_airflows_access_check():
    assert {r.path for r in app.routes} >= {"/lag", "/lag.json"}
    assert not {r.path for r in app.routes} & {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    for route in app.routes:
        assert isinstance(route, APIRoute), f"{route.path} is served outside FastAPI's dependencies"
        assert AUTH in {getattr(c, "__qualname__", "") for c in calls(route.dependant)}, route.path

