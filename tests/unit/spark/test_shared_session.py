"""Which Spark Connect session a job joins: one shared session per build of the decoder jar, the same id on every
machine, and the jar sent only to its own build's session or to one of the job's own."""

from __future__ import annotations

import uuid

from microingest.settings import decoder_digest
from microingest.spark.connect import joined_for, shared_session_id


def test_each_build_of_the_jar_has_a_session_of_its_own_the_same_everywhere():
    a, b = decoder_digest(b"build a"), decoder_digest(b"build b")
    assert shared_session_id(a) == shared_session_id(a)
    assert shared_session_id(a) != shared_session_id(b)
    for digest in (a, b):
        assert uuid.UUID(shared_session_id(digest)).version == 4  # the form pyspark takes


def test_the_installed_jar_names_the_session(tmp_path, monkeypatch):
    jar = tmp_path / "microingest-decoders.jar"
    monkeypatch.setenv("MICROINGEST_DECODER_JAR", str(jar))
    jar.write_bytes(b"one build")
    assert shared_session_id() == shared_session_id(decoder_digest(b"one build"))
    jar.write_bytes(b"the next")
    assert shared_session_id() == shared_session_id(decoder_digest(b"the next"))
    jar.unlink()  # none built: every job shares one session (and decodes by the reference)
    assert shared_session_id() == shared_session_id() != shared_session_id(decoder_digest(b"the next"))


def test_a_jar_replaced_after_the_job_chose_its_session_is_not_sent_there():
    old, new = decoder_digest(b"old build"), decoder_digest(b"new build")
    assert joined_for(shared_session_id(old), own=False, digest=old)
    assert not joined_for(shared_session_id(old), own=False, digest=new)
    assert joined_for(str(uuid.uuid4()), own=True, digest=new)  # a session of the job's own takes any build
