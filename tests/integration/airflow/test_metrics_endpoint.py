"""/microingest/metrics on the running api-server: refused without the scrape token, and after a run the counters,
histogram and lag of its pipeline agree with the batch history."""

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.browser_session import OUTPUT
from microingest.systems.airflow_api import base_url
from microingest.systems.connections import get_connection

URL = base_url() + "/microingest/metrics"


def get(token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(URL, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str, pipeline: str) -> dict:
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "pipeline"))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("pipeline") == pipeline
    }


@pytest.fixture(scope="module")
def token() -> str:
    return get_connection("microingest_metrics").password


def test_scraping_needs_the_token(token):
    assert get(None)[0] == 401
    assert get(token[::-1] + "x")[0] == 403
    status, text = get(token)
    assert status == 200 and "# TYPE microingest_offset_lag_records gauge" in text


def test_a_runs_batches_show_in_the_counters_and_its_lag_drops_to_zero(api, served, token, browser):
    env = served["metrics"]
    dag_id, name = env.pipeline.dag_id, env.pipeline.name
    env.produce(250)
    before = samples(get(token)[1], name)
    assert before[("microingest_offset_lag_records", (("partition", "0"), ("topic", env.topic)))] >= 0
    run = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert run.state == "success", run.describe()

    _status, text = get(token)
    after = samples(text, name)
    [(batches, read, written, in_jvm)] = env.query(
        "SELECT count(*), sum(records_read), sum(rows_written), sum(decoded_in_jvm) FROM "
        "microingest.batches WHERE pipeline = %s AND kind = 'ingest'",
        (name,),
    )
    ingest = (("kind", "ingest"),)
    assert after[("microingest_batches_total", ingest)] == batches >= 3  # 250 records in batches of 100
    assert after[("microingest_records_read_total", ingest)] == read == 250
    assert after[("microingest_rows_written_total", ingest)] == written == 250
    assert after[("microingest_dead_letters_total", ingest)] == 0
    assert after[("microingest_records_decoded_in_jvm_total", ingest)] == in_jvm  # as the batch history has it
    assert after[("microingest_batch_duration_seconds_count", ingest)] == batches
    assert after[("microingest_batch_duration_seconds_bucket", (*ingest, ("le", "+Inf")))] == batches
    lags = {k: v for k, v in after.items() if k[0] == "microingest_offset_lag_records"}
    assert len(lags) == 3 and set(lags.values()) == {0}
    assert sum(v for k, v in after.items() if k[0] == "microingest_pipeline_state") == 1
    assert after[("microingest_last_commit_age_seconds", ())] >= 0

    # What a person sees opening the endpoint (the token sent as a scraper sends it).
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Bearer {token}"}})
    browser.get(URL)
    assert "microingest_batches_total" in browser.page_source
    browser.save_screenshot(str(OUTPUT / "metrics-endpoint.png"))
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
