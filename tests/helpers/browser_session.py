"""A headless Chromium (Debian's chromium + chromium-driver) driven by Selenium, logged in to the running Airflow UI.

Screenshots go to $MICROINGEST_TEST_OUTPUT/ui (default .state/test-output/ui/).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from microingest import settings
from microingest.systems.airflow_api import base_url, credentials

OUTPUT = Path(os.environ.get("MICROINGEST_TEST_OUTPUT", settings.state_dir() / "test-output")) / "ui"


def chrome():
    """A headless Chromium session (a generator: the `browser` fixture of conftest yields from it)."""
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
    def settled(b):
        try:
            return condition(b)
        except WebDriverException as exc:
            # The page went on to another while it was read (the UI's redirect to its login page, say): read again.
            if "aborted by navigation" in (exc.msg or ""):
                return False
            raise

    return WebDriverWait(browser, timeout).until(settled)


def button(browser, label: str, within: str = "[role=dialog]"):
    """The button whose visible text is `label` (the form's accordion headers and its submit button)."""

    def find(_):
        found = [b for b in browser.find_elements(By.CSS_SELECTOR, f"{within} button") if b.text.strip() == label]
        return found[0] if found and found[0].is_displayed() else False

    return wait(browser, find)


def log_in(browser, user: str | None = None, password: str | None = None, base: str | None = None) -> None:
    """Through the auth manager's own login form (the simple one's, or FAB's): the platform's user unless told."""
    if user is None or password is None:
        user, password = credentials()
    browser.get((base or base_url()) + "/")
    wait(browser, ready.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    browser.find_element(By.NAME, "password").send_keys(password + Keys.ENTER)
    wait(browser, ready.url_matches(r"^(?!.*/(auth/)?login)"))


def fill_json_editor(browser, editor, value: str) -> None:
    """Replace the content of one of the form's JSON editors (Monaco).

    The form re-formats the JSON as soon as it parses, which would scramble key-by-key typing, so the value goes in
    as one text insertion, the way a paste does."""
    editor.click()
    webdriver.ActionChains(browser).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).send_keys(
        Keys.DELETE
    ).perform()
    browser.execute_cdp_cmd("Input.insertText", {"text": value})
