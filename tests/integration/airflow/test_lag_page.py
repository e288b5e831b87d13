"""The lag page in the Airflow UI: refused without a login, and shown to a logged-in user in a real browser."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready

from helpers.airflow_access import get
from helpers.browser_session import OUTPUT, log_in, wait
from microingest.systems.airflow_api import base_url


@pytest.mark.parametrize(
    "path", ["/microingest/lag", "/microingest/lag.json", "/microingest/explain.json?pipeline=p&partition=0&offset=0"]
)
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


def test_the_story_of_an_offset_is_asked_from_the_lag_page(api, served, browser):
    env = served["live"]
    far = 10**12
    status, body = get(
        f"/microingest/explain.json?pipeline={env.pipeline.name}&partition=0&offset={far}", token=api.token
    )
    assert status == 200
    told = json.loads(body)
    assert (told["pipeline"], told["offset"]) == (env.pipeline.name, far)
    assert "not written yet: the partition's log ends at" in told["story"][0]
    assert get("/microingest/explain.json?pipeline=nope&partition=0&offset=0", token=api.token)[0] == 404
    assert (
        get(f"/microingest/explain.json?pipeline={env.pipeline.name}&partition=-1&offset=0", token=api.token)[0] == 422
    )

    log_in(browser)
    browser.get(f"{base_url()}/microingest/lag")
    form = wait(
        browser,
        lambda b: next(
            (
                f
                for f in b.find_elements(By.CSS_SELECTOR, "form.explain")
                if f.find_element(By.NAME, "pipeline").get_attribute("value") == env.pipeline.name
            ),
            None,
        ),
    )
    form.find_element(By.NAME, "partition").send_keys("0")
    form.find_element(By.NAME, "offset").send_keys(str(far))
    form.find_element(By.TAG_NAME, "button").click()
    wait(browser, ready.url_contains("/microingest/explain?"))  # reading the page while it navigates is refused
    wait(browser, lambda b: "not written yet" in b.find_element(By.TAG_NAME, "body").text)
    assert f"{env.topic}[0]@{far}" in browser.title
    browser.save_screenshot(str(OUTPUT / "explain-offset.png"))
