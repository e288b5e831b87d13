import pytest

from microingest.batches import OffsetRange
from microingest.spark.batch import RECORDS_PER_TASK, decode_tasks


def ranges(*sizes):
    return [OffsetRange("t", p, 1000, 1000 + size, 1000) for p, size in enumerate(sizes)]


@pytest.mark.parametrize(
    "sizes, tasks",
    [
        ((17, 17, 16, 16, 17, 17), 1),  # a small batch: one task instead of six
        ((RECORDS_PER_TASK, 1, 1), 2),
        ((RECORDS_PER_TASK,) * 3, 3),
        ((16_667,) * 6, 6),  # a big batch keeps the Kafka source's split, one task per range
        ((100_000,), 1),
        ((0, 0), 1),
    ],
)
def test_a_batch_is_decoded_by_one_task_per_range_or_fewer_when_it_is_small(sizes, tasks):
    assert decode_tasks(ranges(*sizes)) == tasks
