"""The real-time engine loop never spins and always yields to request handlers."""

from __future__ import annotations

import asyncio

from tunegate.servers.simulator.engine import StepResult
from tunegate.servers.simulator.http_server import SimServer


class _StuckEngine:
    """Has work but can schedule nothing (what a deadlocked scheduler looks like)."""

    crashed = False

    def __init__(self) -> None:
        self.calls = 0

    def has_work(self) -> bool:
        return True

    def step(self, now_ns: int) -> StepResult | None:
        self.calls += 1
        return None


class _LateEngine:
    """Steps of 1 ns: the loop is always behind its deadlines and catches up."""

    crashed = False

    def __init__(self, steps: int) -> None:
        self.left = steps
        self.done = 0

    def has_work(self) -> bool:
        return self.left > 0

    def step(self, now_ns: int) -> StepResult | None:
        self.left -= 1
        self.done += 1
        return StepResult(now_ns, now_ns + 1)


async def _drive(engine: object) -> SimServer:
    server = SimServer(engine)  # type: ignore[arg-type]
    server._t0 = asyncio.get_running_loop().time()
    server._task = asyncio.create_task(server._loop())
    return server


def test_loop_waits_instead_of_spinning_when_nothing_is_schedulable() -> None:
    async def main() -> int:
        engine = _StuckEngine()
        server = await _drive(engine)
        await asyncio.sleep(0.05)
        assert server._task is not None
        server._task.cancel()
        return engine.calls

    assert asyncio.run(main()) == 1


def test_catching_up_still_lets_handlers_run() -> None:
    async def main() -> list[int]:
        engine = _LateEngine(500)
        server = await _drive(engine)
        seen: list[int] = []
        while engine.left:
            seen.append(engine.done)
            await asyncio.sleep(0)
        assert server._task is not None
        server._task.cancel()
        return seen

    seen = asyncio.run(main())
    assert len(set(seen)) > 100  # the handler side ran between the steps
