"""The unprivileged path: a throwaway account that is not root runs a program, with a Python tool,
through a copy of the installed virtualenv (which also shows a moved virtualenv working for an
account that did not install it). What the child's containment proves is graded from what it
observed: without root there is no identity to drop to, and the result says so."""
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

PROGRAM = textwrap.dedent(
    """
    import asyncio, json
    from psych_runtime import AgentSpec, CodeExecution, CodeTool, ModelRef, RunLog, Runtime
    from psych_runtime.sandbox.local import local_sandbox

    def double(n: int) -> int:
        return 2 * n

    async def main():
        sandbox = local_sandbox()
        spec = AgentSpec(name="a", model=ModelRef(model="m"), tools=(CodeTool(name="double"),),
                         code_execution=CodeExecution())
        with Runtime(sandbox=sandbox, tools=[CodeTool("double", double)]) as runtime:
            attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
            outcome = await attempt.run_code("import os\\nreturn [await double(n=21), os.getuid()]")
        result = outcome.result
        print(json.dumps({"backend": (await sandbox.describe()).backend, "value": result.value,
                          "identity": result.guarantees.identity, "ok": result.ok}))

    asyncio.run(main())
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create the throwaway account (this run is unprivileged already)")
def test_an_unprivileged_account_runs_a_program_with_a_python_tool():
    account = "psychpy" + secrets.token_hex(3)
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", account], check=True)
    scratch = tempfile.mkdtemp(prefix="psych-pytest-")
    try:
        os.chmod(scratch, 0o755)
        venv = Path(scratch) / "venv"
        shutil.copytree(Path(sys.prefix), venv, symlinks=True)
        subprocess.run(["chmod", "-R", "a+rX", scratch], check=True)
        ran = subprocess.run(["runuser", "-u", account, "--", str(venv / "bin" / "python"), "-c", PROGRAM],
                             capture_output=True, text=True, timeout=120, cwd=scratch)
        assert ran.returncode == 0, ran.stderr
        seen = json.loads(ran.stdout.strip().splitlines()[-1])
        assert seen["ok"] and seen["value"][0] == 42
        # No identity to drop to: never graded enforced.
        assert seen["identity"] != "enforced"
        assert seen["backend"].startswith("linux-")
    finally:
        subprocess.run(["pkill", "-KILL", "-u", account], check=False)
        subprocess.run(["userdel", account], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
