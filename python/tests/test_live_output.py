"""Live output: the program's output reaches an on_output callback, on the event loop, while the
program still runs; the result is unchanged by it; a callback that raises does not hurt the run."""
import asyncio
import threading

from psych_runtime import CodeTool, OutputChunk, RunLog, Runtime

from conftest import spec_with_code


async def test_output_arrives_while_the_program_runs(sandbox):
    chunks: list[OutputChunk] = []
    first_line = asyncio.Event()
    loop_thread = threading.get_ident()
    threads = set()

    def on_output(chunk: OutputChunk) -> None:
        threads.add(threading.get_ident())
        chunks.append(chunk)
        if b"started" in chunk.data:
            first_line.set()

    async def seen_started() -> bool:
        # Called by the program after it printed: the line must already have been delivered.
        await asyncio.wait_for(first_line.wait(), 10)
        return True

    with Runtime(sandbox=sandbox, tools=[CodeTool("seen_started", seen_started)]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("seen_started")), RunLog.memory())
        outcome = await attempt.run_code(
            "import sys\nprint('started', flush=True)\nok = await seen_started()\n"
            "print('to stderr', file=sys.stderr)\nprint('done')\nreturn ok",
            on_output=on_output,
        )
    result = outcome.result
    assert result.ok and result.value is True, result.failure
    assert threads == {loop_thread}
    stdout = b"".join(c.data for c in chunks if c.stream == "stdout")
    stderr = b"".join(c.data for c in chunks if c.stream == "stderr")
    assert stdout == result.stdout_data == b"started\ndone\n"
    assert stderr == result.stderr_data == b"to stderr\n"
    assert all(c.skipped == 0 for c in chunks)


async def test_a_callback_that_raises_does_not_hurt_the_run(sandbox):
    def broken(chunk: OutputChunk) -> None:
        raise RuntimeError("the display is gone")

    result = await sandbox.run("print('hello')\nreturn 7", on_output=broken)
    assert result.ok and result.value == 7 and result.stdout == "hello\n"
