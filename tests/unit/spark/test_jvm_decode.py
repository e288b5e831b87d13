"""The pure parts of running the JVM decoder: how much of a batch the driver checks, and which failed queries are the
decoder refusing to run in its session (the rest fail the batch as ever)."""

from microingest.spark.jvm_decode import refusal, sample_every


def test_all_of_a_small_batch_is_checked_and_about_a_hundred_records_of_a_large_one():
    assert sample_every(1) == sample_every(100) == sample_every(199) == 1
    assert sample_every(5_000) == 50 and sample_every(1_000_000) == 10_000


def test_only_the_decoders_own_refusals_are_refusals():
    stale = (
        "[FAILED_EXECUTE_UDF] ...\n  java.lang.IllegalStateException: microingest's decoder in this Spark session "
        "was loaded from file:/x/a.jar, not the job's b.jar: another build of microingest used this session before\n"
    )
    assert refusal(Exception(stale)).startswith("java.lang.IllegalStateException: microingest's decoder")
    older = "Caused by: java.lang.IllegalArgumentException: unknown key 'jar' in decoding spec {...}"
    assert refusal(Exception(older)) == older
    assert refusal(Exception("org.apache.kafka.common.errors.TimeoutException: Timeout expired")) is None
