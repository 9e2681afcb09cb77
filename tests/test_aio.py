"""``AsyncMemoryManager``: a complete, typed mirror of ``MemoryManager`` whose batch and
settings really reach the wrapped manager."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest

from gitmem import AsyncMemoryManager, MemoryManager
from gitmem.aio import AsyncMemoryManager as FromAio
from gitmem.errors import LockTimeout, ValidationError
from gitmem.guard.secrets import SecretConfig, SecretPattern
from gitmem.manager import _Setting as ManagerSetting
from gitmem.summary.triggers import SummaryConfig
from tests.conftest import git

# not coroutines on purpose: a context manager, and constructors that open the store
NOT_COROUTINES = {"acting_as", "batch", "init"}


def _public_methods() -> list[str]:
    names = []
    for name, member in inspect.getmembers(MemoryManager):
        raw = inspect.getattr_static(MemoryManager, name)
        if not name.startswith("_") and callable(member) and not isinstance(raw, property):
            names.append(name)
    return names


def test_every_public_method_has_a_coroutine_with_the_same_parameters() -> None:
    assert FromAio is AsyncMemoryManager  # ``from gitmem import`` keeps working
    names = _public_methods()
    assert {"sync", "save_interaction", "search", "batch", "history"} <= set(names)
    for name in names:
        mine = getattr(AsyncMemoryManager, name, None)
        assert mine is not None, f"AsyncMemoryManager lacks {name}"
        if name not in NOT_COROUTINES:
            assert inspect.iscoroutinefunction(mine), f"{name} is not a coroutine"
        theirs = inspect.signature(getattr(MemoryManager, name)).parameters
        ours = inspect.signature(mine).parameters
        assert list(ours.values()) == list(theirs.values()), name
    assert (
        inspect.signature(AsyncMemoryManager.__init__).parameters
        == inspect.signature(MemoryManager.__init__).parameters
    )


def test_the_batch_commits_once_from_its_own_thread(store: Path) -> None:
    async def go() -> tuple[str | None, int]:
        async with AsyncMemoryManager.init(store) as amm:
            await amm.save_interaction("first", "alpha question", "alpha answer")
            before = len(await amm.history())
            async with amm.batch("Import three turns") as result:
                await asyncio.gather(
                    *(amm.save_interaction(f"s{n}", f"question {n}", "answer") for n in range(3))
                )
                await amm.update_metadata("s0", add_tags=["batched"])
            session = await amm.load_memory("s0")
            assert session is not None and session.tags == ["batched"]
            return result.commit, len(await amm.history()) - before

    commit, revisions = asyncio.run(go())
    assert commit is not None and git(store, "rev-parse", "HEAD").strip() == commit
    assert revisions == 1
    assert git(store, "log", "-1", "--format=%s").strip() == "Import three turns"
    assert git(store, "status", "--porcelain") == ""


def test_a_failing_batch_writes_nothing(store: Path) -> None:
    async def go() -> None:
        amm = AsyncMemoryManager.init(store)
        await amm.save_interaction("s", "one", "two")
        with pytest.raises(RuntimeError):
            async with amm.batch():
                await amm.save_interaction("s", "three", "four")
                raise RuntimeError("stop")
        session = await amm.load_memory("s")
        assert session is not None and len(session.interactions) == 1
        await amm.close()

    asyncio.run(go())


def test_the_sync_batch_in_the_event_loop_is_refused_not_deadlocked(store: Path) -> None:
    async def go() -> None:
        amm = AsyncMemoryManager.init(store, lock_timeout=60)
        with amm.manager.batch(), pytest.raises(ValidationError, match=r"async with amm\.batch"):
            await amm.save_interaction("s", "one", "two")
        with amm.manager.batch(), pytest.raises(ValidationError, match=r"async with amm\.batch"):
            async with amm.batch():
                pass
        await amm.close()

    asyncio.run(go())


def test_settings_set_on_the_async_manager_reach_the_wrapped_one(store: Path) -> None:
    async def go() -> None:
        amm = AsyncMemoryManager.init(store)
        amm.secret_config = SecretConfig(
            extra=(SecretPattern("acme-token", r"acme_[0-9a-f]{16}", hints=("acme_",)),)
        )
        amm.summary_config = SummaryConfig(loss_threshold=0.5)
        assert amm.manager.summary_config.loss_threshold == 0.5
        amm.max_message_bytes = 1000
        assert amm.manager.max_message_bytes == 1000
        with pytest.raises(AttributeError):
            amm.secret_konfig = None  # a typo is an error, not a silently ignored setting
        await amm.save_interaction("s", "my key is acme_0123456789abcdef", "noted")
        await amm.close()

    asyncio.run(go())
    text = (store / "sessions" / "a0" / "s.md").read_text()
    assert "acme_0123456789abcdef" not in text
    assert "acme_0123456789abcdef" not in git(store, "log", "-p", "--all")


def test_sync_is_the_coroutine_of_memory_manager_sync(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--bare", "-q", str(remote))

    async def go() -> None:
        amm = AsyncMemoryManager.init(tmp_path / "a")
        await amm.save_interaction("s", "shared turn", "yes")
        await amm.remote_add("origin", str(remote))
        result = await amm.sync()
        assert result.pushed
        other = await AsyncMemoryManager.clone(str(remote), tmp_path / "b")
        assert isinstance(other, AsyncMemoryManager)
        assert await other.session_ids() == ["s"]
        await other.close()
        await amm.close()

    asyncio.run(go())


def test_a_task_started_outside_the_batch_waits_and_commits_on_its_own(store: Path) -> None:
    async def go() -> tuple[str | None, str | None]:
        amm = AsyncMemoryManager.init(store)
        gate = asyncio.Event()

        async def outsider() -> str | None:
            await gate.wait()
            return await amm.save_interaction("outside", "not in the batch", "right")

        task = asyncio.create_task(outsider())  # its context predates the batch
        async with amm.batch("inside") as result:
            await amm.save_interaction("inside", "in the batch", "yes")
            gate.set()
            await asyncio.sleep(0.05)  # let the outsider reach the write lock
            await amm.save_interaction("inside", "still in the batch", "yes")
        sha = await task
        await amm.close()
        return result.commit, sha

    batch_commit, outside_commit = asyncio.run(go())
    assert batch_commit is not None and outside_commit is not None
    changed = git(store, "show", "--name-only", "--format=", batch_commit).split()
    assert changed == ["sessions/fc/inside.md"]
    assert git(store, "show", "--name-only", "--format=", outside_commit).split() == [
        "sessions/45/outside.md"
    ]


def test_acting_as_reaches_the_worker_threads_of_its_block_only(store: Path) -> None:
    async def main() -> None:
        async with AsyncMemoryManager.init(store, agent="owner") as amm:
            with amm.acting_as("alice-bot"):
                await asyncio.gather(*(amm.save_interaction(f"s{n}", "q", "a") for n in range(3)))
            await amm.save_interaction("s-owner", "q", "a")
            with pytest.raises(ValidationError, match="agent name"):
                amm.acting_as(" ")

    asyncio.run(main())
    log = git(store, "log", "--format=%an %(trailers:key=Gitmem-Agent,valueonly,separator=)")
    assert log.splitlines()[:4] == ["owner owner"] + ["alice-bot alice-bot"] * 3


def test_a_sync_write_inside_an_async_batch_fails_instead_of_hanging(store: Path) -> None:
    outcome: list[str] = []

    async def go() -> None:
        amm = AsyncMemoryManager(store, init=True, lock_timeout=1)
        async with amm.batch("import things"):
            await amm.save_interaction("a", "hi", "yo")
            try:  # the batch's worker holds the lock and needs this loop to finish
                amm.manager.save_interaction("b", "sync", "write")
            except LockTimeout as exc:
                outcome.append(str(exc))
        loaded = await amm.load_memory("a")
        outcome.append("saved" if loaded is not None else "lost")

    worker = threading.Thread(target=asyncio.run, args=(go(),), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the synchronous write deadlocked the event loop"
    assert len(outcome) == 2 and outcome[1] == "saved", outcome
    assert "the batch 'import things'" in outcome[0]
    assert MemoryManager(store).load_memory("b") is None
    assert git(store, "status", "--porcelain") == ""


def test_every_setting_of_the_manager_is_a_setting_here() -> None:
    settings = {
        name
        for name, raw in vars(MemoryManager).items()
        if isinstance(raw, ManagerSetting | property) and not name.startswith("_")
    }
    assert {"facts_config", "facts_path", "summary_config", "secret_config"} <= settings
    missing = sorted(name for name in settings if not hasattr(AsyncMemoryManager, name))
    assert not missing, f"AsyncMemoryManager lacks the settings {missing}"
