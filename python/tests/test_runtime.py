"""The seed's clauses a Python runtime reaches, through psych_runtime's own names: the four-way
narrowing, refusals as data, publishing, bindings, the destructive-tool refusal, budgets per Run,
previews and handles, artifacts, and MCP tools beside Python ones."""
import asyncio
import json
import resource

import pytest

import psych_runtime
from psych_runtime import (
    BindingBudget,
    CodeExecutionLimits,
    CodeTool,
    IsolationLevel,
    NetworkAccess,
    OutputPolicy,
    RunLog,
    Runtime,
    SandboxLimits,
)
from psych_runtime.sandbox.profiles import LimitCaps, SandboxProfile, SandboxProfiles

from conftest import spec_with_code



def echo(text: str, times: int = 1) -> str:
    """Echoes the text."""
    return text * times


# ---- the four-way narrowing ------------------------------------------------------------------


def cpu_limit_program() -> str:
    return "import resource\nreturn resource.getrlimit(resource.RLIMIT_CPU)[0]"


@pytest.mark.parametrize(
    ("policy_cpu", "spec_cpu", "profile_cpu", "expected"),
    [
        (8.0, 6.0, 4.0, 4),  # the profile's hard limit is the narrowest
        (8.0, 3.0, 4.0, 3),  # the spec asks for less than everyone allows
        (2.0, 6.0, 4.0, 2),  # the tenant's policy is the narrowest
        (8.0, None, None, 8),  # nothing asked: whatever the policy leaves
    ],
)
async def test_four_way_narrowing(sandbox, policy_cpu, spec_cpu, profile_cpu, expected):
    def policy(tenant, grant):
        assert tenant == "acme"
        return psych_runtime.CodeExecutionGrant(
            limits=SandboxLimits(**{**grant.limits.__dict__, "cpu_seconds": policy_cpu}),
            allow_network=grant.allow_network,
            budget=grant.budget,
        )

    profile = SandboxProfile("default", sandbox, hard_limits=LimitCaps(cpu_seconds=profile_cpu))
    with Runtime(sandboxes=[profile], code_execution_policy=policy) as runtime:
        spec = spec_with_code(limits=CodeExecutionLimits(cpu_seconds=spec_cpu))
        attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory(), tenant="acme")
        outcome = await attempt.run_code(cpu_limit_program())
        assert outcome.refusal is None, outcome.payload
        assert outcome.result.ok, outcome.result.failure
        assert outcome.result.value == expected


async def test_a_policy_that_widens_is_a_deployment_error(sandbox):
    def widening(tenant, grant):
        return psych_runtime.CodeExecutionGrant(
            limits=SandboxLimits(**{**grant.limits.__dict__, "cpu_seconds": grant.limits.cpu_seconds * 10}),
            allow_network=grant.allow_network,
            budget=grant.budget,
        )

    with Runtime(sandbox=sandbox, code_execution_policy=widening) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code()), RunLog.memory())
        with pytest.raises(Exception, match="wider"):
            await attempt.run_code("return 1")


async def test_network_not_granted_is_a_refusal_and_the_other_tools_still_work(sandbox):
    profile = SandboxProfile("default", sandbox, allow_network=False)
    with Runtime(sandboxes=SandboxProfiles([profile]), tools=[CodeTool("echo", echo)]) as runtime:
        spec = spec_with_code("echo", network=NetworkAccess.UNRESTRICTED)
        attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
        assert "run_code" in attempt.tool_names
        outcome = await attempt.run_code("return 1")
        assert outcome.result is None
        assert outcome.refusal.reason == "network_not_granted"
        assert "network_not_granted" in outcome.payload
        assert await runtime.call_tool("echo", {"text": "still here"}) == "still here"


async def test_isolation_the_backend_cannot_reach_is_refused(process_sandbox):
    with Runtime(sandbox=process_sandbox) as runtime:
        spec = spec_with_code(isolation=IsolationLevel.ISOLATED)
        outcome = await runtime.start_attempt(runtime.publish(spec), RunLog.memory()).run_code("return 1")
        assert outcome.refusal.reason == "isolation_unreachable"


async def test_failures_are_data(sandbox):
    with Runtime(sandbox=sandbox) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code()), RunLog.memory())
        outcome = await attempt.run_code("print('before')\nx = {}\nreturn x['missing']")
        result = outcome.result
        assert not result.ok
        assert result.failure.kind == "exception"
        assert "KeyError" in result.failure.traceback and result.failure.line == 3
        assert result.stdout == "before\n"
        assert "KeyError" in outcome.payload


# ---- publishing ------------------------------------------------------------------------------


