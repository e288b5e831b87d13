"""The lag page in the Airflow UI: refused without a login, and shown to a logged-in user in a real browser."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from helpers.airflow_access import get
from helpers.browser_session import OUTPUT, log_in, wait
from microingest.systems.airflow_api import base_url


@pytest.mark.parametrize("path", ["/microingest/lag", "/microingest/lag.json"])
def test_the_page_refuses_anonymous_and_forged_requests(path):
    assert get(path)[0] == 401
    assert get(path, token="not-a-jwt")[0] == 403


def test_a_logged_in_user_sees_every_pipeline_with_its_state(api, served, browser):
    env = served["live"]
    status, body = get("/microingest/lag.json", token=api.token)
    assert status == 200
    listed = {p["pipeline"]: p for p in json.loads(body)}
    assert env.pipeline.name in listed and listed[env.pipeline.name]["state"] in ("OK", "WARN", "STALL", "STOP")

    log_in(browser)
    browser.get(f"{base_url()}/microingest/lag")
    wait(browser, lambda b: env.pipeline.name in b.find_element(By.TAG_NAME, "body").text)
    assert "Pipeline lag" in browser.title
    browser.save_screenshot(str(OUTPUT / "lag-page.png"))
