"""Every route of the plugin's app is behind a check: the pages behind Airflow's login, the metrics behind the scrape
token or Airflow's login. FastAPI's own doc routes (/docs, /redoc, /openapi.json) are added outside the routers'
dependencies, so they must not exist."""

from fastapi.routing import APIRoute

from microingest.airflow.metrics_endpoint import reader
from microingest.airflow.plugin_app import app

AUTH = "get_user"  # airflow.api_fastapi.core_api.security's check of the session cookie or bearer token


def calls(dependant):
    yield dependant.call
    for sub in dependant.dependencies:
        yield from calls(sub)


def test_every_route_depends_on_a_check():
    paths = {r.path for r in app.routes}
    assert paths >= {"/lag", "/lag.json", "/metrics"}
    assert not paths & {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    for route in app.routes:
        assert isinstance(route, APIRoute), f"{route.path} is served outside FastAPI's dependencies"
        checks = {getattr(c, "__qualname__", "") for c in calls(route.dependant)}
        expected = reader.__qualname__ if route.path == "/metrics" else AUTH
        assert expected in checks, route.path
