"""Which of `make test`'s passes a test belongs to, from where it lives and how it is marked.

The first pass runs every test that shares the platform without disturbing it, in two processes. The second runs the
`disruptive` tests one after another in one process (they stop, kill or restart a shared service, so nothing else may
lean on the platform meanwhile), and beside them, in the other process, the `platform_free` tests, which touch none
of its services: the unit tests and the few integration tests that build their own world (a fresh virtualenv, toy
services in a state folder of their own)."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT = Path(__file__).parent / "unit"


def pytest_itemcollected(item):
    """As each test is collected: before `-m` selects on these marks and xdist groups on them."""
    item.add_marker(pytest.mark.platform_free if item.path.is_relative_to(UNIT) else pytest.mark.integration)
    if item.get_closest_marker("disruptive"):
        item.add_marker(pytest.mark.xdist_group("disruptive"))


def pytest_runtest_setup(item):
    """Under `--dist loadgroup` the disruptive tests must all go to one process: with a pytest whose nodes drop the
    group xdist gives them (pytest-xdist issue 1386) they would run beside the others, and their faults break those."""
    if (
        item.get_closest_marker("disruptive")
        and getattr(item.config.option, "loadgroup", False)
        and "@" not in item.nodeid
    ):
        pytest.fail(
            "pytest-xdist did not put this disruptive test in its group with this pytest: it would run beside others"
        )
