"""Registers microingest's lag page and metrics with Airflow's api-server, and the page in the UI's navigation.
Logic: microingest.airflow.plugin_app."""

from airflow.plugins_manager import AirflowPlugin

from microingest.airflow.plugin_app import app


class MicroingestPlugin(AirflowPlugin):
    name = "microingest"
    fastapi_apps = [{"app": app, "url_prefix": "/microingest", "name": "microingest lag page and metrics"}]
    external_views = [
        {
            "name": "Pipeline lag",
            "href": "/microingest/lag",
            "destination": "nav",
            "category": "browse",
            "url_route": "microingest-lag",
        }
    ]
