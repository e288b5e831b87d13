"""The README's container path as a reader follows it: the demo run inside the API server's container, the admin's
password passed from the environment by name (never on a command line). Last of the module files: it adds its own
events and orders to the demo pipelines."""

from __future__ import annotations


def test_the_readmes_demo_command_runs_in_the_stack(stack, platform):
    out = stack.compose(
        "exec",
        "-T",
        "-e",
        "MICROINGEST_AIRFLOW_USERNAME=admin",
        "-e",
        "MICROINGEST_AIRFLOW_PASSWORD",
        "airflow-api-server",
        "python",
        "-m",
        "microingest.cli.demo",
        timeout=1200,
    )  # the stack's environment has the password, as the reader's has it from .env
    assert "=== outcome ===" in out and "=== orders ===" in out, out[-3000:]
