import asyncio
import concurrent.futures
import json
import time

import httpx
from abstention_console import AsyncConsole, Backoff


def run(coroutine):
    """Run `coroutine` on a loop of its own in another thread: in the whole suite an earlier test's
    loop (Playwright's sync API keeps one in the main thread) is still running there, and
    asyncio.run() refuses to start inside it."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _async_transport(fake, down=lambda: False, hang=None):
    sync = fake.transport(down=down)

    async def handler(request: httpx.Request) -> httpx.Response:
        if hang is not None:
            await hang.wait()
        return sync.handle_request(request)

    return httpx.MockTransport(handler)


def test_the_async_console_sends_in_batches_and_reads_the_policy(fake, decision, tmp_path):
    fake.policies["it-support"] = {"version": 1, "cutoff": 0.5}

    async def main():
        async with AsyncConsole(
            "http://console",
            "secret",
            spool_dir=tmp_path,
            batch_size=10,
            flush_interval=60,
            transport=_async_transport(fake),
        ) as console:
            for n in range(25):
                await console.record(decision(n))
            assert await console.flush(timeout=5)
            assert (await console.policy("it-support"))["cutoff"] == 0.5
            assert (await console.policy("it-support"))["cutoff"] == 0.5

    run(main())
    assert sorted(fake.batches) == [5, 10, 10]
    assert "if-none-match" in fake.policy_requests[1]


def test_async_record_does_not_wait_for_a_hanging_console(fake, decision, tmp_path):
    async def main():
        hang = asyncio.Event()
        console = AsyncConsole(
            "http://console",
            "secret",
            spool_dir=tmp_path,
            flush_interval=0.01,
            transport=_async_transport(fake, hang=hang),
        )
        await console.record(decision(0))
        await asyncio.sleep(0.05)
        slowest = 0.0
        for n in range(1, 501):
            started = time.perf_counter()
            await console.record(decision(n))
            slowest = max(slowest, time.perf_counter() - started)
        hang.set()
        assert await console.flush(timeout=5)
        await console.close()
        return slowest

    assert run(main()) < 0.01
    assert len(fake.stored) == 501


def test_the_async_console_spools_an_outage_and_replays_it_once(fake, decision, tmp_path):
    state = {"down": True}

    async def main():
        async with AsyncConsole(
            "http://console",
            "secret",
            spool_dir=tmp_path,
            batch_size=20,
            flush_interval=0.01,
            backoff=Backoff(base=0.05, cap=0.1),
            transport=_async_transport(fake, down=lambda: state["down"]),
        ) as console:
            for n in range(60):
                await console.record(decision(n))
            assert not await console.flush(timeout=0.3)
            lines = [line for p in tmp_path.glob("spool-*.jsonl") for line in p.read_bytes().splitlines()]
            assert {json.loads(line)["request_id"] for line in lines} == {f"q-{n:05d}" for n in range(60)}
            state["down"] = False
            assert await console.flush(timeout=10)

    run(main())
    assert len(fake.stored) == 60
    assert set(fake.accepted.values()) == {1}


def test_closing_the_async_console_spools_what_it_could_not_send(fake, decision, tmp_path):
    async def main():
        console = AsyncConsole(
            "http://console", "secret", spool_dir=tmp_path, transport=_async_transport(fake, down=lambda: True)
        )
        for n in range(5):
            await console.record(decision(n))
        await console.close(timeout=0.2)

    run(main())
    lines = [json.loads(line) for p in tmp_path.glob("spool-*.jsonl") for line in p.read_bytes().splitlines()]
    assert {d["request_id"] for d in lines} == {f"q-{n:05d}" for n in range(5)}
