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
    # a build before Avro's nested fields, reading a plan with a record's field names
    shape = "java.lang.IllegalArgumentException: decoding spec: expected END_ARRAY, got START_ARRAY in {...}"
    assert refusal(Exception(f"Job aborted.\n  {shape}")) == shape
    # Spark 4.0's words for a session holding a build whose function took (key, value, spec), before headers came.
    arity = (
        "org.apache.spark.sql.AnalysisException: [WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The "
        "`microingest_decode_fd95f65e8cf06726` requires 3 parameters but the actual number is 4. Please, refer to "
        "'***' for a fix. SQLSTATE: 42605"
    )
    assert refusal(Exception(arity)) == arity
    assert refusal(Exception("[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The `upper` requires 1 parameters")) is None
    assert refusal(Exception("org.apache.kafka.common.errors.TimeoutException: Timeout expired")) is None
