"""Registers the microingest lag page with Airflow's api-server and its UI navigation. Logic: microingest.airflow.lag_page."""

from airflow.plugins_manager import AirflowPlugin

from microingest.airflow.lag_page import app


class MicroingestPlugin(AirflowPlugin):
    name = "microingest"
    fastapi_apps = [{"app": app, "url_prefix": "/microingest", "name": "microingest lag page"}]
    external_views = [{"name": "Pipeline lag", "href": "/microingest/lag", "destination": "nav", "category": "browse",
                       "url_route": "microingest-lag"}]
