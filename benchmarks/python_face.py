"""The Python face beside the C++ library it wraps, measured side by side in one run
(docs/python.md, "Speed"). Run with the interpreter psych_runtime is installed in:

    build/python-venv/bin/python benchmarks/python_face.py [--rounds N] [--calls N] [--check]

1. `await sandbox.run("return 1")` against the library's own run() of the same program on the same
   pinned backend (bench_python_baseline, driven a step at a time over a pipe so each round puts the
   two beside each other). Target: the Python face at most 1.15x.
2. A Python tool called from a program, sequentially: calls per second of the execution, a sync
   tool and an async one, beside a C++ function tool on the same path, each journalled in a run
   log held in memory (target: at least 5,000/s) and in the file run log (one durable record per
   call, which bounds both sides alike).

Prints "BENCH name value unit" lines; with --check it exits 1 when a target is missed.
"""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psych_runtime
from psych_runtime import BindingBudget, CodeTool, IsolationLevel, RunLog, Runtime
from psych_runtime.sandbox.local import local_sandbox
from psych_runtime.sandbox.profiles import SandboxProfile

BUILD = Path(os.environ.get("PSYCH_BUILD_DIR", Path(__file__).resolve().parents[1] / "build"))
BACKENDS = (("linux-process", IsolationLevel.PROCESS), ("linux-namespaces", IsolationLevel.ISOLATED))


class Baseline:
    """bench_python_baseline: the C++ library's run() and a C++ function tool, one step per request."""

    def __init__(self, backend: str, isolation: IsolationLevel) -> None:
        self.process = subprocess.Popen(
            [str(BUILD / "benchmarks" / "bench_python_baseline"), backend, isolation.value],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def ask(self, line: str) -> float:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            raise RuntimeError(f"bench_python_baseline: {answer or 'ended'}")
        return float(answer)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


async def run_beside(backend: str, isolation: IsolationLevel, rounds: int, warm_up: int = 3) -> tuple[float, float]:
    sandbox = local_sandbox(isolation=isolation, backend=backend)
    baseline = Baseline(backend, isolation)
    library, python = [], []
    try:
        for i in range(rounds + warm_up):
            cpp_seconds = baseline.ask("run")
            started = time.perf_counter()
            result = await sandbox.run("return 1")
            py_seconds = time.perf_counter() - started
            if not (result.ok and result.value == 1):
                raise RuntimeError(f"a Python run failed: {result.failure}")
            if i >= warm_up:
                library.append(cpp_seconds)
                python.append(py_seconds)
    finally:
        baseline.close()
    return statistics.median(library), statistics.median(python)


async def tool_calls_per_second(calls: int, scratch: Path) -> dict[str, float]:
    """Calls per second of one program's sequential calls, each side journalled in a run log held in
    memory and in the file run log a runtime keeps per Run (one durable record per call)."""
    def echo(i: int) -> int:
        return i

    async def echo_async(i: int) -> int:
        return i

    big = 1 << 30
    budget = BindingBudget(max_calls=calls + 1, max_run_calls=3 * calls + 3, max_total_bytes=big,
                           max_run_transfer_bytes=big, max_produced_bytes=big, max_run_produced_bytes=big,
                           max_preserved_bytes=big, max_run_preserved_bytes=big)
    sandbox = local_sandbox(backend="linux-process")
    profile = SandboxProfile("default", sandbox, binding_budget=budget)
    spec = psych_runtime.AgentSpec(
        name="bench", model=psych_runtime.ModelRef(model="none"),
        tools=(CodeTool(name="echo"), CodeTool(name="echo_async")),
        code_execution=psych_runtime.CodeExecution(),
    )
    rates = {}
    baseline = Baseline("linux-process", IsolationLevel.PROCESS)
    try:
        with Runtime(sandboxes=[profile], tools=[CodeTool("echo", echo), CodeTool("echo_async", echo_async)]) as runtime:
            for log_kind in ("memory", "file"):
                for tool in ("echo", "echo_async"):
                    path = scratch / f"{tool}.log"
                    log = RunLog.memory() if log_kind == "memory" else RunLog.file(str(path))
                    attempt = runtime.start_attempt(runtime.publish(spec), log)
                    outcome = await attempt.run_code(f"for i in range({calls}):\n    await {tool}(i=i)\nreturn {calls}")
                    if not outcome.result or outcome.result.value != calls:
                        raise RuntimeError(f"the {tool} program failed: {outcome.payload}")
                    rates[f"{log_kind}.{tool}"] = calls / outcome.result.duration_seconds
                    del attempt, log
                    path.unlink(missing_ok=True)
                rates[f"{log_kind}.cpp"] = baseline.ask(
                    f"calls {calls}" if log_kind == "memory" else f"calls {calls} {scratch / 'cpp.log'}")
    finally:
        baseline.close()
    return rates


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    missed = []
    for backend, isolation in BACKENDS:
        try:
            library, python = await run_beside(backend, isolation, args.rounds)
        except psych_runtime.SandboxSetupError as unavailable:
            print(f"  ({backend} not measured: {unavailable})")
            continue
        ratio = python / library
        print(f"BENCH python.run_return_one.{backend}.library {library * 1e3:.2f} ms")
        print(f"BENCH python.run_return_one.{backend}.python {python * 1e3:.2f} ms")
        print(f"BENCH python.run_return_one.{backend}.ratio {ratio:.3f} x (target <= 1.15)")
        if ratio > 1.15:
            missed.append(f"{backend}: {ratio:.3f}x")
    with tempfile.TemporaryDirectory(prefix="psych-bench-") as scratch:
        rates = await tool_calls_per_second(args.calls, Path(scratch))
    # The memory log's figures keep their plain names: they are the face's own cost, which the target
    # judges. With the file log (one durable record per call, as a runtime keeps per Run) both sides
    # wait for the disk's sync at every call.
    for prefix, log_kind, target in (("python.tool_calls", "memory", " (target >= 5000)"),
                                     ("python.tool_calls.file_log", "file", "")):
        print(f"BENCH {prefix}.sync {rates[log_kind + '.echo']:.0f} calls/s{target}")
        print(f"BENCH {prefix}.async {rates[log_kind + '.echo_async']:.0f} calls/s{target}")
        print(f"BENCH {prefix}.cpp_function_tool {rates[log_kind + '.cpp']:.0f} calls/s")
        print(f"BENCH {prefix}.sync_vs_cpp {rates[log_kind + '.echo'] / rates[log_kind + '.cpp']:.3f} x")
    missed += [f"{tool}: {rates['memory.' + tool]:.0f}/s" for tool in ("echo", "echo_async")
               if rates["memory." + tool] < 5000]
    if missed:
        print("targets missed: " + "; ".join(missed))
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
