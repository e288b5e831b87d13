from microingest.bench.report import warm_up_sentence


def test_the_report_gives_each_warm_up_runs_cost():
    report = {"warm_up_records": 500_000, "warm_up_cpu_us_per_record": [54.0, 27.2, 21.5, 22.8]}
    assert "4 untimed run(s) of the first 500,000 records" in warm_up_sentence(report)
    assert "54.0 → 27.2 → 21.5 → 22.8 CPU µs per record" in warm_up_sentence(report)


def test_no_warm_up_no_sentence():
    assert warm_up_sentence({"warm_up_records": 0}) == ""
