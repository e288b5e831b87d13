"""Airflow's FAB auth manager in the stack: users and roles decide who sees which pipelines and who may run them. A
role that reads one DAG sees that pipeline alone on the lag and explain pages and in the metrics; in Chromium, a viewer
looks at the pipelines and is refused a trigger, and an operator triggers a run that succeeds, whose note the run-notes
user writes (a role that may edit runs and not trigger them)."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from helpers import browser_session
from helpers.browser_session import OUTPUT, button, log_in, wait
from helpers.compose_stack import AIRFLOW_URL, produce_to
from microingest.cli import demo_orders
from microingest.systems.airflow_api import AirflowApiError, AirflowClient

DAGS = ("microingest_demo_events", "microingest_orders")
RUN = secrets.token_hex(3)  # users and roles of this run's own: a reused stack (MICROINGEST_COMPOSE_KEEP) has others


def add_user(stack, name: str, role: str) -> AirflowClient:
    name, password = f"{name}-{RUN}", secrets.token_urlsafe(16)
    argv = ["airflow", "users", "create", "--username", name, "--role", role]
    argv += ["--firstname", name, "--lastname", "test", "--email", f"{name}@microingest.invalid"]
    stack.exec("airflow-api-server", *argv, stdin=f"{password}\n{password}\n")
    client = AirflowClient(user=name, password=password)
    client.user, client.password = name, password
    return client


@pytest.fixture(scope="module")
def orders_reader(stack, platform):
    """A user whose role reads the orders pipeline's DAG and nothing else."""
    for dag_id in DAGS:
        platform.wait_for_dag(dag_id, timeout=300, say=lambda m: None)
    stack.exec("airflow-api-server", "airflow", "sync-perm", "--include-dags")  # the per-DAG resources
    role = f"orders-reader-{RUN}"
    stack.exec("airflow-api-server", "airflow", "roles", "create", role)
    stack.exec(
        "airflow-api-server", "airflow", "roles", "add-perms", role, "-r", "DAG:microingest_orders", "-a", "can_read"
    )
    return add_user(stack, "orders-reader", role)


def metrics_pipelines(token: str) -> set[str]:
    request = urllib.request.Request(f"{AIRFLOW_URL}/microingest/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read().decode()
    families = text_string_to_metric_families(text)
    return {s.labels["pipeline"] for f in families for s in f.samples if "pipeline" in s.labels}


def test_a_role_that_reads_one_dag_sees_that_pipeline_alone(stack, platform, orders_reader):
    everyone = {s["pipeline"] for s in platform.get("/microingest/lag.json")}
    assert {"demo_events", "orders"} <= everyone
    assert [s["pipeline"] for s in orders_reader.get("/microingest/lag.json")] == ["orders"]

    asked = "partition=0&offset=0"
    assert orders_reader.get(f"/microingest/explain.json?pipeline=orders&{asked}")["pipeline"] == "orders"
    with pytest.raises(AirflowApiError) as refused:
        orders_reader.get(f"/microingest/explain.json?pipeline=demo_events&{asked}")
    assert refused.value.status == 403

    assert metrics_pipelines(orders_reader.token) == {"orders"}
    assert {"demo_events", "orders"} <= metrics_pipelines(stack.env["MICROINGEST_METRICS_TOKEN"])


@contextlib.contextmanager
def signed_in(user: str, password: str):
    """A Chromium of its own, logged in through FAB's login form."""
    session = browser_session.chrome()
    browser = next(session)
    try:
        log_in(browser, user, password, AIRFLOW_URL)
        yield browser
    finally:
        next(session, None)


def runs(api: AirflowClient, dag_id: str) -> set[str]:
    return {r["dag_run_id"] for r in api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]}


def trigger_from_the_form(browser, dag_id: str, shot: str) -> None:
    browser.get(f"{AIRFLOW_URL}/dags/{dag_id}")
    wait(browser, ready.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
    button(browser, "Trigger").click()
    time.sleep(3)  # the form's answer (a new run, or the API's refusal) drawn for the screenshot
    browser.save_screenshot(str(OUTPUT / shot))


def test_in_the_browser_a_viewer_looks_and_is_refused_a_trigger_and_an_operator_runs_the_pipeline(stack, platform):
    dag_id = "microingest_orders"
    orders = demo_orders.sample_orders(50, seed=int(RUN, 16))  # ids of their own on a reused stack too
    produce_to("orders", [demo_orders.as_record(o) for o in orders])
    platform.wait_for_dag(dag_id, timeout=300, say=lambda m: None)
    platform.unpause(dag_id)
    viewer, operator = add_user(stack, "viewer", "Viewer"), add_user(stack, "operator", "Op")

    with signed_in(viewer.user, viewer.password) as browser:
        browser.get(f"{AIRFLOW_URL}/microingest/lag")
        wait(browser, lambda b: "orders" in b.find_element(By.TAG_NAME, "body").text)
        browser.save_screenshot(str(OUTPUT / "compose-viewer-lag-page.png"))
        before = runs(platform, dag_id)
        trigger_from_the_form(browser, dag_id, "compose-viewer-trigger-refused.png")
        wait(browser, lambda b: "403 Forbidden" in b.find_element(By.TAG_NAME, "body").text)
        assert runs(platform, dag_id) == before, "a viewer's trigger started a run"

    with pytest.raises(AirflowApiError) as refused:
        viewer.trigger(dag_id)
    assert refused.value.status == 403
    assert viewer.get(f"/api/v2/dags/{dag_id}")["dag_id"] == dag_id

    with signed_in(operator.user, operator.password) as browser:
        earlier = runs(platform, dag_id)
        trigger_from_the_form(browser, dag_id, "compose-operator-triggered.png")
        [run_id] = wait(browser, lambda _: list(runs(platform, dag_id) - earlier), timeout=60)
        assert platform.wait_for_run(dag_id, run_id, timeout=900).state == "success"
        browser.get(f"{AIRFLOW_URL}/dags/{dag_id}/runs/{run_id}")
        wait(browser, lambda b: "success" in b.find_element(By.TAG_NAME, "body").text.lower())
        browser.save_screenshot(str(OUTPUT / "compose-operator-run-succeeded.png"))
    [(landed,)] = stack.query(
        "SELECT count(*) FROM public.orders WHERE order_id = ANY(%s::uuid[])", ([o["order_id"] for o in orders],)
    )
    assert landed == len(orders)
    # A run triggered from the form has no note until the announce task writes one as the run-notes user, whose
    # role may edit runs and not trigger them.
    note = platform.note(dag_id, run_id) or ""
    assert re.match(r"\d+ batch(es)?, [\d,]+ records, ", note), note
    notes_user = AirflowClient(user="microingest", password=stack.env["MICROINGEST_NOTES_PASSWORD"])
    notes_user.set_note(dag_id, run_id, note)
    with pytest.raises(AirflowApiError) as refused:
        notes_user.trigger(dag_id)
    assert refused.value.status == 403
