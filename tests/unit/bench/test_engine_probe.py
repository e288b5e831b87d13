"""The probe's batches hold exactly the dataset's first records (record i at partition i % P, offset i // P)."""

import pytest

from microingest.bench.engine_probe import first_records


@pytest.mark.parametrize(("records", "partitions"), [(100, 6), (6, 6), (5, 6), (100_000, 6), (7, 1)])
def test_the_ranges_hold_records_0_to_n_and_nothing_else(records, partitions):
    ranges = first_records("t", partitions, records)
    positions = {(r.partition, offset) for r in ranges for offset in range(r.from_offset, r.until_offset)}
    assert positions == {(i % partitions, i // partitions) for i in range(records)}
    assert all(r.from_offset == 0 and r.until_offset > 0 for r in ranges)