def test_unknown_profile_fails_at_publish(sandbox):
    with Runtime(sandbox=sandbox) as runtime:
        with pytest.raises(psych_runtime.PublishError, match="nowhere"):
            runtime.publish(spec_with_code(profile="nowhere"))


def test_unknown_profile_fails_at_attempt_start_when_profiles_come_later(sandbox):
    with Runtime(sandbox=sandbox, profiles_known_at_publish=False) as runtime:
        version = runtime.publish(spec_with_code(profile="nowhere"))
        with pytest.raises(psych_runtime.SandboxSetupError, match="nowhere"):
            runtime.start_attempt(version, RunLog.memory())


def test_run_code_is_reserved(sandbox):
    with Runtime(sandbox=sandbox) as runtime:
        with pytest.raises((psych_runtime.PublishError, ValueError), match="run_code"):
            runtime.publish(spec_with_code("run_code"))


def test_code_execution_joins_the_version_hash(sandbox):
    with Runtime(sandbox=sandbox) as runtime:
        plain = psych_runtime.AgentSpec(name="analyst", model=psych_runtime.ModelRef(model="scripted"))
        coded = spec_with_code()
        assert runtime.publish(plain).hash != runtime.publish(coded).hash
        assert runtime.publish(coded).hash == runtime.publish(spec_with_code()).hash
        assert "run_code" not in runtime.start_attempt(runtime.publish(plain), RunLog.memory()).tool_names


# ---- bindings --------------------------------------------------------------------------------


async def test_bindings_narrow_and_never_widen(sandbox):
    calls = []

    def secret() -> str:
        calls.append("secret")
        return "s3cret"

    tools = [CodeTool("echo", echo), CodeTool("secret", secret)]
    with Runtime(sandbox=sandbox, tools=tools) as runtime:
        spec = spec_with_code("echo", "secret", bindings=("echo",))
        attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
        outcome = await attempt.run_code(
            "names = [n for n in TOOLS if n in ('echo', 'secret')]\n"
            "try:\n    await call_tool('secret', {})\nexcept ToolError as e:\n    kind = e.kind\n"
            "return [names, await echo(text='x', times=3), kind]"
        )
        assert outcome.result.value == [["echo"], "xxx", "unknown_tool"]
        assert calls == []
        with pytest.raises(psych_runtime.PublishError, match="elsewhere"):
            runtime.publish(spec_with_code("echo", bindings=("elsewhere",)))


async def test_every_tool_by_default_and_aliases_only_for_identifiers(sandbox):
    def dashed() -> int:
        return 7

    with Runtime(sandbox=sandbox, tools=[CodeTool("echo", echo), CodeTool("list-things", dashed)]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("echo", "list-things")), RunLog.memory())
        outcome = await attempt.run_code("return [await call_tool('list-things', {}), 'echo' in TOOLS]")
        assert outcome.result.value == [7, True]


async def test_a_destructive_tool_is_refused_in_a_program_and_works_directly(sandbox):
    deleted = []

    def delete_everything(path: str) -> str:
        deleted.append(path)
        return "gone"

    tools = [CodeTool("delete_everything", delete_everything, destructive=True)]
    with Runtime(sandbox=sandbox, tools=tools) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("delete_everything")), RunLog.memory())
        outcome = await attempt.run_code(
            "try:\n    await delete_everything(path='/')\nexcept ToolError as e:\n    return [e.kind, e.tool]"
        )
        assert outcome.result.value == ["approval_required_in_program", "delete_everything"]
        assert deleted == []
        assert await runtime.call_tool("delete_everything", {"path": "/tmp/x"}) == "gone"
        assert deleted == ["/tmp/x"]


# ---- tools written in Python -----------------------------------------------------------------


