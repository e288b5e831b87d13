"""One error family. Every error the platform raises on purpose is a `MicroingestError`, and its `retryable`
property says what Airflow does with it:

- refused (`Refused`, retryable False): the same request would meet it again (a malformed declaration, a Param that
  asks for what Kafka or the ledger cannot give, a batch fenced or refused by its own checks, a target that cannot
  take the rows). The task fails without spending its retries, and the message says what to change.
- transient (`Transient`, retryable True): it goes away by itself (a server unreachable, a lock held too long, a
  connection lost to a crash). Nothing of the failed batch was written; Airflow retries and the retry goes on where
  this try stopped.

Across the process boundary (the Spark job, then the operator) an error travels in the job's outcome file, a
batches.RunOutcome whose JobFailure names its class and message and says whether it is retryable, with the counts of
what the run committed before; the operator decides by it alone. For a person running the job at a shell it also
exits with REFUSED_EXIT or TRANSIENT_EXIT. Anything else that escapes (a Spark or driver failure) is transient.
"""

from __future__ import annotations

REFUSED_EXIT = 3
TRANSIENT_EXIT = 4


class MicroingestError(Exception):
    retryable: bool = False


class Refused(MicroingestError):
    retryable = False


class Transient(MicroingestError):
    retryable = True


def exit_code_of(exc: MicroingestError) -> int:
    return TRANSIENT_EXIT if exc.retryable else REFUSED_EXIT


class PlanningError(Refused):
    """A run cannot be planned as asked (its range, its kind, the batch history it resumes from)."""
