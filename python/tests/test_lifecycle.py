"""Cancelling the asyncio task kills the tree; describe() never runs model code; a worker killed
with a call in flight leaves it UNKNOWN, and the next Attempt neither re-runs nor forgets it."""
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import psych_runtime
from psych_runtime import CodeTool, RunLog, Runtime

from conftest import spec_with_code



def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead, only not yet reaped by its parent.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_cancelling_the_task_kills_the_tree(process_sandbox):
    reported = asyncio.Event()
    pids = []

    def report(pid: int, child: int) -> bool:
        pids.extend([pid, child])
        loop.call_soon_threadsafe(reported.set)
        return True

    loop = asyncio.get_running_loop()
    program = textwrap.dedent(
        """
        import os, subprocess
        child = subprocess.Popen(['sleep', '300'])
        await report(pid=os.getpid(), child=child.pid)
        while True:
            pass
        """
    )
    with Runtime(sandbox=process_sandbox, tools=[CodeTool("report", report)]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("report")), RunLog.memory())
        task = asyncio.create_task(attempt.run_code(program))
        await asyncio.wait_for(reported.wait(), 30)
        assert all(alive(pid) for pid in pids)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # run_code returns only after the tree is gone: no polling grace is needed.
        assert not any(alive(pid) for pid in pids), pids
        assert time.monotonic() - started < 5


async def test_cancelling_a_plain_sandbox_run(process_sandbox):
    task = asyncio.create_task(process_sandbox.run("import time\ntime.sleep(60)"))
    await asyncio.sleep(0.5)
    task.cancel()
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5


async def test_describe_runs_no_model_code(sandbox, tmp_path):
    called = []
    with Runtime(sandbox=sandbox, tools=[CodeTool("touch", lambda: called.append(1))]) as runtime:
        statuses = await runtime.verify_sandboxes()
    assert [status.profile for status in statuses] == ["default"]
    described = statuses[0].description
    assert described.ready
    assert described.backend.startswith("linux-")
    assert described.interpreter and described.launcher.endswith("psych-launch-linux")
    assert called == []
    # The same probe from the sandbox itself; nothing it reports came from a program.
    again = await sandbox.describe()
    assert again.backend == described.backend and again.isolation == described.isolation


async def test_a_plain_run_returns_the_value(sandbox):
    result = await sandbox.run("print('hi')\nreturn {'n': 1}")
    assert result.ok and result.value == {"n": 1} and result.stdout == "hi\n"
    assert result.isolation is not None
    assert result.guarantees.process_tree == psych_runtime.Enforcement.ENFORCED


async def wait_for_tree_gone(session: int, seconds: float = 30) -> None:
    """Until no process of the killed worker's session is left: its launcher sees the worker gone
    and kills the program's tree, which may take it a moment."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        fields = stat.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[3]) == session and fields[0] != "Z":
                    left.append(int(entry))
        if not left:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the killed worker's processes outlived it: {left}")


WORKER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from psych_runtime import CodeTool, RunLog, Runtime, AgentSpec, ModelRef, CodeExecution
    from psych_runtime.sandbox.local import local_sandbox

    log_path, marker, temp_root = sys.argv[1], sys.argv[2], sys.argv[3]

    def charge(amount: int) -> str:
        with open(marker, "a") as out:
            out.write(f"charged {amount}\\n")
        time.sleep(120)
        return "charged"

    spec = AgentSpec(name="payer", model=ModelRef(model="scripted"), tools=(CodeTool(name="charge"),),
                     code_execution=CodeExecution())

    async def main():
        with Runtime(sandbox=local_sandbox(temp_root=temp_root), tools=[CodeTool("charge", charge)]) as runtime:
            attempt = runtime.start_attempt(runtime.publish(spec), RunLog.file(log_path))
            await attempt.run_code("return await charge(amount=100)")

    asyncio.run(main())
    """
)


async def test_a_killed_workers_call_stays_unknown_and_is_not_rerun(sandbox, tmp_path):
    log_path, marker = tmp_path / "run.log", tmp_path / "charges"
    # The killed worker cannot remove its execution's directories: they go in a root of this test's
    # own (traversable by the execution's uid, as /tmp is), removed once its tree is gone.
    temp_root = tempfile.mkdtemp(prefix="psych-pytest-")
    os.chmod(temp_root, 0o711)
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(log_path), str(marker), temp_root],
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):
            assert worker.poll() is None, "the worker ended before its call"
            assert time.monotonic() < deadline, "the call never started"
            await asyncio.sleep(0.05)
    finally:
        # The worker dies as a crashed worker does: no cleanup, no chance to record an outcome.
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        await wait_for_tree_gone(worker.pid)
        shutil.rmtree(temp_root, ignore_errors=True)

    def charge(amount: int) -> str:
        with open(marker, "a") as out:
            out.write(f"charged again {amount}\n")
        return "charged"

    with Runtime(sandbox=sandbox, tools=[CodeTool("charge", charge)]) as runtime:
        spec = spec_with_code("charge")
        log = RunLog.file(str(log_path))
        attempt = runtime.start_attempt(runtime.publish(spec), log)
        assert [call.tool for call in attempt.unknown_calls] == ["charge"]
        assert attempt.run_spent().calls == 1
        # Opening the Attempt recorded the outcome as UNKNOWN, once; it ran nothing.
        reopened = runtime.start_attempt(runtime.publish(spec), log)
        assert reopened.unknown_calls == ()
    assert marker.read_text() == "charged 100\n"
