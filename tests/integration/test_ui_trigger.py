"""The trigger form in a real browser: Debian's chromium driven by Selenium logs in to the running Airflow UI, opens a
pipeline's trigger form, fills a backfill range, triggers, and the run lands exactly the asked records.

Screenshots go to $MICROINGEST_TEST_OUTPUT (default .state/test-output/ui/).
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from microingest import settings
from microingest.airflow.rest_client import base_url, credentials
from microingest.kafka_access import partition_bounds
from microingest.live_planning import plan_live_run


OUTPUT = Path(os.environ.get("MICROINGEST_TEST_OUTPUT", settings.state_dir() / "test-output")) / "ui"


@pytest.fixture
def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("Debian's chromium and chromium-driver are needed: `make test` installs them (make browser)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1100"):
        options.add_argument(arg)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.implicitly_wait(0)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    yield chrome
    chrome.quit()


def wait(browser, condition, timeout=60):
    return WebDriverWait(browser, timeout).until(condition)


def button(browser, label: str, within: str = "[role=dialog]"):
    """The button whose visible text is `label` (the form's accordion headers and its submit button)."""
    def find(_):
        found = [b for b in browser.find_elements(By.CSS_SELECTOR, f"{within} button") if b.text.strip() == label]
        return found[0] if found and found[0].is_displayed() else False
    return wait(browser, find)


def log_in(browser) -> None:
    user, password = credentials()
    browser.get(base_url() + "/")
    wait(browser, ready.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser, ready.url_matches(r"^(?!.*/auth/login)"))


def fill_json_editor(browser, editor, value: str) -> None:
    """Replace the content of one of the form's JSON editors (Monaco).

    The form re-formats the JSON as soon as it parses, which would scramble key-by-key typing, so the value goes in
    as one text insertion, the way a paste does."""
    editor.click()
    webdriver.ActionChains(browser).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL) \
        .send_keys(Keys.DELETE).perform()
    browser.execute_cdp_cmd("Input.insertText", {"text": value})


def test_an_operator_backfills_a_range_from_the_trigger_form(browser, served, api, kafka):
    env = served["ui"]
    produced = env.produce(90)
    plan_live_run(env.pipeline)  # started at `latest`: all of it is history, to be backfilled from the form
    _, ends = partition_bounds(kafka, env.pipeline.topic)
    asked = {p: (0, min(end, 20)) for p, end in sorted(ends.items()) if end}
    ranges = ", ".join(f'"{p}": [{lo}, {hi}]' for p, (lo, hi) in asked.items())
    dag_id = env.pipeline.dag_id

    log_in(browser)
    browser.get(f"{base_url()}/dags/{dag_id}")
    wait(browser, ready.element_to_be_clickable((By.CSS_SELECTOR, "[data-testid=trigger-dag-button]"))).click()
    button(browser, "Backfill").click()  # the Params section, not the "Backfill" radio (Airflow's own backfill)
    editor = wait(browser, lambda b: [e for e in b.find_elements(By.CSS_SELECTOR, "[role=dialog] .monaco-editor")
                                      if e.is_displayed()][:1])[0]
    fill_json_editor(browser, editor, "{" + ranges + "}")
    wait(browser, lambda _: all(f'"{p}"' in editor.text for p in asked))
    browser.save_screenshot(str(OUTPUT / "trigger-form-backfill.png"))

    button(browser, "Trigger").click()
    run_id = wait(browser, lambda _: next(iter(api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]), None),
                  timeout=60)["dag_run_id"]
    run = api.wait_for_run(dag_id, run_id, timeout=600)
    assert (run.state, run.tasks) == ("success", {"plan": "success", "ingest": "success"})

    browser.get(f"{base_url()}/dags/{dag_id}/runs/{run_id}")
    wait(browser, lambda b: "success" in b.find_element(By.TAG_NAME, "body").text.lower())
    time.sleep(1)  # let the grid finish drawing for the screenshot
    browser.save_screenshot(str(OUTPUT / "backfill-run-succeeded.png"))

    rows = env.target_rows()
    assert not [pos for pos, n in Counter((p, o) for p, o, _ in rows).items() if n > 1], "duplicated positions"
    assert rows == sorted(r for r in produced if asked.get(r[0], (0, 0))[0] <= r[1] < asked.get(r[0], (0, 0))[1])
    conf = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["conf"]
    assert conf["backfill_ranges"] == {str(p): [lo, hi] for p, (lo, hi) in asked.items()}
