from microingest.bench.runner import STEADY, steady


def test_one_round_is_never_steady():
    assert not steady([20.0])


def test_the_rounds_go_on_while_each_costs_markedly_less_than_the_one_before():
    assert not steady([54.0, 27.2])
    assert not steady([27.2, 27.2 * STEADY - 0.1])


def test_a_round_costing_about_as_much_as_the_one_before_ends_the_warm_up():
    assert steady([27.2, 21.5, 22.8])
    assert steady([21.5, 21.5 * STEADY])
