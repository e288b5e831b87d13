"""One error family: every error the platform raises on purpose is a MicroingestError, and whether Airflow retries it
is its `retryable` property, not a list of names."""

import importlib
import inspect
import pkgutil

import pytest

import microingest
from microingest.errors import MicroingestError, Refused, Transient
from microingest.systems.airflow_api import AirflowApiError, AirflowClient

# Errors that never leave a record's own handling: each becomes a dead letter with its reason.
PER_RECORD = {"DecodeError", "BadRecord", "Unstorable", "UnknownSchemaError"}
OUTSIDE_THE_RUN = {"BenchError"}  # the bench's own
# Answers inside one stage that never leave it: a writer schema the JVM leaves to the reference decoder.
# and the answers of the search for the records a transform_sql fails on (raised as a TransformError).
WITHIN_A_STAGE = {"LeftToReference", "UnplacedFaultError", "TooManyFaultsError"}
# A declaration's statement that is not one row per record: worded into the DeclarationError.
DECLARING = {"StatementError"}
# In the family, retryable by the answer: unreachable or a server error is transient, a refusal is not.
DECIDED_BY_THE_ANSWER = {"AirflowApiError"}
REFUSED = {
    "DeclarationError",
    "IdentifierError",
    "PolicyError",
    "PlanningError",
    "RequestError",
    "RetentionGapError",
    "ConnectionConfigError",
    "LedgerError",
    "FencedError",
    "OverlapError",
    "ReadMismatchError",
    "DeadLetterLimitError",
    "BatchTooLargeError",
    "TargetError",
    "TargetShapeError",
    "UsageError",
    "DatabaseEncodingError",
    "TopicRecreatedError",
    "UnreadableSchemaError",
    "JvmMismatchError",
    "RecordCountError",
    "TransformError",
    "CheckFailedError",
    "RedriveRefusedError",
}
TRANSIENT = {
    "PostgresUnavailableError",
    "KafkaAccessError",
    "CommitTimeoutError",
    "BatchFailedError",
    "SchemaRegistryUnavailableError",
}


def platform_exceptions() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(microingest.__path__, "microingest."):
        if info.name.startswith("microingest.bench.__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[name] = cls
    return found


def test_every_error_of_the_platform_is_in_the_family_with_its_retry_decided_by_a_property():
    found = platform_exceptions()
    family = {n for n, cls in found.items() if issubclass(cls, MicroingestError)}
    assert set(found) - family == PER_RECORD | OUTSIDE_THE_RUN | WITHIN_A_STAGE | DECLARING
    assert family - {"MicroingestError", "Refused", "Transient"} == REFUSED | TRANSIENT | DECIDED_BY_THE_ANSWER
    assert all(not found[n].retryable and issubclass(found[n], Refused) for n in REFUSED)
    assert all(found[n].retryable and issubclass(found[n], Transient) for n in TRANSIENT)


def test_the_airflow_api_answer_decides_whether_another_try_may_succeed():
    assert AirflowApiError("busy", 503).retryable
    assert not AirflowApiError("bad Params", 400).retryable and not AirflowApiError("no credentials").retryable
    with pytest.raises(AirflowApiError, match="unreachable") as unreachable:
        AirflowClient("http://127.0.0.1:9", "nobody", "nothing").get("/api/v2/version")
    assert unreachable.value.retryable
