"""A scripted agent in a Python runtime: a model loop with no LLM behind it, two Python tools and
one MCP server, and run_code. Each turn the "model" (a script) picks a tool call; the runtime runs
it and the payload the model would read back is printed. It exits non-zero when a turn did not go
as this docstring says, so the tests run it (python/tests/test_example.py).

    python3 examples/python/agent.py [--fs-server PATH-TO-mcp-server-filesystem]

Turn 1: one program lists the shared folder through the MCP server, reads each order file, looks
        every order up (a sync Python tool) and converts the totals (an async one).
Turn 2: a program with a bug: the payload carries the traceback, not just "it failed".
Turn 3: the fixed program, written from that traceback.
Turn 4: a direct tool call, as the model makes when one call is enough.
"""
import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import psych_runtime
from psych_runtime import AgentSpec, CodeExecution, CodeTool, McpServer, ModelRef, RunLog, Runtime
from psych_runtime.sandbox.local import local_sandbox

ORDERS = {"A-1": {"quantity": 2, "total": 19.5}, "B-2": {"quantity": 1, "total": 5.25}, "C-3": {"quantity": 4, "total": 42.0}}
RATES = {"EUR": 0.9, "GBP": 0.8}


def lookup_order(sku: str) -> dict:
    """An order by SKU: its quantity and total in USD."""
    if sku not in ORDERS:
        raise KeyError(f"no order {sku}")
    return ORDERS[sku]


async def exchange_rate(currency: str) -> float:
    """How many units of `currency` one USD buys."""
    await asyncio.sleep(0)  # a real one would ask a service
    return RATES[currency]


def turns(shared: Path) -> list[tuple[str, dict]]:
    """What the scripted model calls, turn by turn."""
    listing = (
        f"listing = await call_tool('fs__list_directory', {{'path': {str(shared)!r}}})\n"
        "files = [line.split()[-1] for line in listing['content'][0]['text'].splitlines() if line.endswith('.txt')]\n"
    )
    buggy = listing + (
        "skus = [s for f in files for s in (await fs__read_text_file(path=" + repr(str(shared)) + " + '/' + f))['content'][0]['text'].split()]\n"
        "rate = await exchange_rate(currency='EUR')\n"
        "orders = [await lookup_order(sku=s) for s in skus]\n"
        "return {'orders': len(orders), 'eur': round(sum(o['totl'] for o in orders) * rate, 2)}\n"
    )
    return [
        ("run_code", {"program": buggy.replace("o['totl']", "o['total']")}),
        ("run_code", {"program": buggy}),
        ("run_code", {"program": buggy.replace("o['totl']", "o['total']")}),
        ("lookup_order", {"sku": "B-2"}),
    ]


async def main(fs_server: str) -> int:
    failures = 0

    def expect(held: bool, story: str) -> None:
        nonlocal failures
        print(("  ok: " if held else "  FAILED: ") + story)
        failures += 0 if held else 1

    with tempfile.TemporaryDirectory(prefix="psych-agent-") as scratch:
        shared = Path(scratch) / "shared"
        shared.mkdir()
        (shared / "monday.txt").write_text("A-1 B-2\n")
        (shared / "tuesday.txt").write_text("C-3\n")
        spec = AgentSpec(
            name="clerk",
            model=ModelRef(model="scripted"),
            tools=(CodeTool(name="lookup_order"), CodeTool(name="exchange_rate")),
            code_execution=CodeExecution(profile="default"),
        )
        with Runtime(
            sandbox=local_sandbox(),
            tools=[CodeTool("lookup_order", lookup_order), CodeTool("exchange_rate", exchange_rate)],
            mcp_servers=[McpServer("fs", [fs_server, str(shared)])],
        ) as runtime:
            attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
            print("tools shown to the model:", ", ".join(attempt.tool_names))
            payloads = []
            for number, (tool, arguments) in enumerate(turns(shared), start=1):
                if tool == "run_code":
                    payload = (await attempt.run_code(arguments["program"])).payload
                else:
                    payload = json.dumps(await runtime.call_tool(tool, arguments))
                payloads.append(json.loads(payload))
                print(f"turn {number}: {tool} -> {payload}")
            expect(payloads[0].get("value") == {"orders": 3, "eur": round(66.75 * 0.9, 2)},
                   "one program looped over the MCP server and both Python tools")
            expect("KeyError" in json.dumps(payloads[1]) and "totl" in json.dumps(payloads[1]),
                   "the buggy program's payload names the line's KeyError")
            expect(payloads[2] == payloads[0], "the fixed program gives the first answer again")
            expect(payloads[3] == ORDERS["B-2"], "a direct call goes the same tool path")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "build" / "mcp-servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
    parser.add_argument("--fs-server", default=os.environ.get("PSYCH_FS_SERVER", str(default)))
    sys.exit(asyncio.run(main(parser.parse_args().fs_server)))
