"""A batch's note of the records its transform_sql filtered out names the statement, on one line, kept short."""

from microingest.commit.copy_commit import STATEMENT_NOTED, filtered_note


def test_the_note_names_the_statement_on_one_line():
    statement = "SELECT *\n  FROM batch\n  WHERE status <> 'test'"
    assert (
        filtered_note(3, statement)
        == "3 record(s) filtered out by transform_sql: SELECT * FROM batch WHERE status <> 'test'"
    )


def test_a_long_statement_is_cut_to_its_start():
    noted = filtered_note(1, "SELECT * FROM batch WHERE " + " OR ".join(f"a = {i}" for i in range(200)))
    said = noted.split(": ", 1)[1]
    assert len(said) == STATEMENT_NOTED and said.endswith("…") and said.startswith("SELECT * FROM batch WHERE a = 0")
