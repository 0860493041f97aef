import json
import os
import threading
import time

import pytest
from abstention_console import Backoff, Console


def test_record_returns_in_microseconds_while_the_console_hangs(fake, decision, tmp_path):
    fake.hang = threading.Event()
    console = Console("http://console", "secret", spool_dir=tmp_path, flush_interval=0.01, transport=fake.transport())
    try:
        console.record(decision(0))
        time.sleep(0.05)  # the worker is now stuck in a request that does not answer
        durations = []
        for n in range(1, 1001):
            started = time.perf_counter()
            console.record(decision(n))
            durations.append(time.perf_counter() - started)
        durations.sort()
        assert durations[989] < 0.001  # p99 under a millisecond
    finally:
        fake.hang.set()
        console.close(timeout=5)
    assert len(fake.stored) == 1001


def test_decisions_are_sent_in_batches_of_batch_size(fake, decision, tmp_path):
    with Console(
        "http://console", "secret", spool_dir=tmp_path, batch_size=10, flush_interval=60, transport=fake.transport()
    ) as console:
        for n in range(35):
            console.record(decision(n))
        assert console.flush(timeout=5)
    assert sum(fake.batches) == 35
    assert max(fake.batches) == 10
    assert len(fake.batches) == 4


def test_a_partial_batch_goes_out_after_flush_interval_without_a_flush(fake, decision, tmp_path, wait_until):
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=0.1, transport=fake.transport()) as c:
        c.record(decision(1))
        c.record(decision(2))
        assert wait_until(lambda: len(fake.stored) == 2, timeout=3)


def test_a_missing_occurred_at_is_the_moment_of_recording(fake, decision, tmp_path):
    with Console("http://console", "secret", spool_dir=tmp_path, transport=fake.transport()) as console:
        console.record(decision(1, occurred_at=None))
        assert console.flush(timeout=5)
    assert fake.accepted["q-00001"] == 1


def test_a_decision_without_request_id_is_refused_at_once(tmp_path, fake):
    with Console("http://console", "secret", spool_dir=tmp_path, transport=fake.transport()) as console:
        with pytest.raises(ValueError, match="request_id"):
            console.record({"route": "it-support", "question": "?"})
        with pytest.raises(ValueError):
            console.record({"route": "it-support", "request_id": "q", "gate": {"score": float("nan")}})


def test_retry_after_is_honoured(fake, decision, tmp_path):
    fake.forced.append((503, {"Retry-After": "1"}, b'{"error": {"code": "unavailable"}}'))
    backoff = Backoff(base=0.01, cap=0.02)
    with Console(
        "http://console",
        "secret",
        spool_dir=tmp_path,
        flush_interval=0.01,
        backoff=backoff,
        transport=fake.transport(),
    ) as console:
        console.record(decision(1))
        assert console.flush(timeout=10)
    first, second = fake.attempts[:2]
    assert second - first >= 1.0
    assert fake.accepted["q-00001"] == 1


def test_an_outage_is_spooled_and_replayed_exactly_once(server, fake, decision, tmp_path):
    backoff = Backoff(base=0.05, cap=0.2)
    with Console(server.url, "secret", spool_dir=tmp_path, batch_size=20, flush_interval=0.02, backoff=backoff) as c:
        c.record(decision(0))
        assert c.flush(timeout=5)
        server.stop()
        for n in range(1, 101):
            c.record(decision(n))
        assert not c.flush(timeout=0.5)
        spooled = sum(len(p.read_bytes().splitlines()) for p in tmp_path.glob("spool-*.jsonl"))
        assert spooled == 100
        server.start()
        assert c.flush(timeout=15)
    assert len(fake.stored) == 101
    assert set(fake.accepted.values()) == {1}
    assert list(tmp_path.glob("spool-*.jsonl")) == []


def test_a_restarted_client_replays_the_spool(server, fake, decision, tmp_path):
    server.stop()
    first = Console(server.url, "secret", spool_dir=tmp_path, flush_interval=0.02)
    for n in range(30):
        first.record(decision(n))
    first.close(timeout=0.3)
    assert fake.stored == {}
    server.start()
    with Console(server.url, "secret", spool_dir=tmp_path, flush_interval=0.02) as second:
        assert second.flush(timeout=10)
    assert len(fake.stored) == 30
    assert set(fake.accepted.values()) == {1}


def test_close_spools_what_is_still_queued(fake, decision, tmp_path):
    fake.hang = threading.Event()
    console = Console("http://console", "secret", spool_dir=tmp_path, timeout=0.3, transport=fake.transport())
    for n in range(5):
        console.record(decision(n))
    console.close(timeout=0.1)
    fake.hang.set()
    lines = [json.loads(line) for p in tmp_path.glob("spool-*.jsonl") for line in p.read_bytes().splitlines()]
    assert {d["request_id"] for d in lines} == {decision(n)["request_id"] for n in range(5)}


