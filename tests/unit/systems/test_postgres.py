import pytest

from microingest.systems.postgres import advisory_lock, advisory_unlock, try_advisory_lock


class RecordingCursor:
    def __init__(self, answer=None):
        self.statements, self.answer = [], answer

    def execute(self, statement, params=None):
        self.statements.append((statement, params))

    def fetchone(self):
        return (self.answer,)


@pytest.mark.parametrize("transaction, function", [(False, "pg_advisory_lock"), (True, "pg_advisory_xact_lock")])
def test_a_lock_hashes_its_readable_key_to_the_bigint_postgres_takes(transaction, function):
    cur = RecordingCursor()
    advisory_lock(cur, "microingest:pipeline:demo", transaction=transaction)
    assert cur.statements == [(f"SELECT {function}(hashtextextended(%s, 0))", ("microingest:pipeline:demo",))]


@pytest.mark.parametrize("granted", [True, False])
def test_try_lock_reports_whether_it_was_granted(granted):
    cur = RecordingCursor(granted)
    assert try_advisory_lock(cur, "b1") is granted
    assert cur.statements == [("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", ("b1",))]


def test_unlock_releases_the_same_key():
    cur = RecordingCursor()
    advisory_unlock(cur, "b1")
    assert cur.statements == [("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", ("b1",))]
