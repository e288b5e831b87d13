from microingest.bench.report import warm_up_sentence
from microingest.bench.runner import STEADY, steady


def test_one_round_is_never_steady():
    assert not steady([20.0])


def test_the_rounds_go_on_while_each_costs_markedly_less_than_the_one_before():
    assert not steady([54.0, 27.2])
    assert not steady([27.2, 27.2 * STEADY - 0.1])


def test_a_round_costing_about_as_much_as_the_one_before_ends_the_warm_up():
    assert steady([27.2, 21.5, 22.8])
    assert steady([21.5, 21.5 * STEADY])


def test_the_report_says_whether_the_warm_up_ended_steady():
    report = {"warm_up_records": 500_000, "warm_up_cpu_us_per_record": [54.0, 27.2, 21.5, 22.8], "warm_up_steady": True}
    assert "54.0 → 27.2 → 21.5 → 22.8 CPU µs per record" in warm_up_sentence(report)
    assert "no less than 90% of the one before" in warm_up_sentence(report)
    assert "still getting cheaper" in warm_up_sentence({**report, "warm_up_steady": False})
    assert warm_up_sentence({"warm_up_records": 0}) == ""