def test_invalid_items_are_dead_lettered_and_the_valid_ones_delivered(fake, decision, tmp_path):
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=60, transport=fake.transport()) as c:
        for n in range(6):
            c.record(decision(n, question="" if n in (1, 4) else f"question {n}"))
        assert c.flush(timeout=5)
    assert sorted(rid for _, rid in fake.stored) == ["q-00000", "q-00002", "q-00003", "q-00005"]
    dead = [json.loads(line) for line in c.dead_letter_path.read_text().splitlines()]
    assert [d["decision"]["request_id"] for d in dead] == ["q-00001", "q-00004"]
    assert dead[0]["status"] == 400 and dead[0]["error"][0]["field"] == "question"
    assert len(fake.attempts) == 2  # the invalid ones are not retried


def test_a_request_id_stored_with_other_content_is_dead_lettered(fake, decision, tmp_path):
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=60, transport=fake.transport()) as c:
        c.record(decision(1))
        assert c.flush(timeout=5)
        c.record(decision(1, claim="Something else."))
        c.record(decision(2))
        assert c.flush(timeout=5)
    assert ("it-support", "q-00002") in fake.stored
    dead = [json.loads(line) for line in c.dead_letter_path.read_text().splitlines()]
    assert [(d["status"], d["decision"]["claim"]) for d in dead] == [(409, "Something else.")]


def test_a_batch_too_large_for_the_console_is_split(fake, decision, tmp_path):
    fake.max_items = 4
    with Console("http://console", "secret", spool_dir=tmp_path, flush_interval=60, transport=fake.transport()) as c:
        for n in range(10):
            c.record(decision(n))
        assert c.flush(timeout=5)
    assert len(fake.stored) == 10
    assert max(fake.batches) <= 4


def test_a_wrong_token_keeps_the_decisions_for_later(fake, decision, tmp_path):
    backoff = Backoff(base=5, cap=5)
    c = Console("http://console", "wrong", spool_dir=tmp_path, backoff=backoff, transport=fake.transport())
    c.record(decision(1))
    assert not c.flush(timeout=0.5)
    c.close(timeout=0)
    assert not c.dead_letter_path.exists()
    assert any(tmp_path.glob("spool-*.jsonl"))


def test_a_stream_through_a_console_restart_is_stored_exactly_once(server, fake, decision, tmp_path):
    backoff = Backoff(base=0.05, cap=0.2)
    with Console(server.url, "secret", spool_dir=tmp_path, batch_size=50, flush_interval=0.01, backoff=backoff) as c:

        def produce() -> None:
            for n in range(2000):
                c.record(decision(n))
                if n % 100 == 0:
                    time.sleep(0.01)

        producer = threading.Thread(target=produce)
        producer.start()
        time.sleep(0.05)
        server.stop()
        time.sleep(0.5)
        server.start()
        producer.join()
        assert c.flush(timeout=30)
    assert len(fake.stored) == 2000
    assert list(tmp_path.glob("spool-*.jsonl")) == []


def test_retries_that_get_nothing_through_leave_the_spool_as_it_is(fake, decision, tmp_path, wait_until):
    backoff = Backoff(base=0.01, cap=0.02)
    transport = fake.transport(down=lambda: True)
    c = Console(
        "http://console", "secret", spool_dir=tmp_path, flush_interval=0.02, backoff=backoff, transport=transport
    )
    for n in range(10):
        c.record(decision(n))
    assert not c.flush(timeout=0.3)
    before = sorted(p.name for p in tmp_path.glob("spool-*.jsonl"))
    attempts = backoff.failures
    assert wait_until(lambda: backoff.failures > attempts + 3)
    assert sorted(p.name for p in tmp_path.glob("spool-*.jsonl")) == before
    c.close(timeout=0)


def test_a_forked_child_records_with_a_worker_of_its_own(server, fake, decision, tmp_path):
    with Console(server.url, "secret", spool_dir=tmp_path, flush_interval=0.02) as console:
        console.record(decision(0))
        assert console.flush(timeout=5)
        pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if its decisions were stored
            ok = False
            try:
                console.record(decision(1))
                ok = console.flush(timeout=5)
                console.close(timeout=1)
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        console.record(decision(2))
        assert console.flush(timeout=5)
    assert {rid for _, rid in fake.stored} == {"q-00000", "q-00001", "q-00002"}
