"""The trigger form in a real browser: Debian's chromium driven by Selenium logs in to the running Airflow UI, opens a
pipeline's trigger form, fills a backfill range (or asks for a redrive), triggers, and the run lands exactly the asked
records."""

from __future__ import annotations

import json
import time

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from helpers.browser_session import OUTPUT, button, fill_json_editor, log_in, wait
from microingest.plan.live import plan_live_run
from microingest.plan.request import SkipRequest
from microingest.plan.skip import plan_skip
from microingest.systems.airflow_api import base_url
from microingest.systems.kafka_access import partition_bounds


def test_an_operator_backfills_a_range_from_the_trigger_form(browser, served, api, kafka):
    env = served["ui"]
    produced = env.produce(90)
    plan_live_run(env.pipeline)  # started at `latest`: all of it is history, to be backfilled from the form
    _, ends = partition_bounds(kafka, env.topic)
    asked = {p: (0, min(end, 20)) for p, end in sorted(ends.items()) if end}
    ranges = ", ".join(f'"{p}": [{lo}, {hi}]' for p, (lo, hi) in asked.items())
    dag_id = env.pipeline.dag_id

    log_in(browser)
    browser.get(f"{base_url()}/dags/{dag_id}")
    wait(browser, ready.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
    button(browser, "Backfill").click()  # the Params section, not the "Backfill" radio (Airflow's own backfill)
    editor = wait(
        browser,
        lambda b: [e for e in b.find_elements(By.CSS_SELECTOR, "[role=dialog] .monaco-editor") if e.is_displayed()][:1],
    )[0]
    fill_json_editor(browser, editor, "{" + ranges + "}")
    wait(browser, lambda _: all(f'"{p}"' in editor.text for p in asked))
    browser.save_screenshot(str(OUTPUT / "trigger-form-backfill.png"))

    button(browser, "Trigger").click()
    run_id = wait(
        browser, lambda _: next(iter(api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]), None), timeout=60
    )["dag_run_id"]
    run = api.wait_for_run(dag_id, run_id, timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})

    browser.get(f"{base_url()}/dags/{dag_id}/runs/{run_id}")
    wait(browser, lambda b: "success" in b.find_element(By.TAG_NAME, "body").text.lower())
    time.sleep(1)  # let the grid finish drawing for the screenshot
    browser.save_screenshot(str(OUTPUT / "backfill-run-succeeded.png"))

    rows = env.landed_once()
    assert rows == sorted(r for r in produced if asked.get(r[0], (0, 0))[0] <= r[1] < asked.get(r[0], (0, 0))[1])
    conf = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["conf"]
    assert conf["backfill_ranges"] == {str(p): [lo, hi] for p, (lo, hi) in asked.items()}


def test_an_operator_redrives_dead_letters_from_the_trigger_form(browser, served, api):
    """Records skipped in an incident, redriven from the form's Redrive section: one switch, one partition."""
    env = served["ui_redrive"]
    sent = env.send_to(0, [(b"k", json.dumps({"event_id": f"r{i}"}).encode()) for i in range(4)])
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, 4, "incident"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    dag_id = env.pipeline.dag_id

    log_in(browser)
    browser.get(f"{base_url()}/dags/{dag_id}")
    wait(browser, ready.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
    button(browser, "Redrive dead letters").click()  # the section
    # Params are named element_<param> in the form: the switch, then the partition field
    wait(browser, ready.element_to_be_clickable((By.ID, "switch:element_redrive:control"))).click()
    wait(browser, ready.element_to_be_clickable((By.NAME, "element_redrive_partition"))).send_keys("0")
    wait(browser, lambda b: b.find_element(By.ID, "switch:element_redrive").get_attribute("data-state") == "checked")
    browser.save_screenshot(str(OUTPUT / "trigger-form-redrive.png"))

    button(browser, "Trigger").click()
    run_id = wait(
        browser, lambda _: next(iter(api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]), None), timeout=60
    )["dag_run_id"]
    run = api.wait_for_run(dag_id, run_id, timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})
    conf = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["conf"]
    assert conf["redrive"] is True and conf["redrive_partition"] == 0
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(sent)
    assert api.note(dag_id, run_id).startswith("redrive: 1 batch, 4 dead letters decoded again, 4 rows written")
