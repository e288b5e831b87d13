"""The Airflow plugin: the lag page and the metrics, served by the api-server under /microingest, and the page in
the UI's navigation. Installed with the package through the `airflow.plugins` entry point (pyproject.toml), so it is
registered wherever microingest is installed, with nothing copied into a plugins folder."""

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