async def test_sync_and_async_tools_and_their_failures(sandbox):
    async def slow_double(n: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * n

    def broken(n: int) -> int:
        raise LookupError(f"no row {n}")

    def unserialisable() -> object:
        return {1, 2, 3}

    tools = [CodeTool("slow_double", slow_double), CodeTool("broken", broken), CodeTool("unserialisable", unserialisable)]
    with Runtime(sandbox=sandbox, tools=tools) as runtime:
        attempt = runtime.start_attempt(
            runtime.publish(spec_with_code("slow_double", "broken", "unserialisable")), RunLog.memory()
        )
        outcome = await attempt.run_code(
            "out = [await slow_double(n=21)]\n"
            "for name, args in (('broken', {'n': 4}), ('unserialisable', {}), ('slow_double', {'n': 'x', 'm': 1})):\n"
            "    try:\n        await call_tool(name, args)\n"
            "    except ToolError as e:\n        out.append([e.kind, str(e)])\n"
            "return out"
        )
        value = outcome.result.value
        assert value[0] == 42
        assert value[1][0] == "tool_failed" and "LookupError" in value[1][1] and "no row 4" in value[1][1]
        assert value[2][0] == "tool_failed" and "set" in value[2][1]
        assert value[3][0] == "malformed_call" and "m" in value[3][1]


# ---- budgets per Run -------------------------------------------------------------------------


async def test_budgets_hold_per_run_across_programs_and_attempts(sandbox, tmp_path):
    budget = BindingBudget(max_calls=10, max_run_calls=15)
    profile = SandboxProfile("default", sandbox, binding_budget=budget)
    program = (
        "done = 0\nfor i in range(10):\n    try:\n        await echo(text='x')\n        done += 1\n"
        "    except ToolError as e:\n        return [done, e.kind]\nreturn [done, None]"
    )
    log_path = tmp_path / "run.log"
    with Runtime(sandboxes=[profile], tools=[CodeTool("echo", echo)]) as runtime:
        version = runtime.publish(spec_with_code("echo"))
        log = RunLog.file(str(log_path))
        first = runtime.start_attempt(version, log)
        assert (await first.run_code(program)).result.value == [10, None]
        assert (await first.run_code(program)).result.value == [5, "budget_exhausted"]
        # A new Attempt of the same Run recounts from the log: no fresh allowance.
        second = runtime.start_attempt(version, log)
        # 15 started; the 16th was refused before it started, so it spent nothing.
        assert second.run_spent().calls == 15
        assert (await second.run_code(program)).result.value[1] == "budget_exhausted"


# ---- previews, handles, read_tool_output, artifacts -------------------------------------------


async def test_previews_handles_and_read_tool_output(sandbox, tmp_path):
    with Runtime(sandbox=sandbox, blob_store=str(tmp_path / "blobs")) as runtime:
        spec = spec_with_code(output=OutputPolicy(preview_bytes=200))
        attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
        outcome = await attempt.run_code("for i in range(20000):\n    print(f'line {i}')\nreturn 'printed'")
        result = outcome.result
        assert result.value == "printed"
        assert result.stdout_size == sum(len(f"line {i}\n") for i in range(20000))
        assert len(result.stdout.encode()) < 1000
        assert result.stdout_data.startswith(b"line 0\nline 1\n")
        stdout = next(a for a in result.attachments if a.name == "stdout")
        assert stdout.handle.startswith("blob:") and stdout.location == "blob"
        assert stdout.handle in outcome.payload
        window = await runtime.read_tool_output(stdout.handle, pattern="^line 1234[05]$")
        assert [line.text for line in window.lines] == ["line 12340", "line 12345"]
        page = await runtime.read_tool_output(stdout.handle, offset=19998, limit=5)
        assert [line.text for line in page.lines] == ["line 19998", "line 19999"]
        with pytest.raises(Exception, match="blob_not_found"):
            await runtime.read_tool_output(stdout.handle, tenant="someone-else")


async def test_artifacts_come_back_by_relative_path(sandbox):
    with Runtime(sandbox=sandbox) as runtime:
        spec = spec_with_code(artifacts=psych_runtime.ArtifactPolicy(collection=psych_runtime.ArtifactCollection.COLLECT))
        attempt = runtime.start_attempt(runtime.publish(spec), RunLog.memory())
        outcome = await attempt.run_code(
            "import os\nos.makedirs('out', exist_ok=True)\n"
            "open('out/report.csv', 'w').write('a,b\\n1,2\\n')\nos.symlink('/etc/passwd', 'leak')\nreturn 'ok'"
        )
        result = outcome.result
        assert [(a.path, a.data) for a in result.artifacts] == [("out/report.csv", b"a,b\n1,2\n")]
        assert result.artifacts_omitted == 1


# ---- MCP beside Python tools -----------------------------------------------------------------


async def test_an_mcp_server_beside_python_tools(sandbox, filesystem_server):
    server, shared = filesystem_server
    with Runtime(sandbox=sandbox, tools=[CodeTool("echo", echo)], mcp_servers=[server]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("echo", bindings=None)), RunLog.memory())
        outcome = await attempt.run_code(
            "names = await call_tool('fs__list_directory', {'path': " + json.dumps(str(shared)) + "})\n"
            "text = await fs__read_text_file(path=" + json.dumps(str(shared / "a.txt")) + ")\n"
            "return [names, text, await echo(text='!')]"
        )
        assert outcome.result.ok, outcome.result.failure
        names, text, bang = outcome.result.value
        assert "a.txt" in json.dumps(names) and "b.txt" in json.dumps(names)
        assert "alpha" in json.dumps(text)
        assert bang == "!"
