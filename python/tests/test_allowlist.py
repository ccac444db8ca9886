"""network=allowlist from Python (docs/network.md): the Spec's hosts join the Version hash only when
set, publish refuses a pattern that does not parse, the backend, the tenant policy and the profile
each narrow the list and an empty intersection is a refusal naming which of them left nothing, and
at isolation=isolated a program reaches psych's egress proxy and nothing else.

No traffic leaves this machine: every host named here is under .invalid, which never resolves, and
the only one a program asks for is unlisted, which the proxy refuses before resolving anything."""
import dataclasses

import pytest

import psych_runtime
from psych_runtime import (
    AgentSpec,
    CodeExecution,
    CodeTool,
    IsolationLevel,
    ModelRef,
    NetworkAccess,
    RunLog,
    Runtime,
)
from psych_runtime.sandbox.local import local_sandbox
from psych_runtime.sandbox.profiles import SandboxProfile

from conftest import spec_with_code

ALLOWLIST = NetworkAccess.ALLOWLIST

# conformance/test_runtime.cpp pins the same spec's Version hash: the spec's JSON from Python is the
# C++ one, and the new member, absent, changed none of its bytes.
PINNED_HASH = "e7a8b996a856cab847f25f8bd63a3a0bff5f2bad2636a36eed575c27e88b9026"

# Through the proxy in the environment (HTTP_PROXY, HTTPS_PROXY): plain HTTP in absolute form, then a
# CONNECT, each for a host that no allowlist here lists.
ASK_AN_UNLISTED_HOST = """
import os, urllib.error, urllib.request
seen = {"proxy": os.environ.get("HTTP_PROXY"), "https_proxy": os.environ.get("HTTPS_PROXY")}
try:
    urllib.request.urlopen("http://unlisted.invalid/", timeout=20)
    seen["http"] = "reached"
except urllib.error.HTTPError as refused:
    seen["http"] = refused.code
except OSError as error:
    seen["http"] = repr(error)
try:
    urllib.request.urlopen("https://unlisted.invalid/", timeout=20)
    seen["https"] = "reached"
except OSError as error:
    seen["https"] = str(error)
return seen
"""


def lookup_order(sku: str) -> dict:
    """An order by SKU."""
    return {"sku": sku}


def analyst(**code_execution) -> AgentSpec:
    """conformance/test_runtime.cpp's analyst(): the spec whose hash it pins."""
    return AgentSpec(name="analyst", model=ModelRef(model="gpt-5"), tools=(CodeTool(name="lookup_order"),),
                     code_execution=CodeExecution(**code_execution))


def allowlist_spec(*hosts: str) -> AgentSpec:
    return spec_with_code(isolation=IsolationLevel.ISOLATED, network=ALLOWLIST, allowed_hosts=hosts)


async def run_once(runtime: Runtime, spec: AgentSpec, program: str = "return 1", tenant: str = "default"):
    return await runtime.start_attempt(runtime.publish(spec), RunLog.memory(), tenant=tenant).run_code(program)


# ---- the Spec: the Version hash and publish ---------------------------------------------------


def test_allowed_hosts_join_the_version_hash_only_when_set(sandbox):
    with Runtime(sandbox=sandbox, tools=[CodeTool("lookup_order", lookup_order)]) as runtime:
        assert runtime.publish(analyst()).hash == PINNED_HASH
        listed = runtime.publish(analyst(network=ALLOWLIST, allowed_hosts=("api.example.com",))).hash
        assert listed != PINNED_HASH
        assert listed == runtime.publish(analyst(network=ALLOWLIST, allowed_hosts=["api.example.com"])).hash
        assert listed != runtime.publish(analyst(network=ALLOWLIST, allowed_hosts=("*.example.com",))).hash


@pytest.mark.parametrize(
    ("code", "named"),
    [
        ({"network": ALLOWLIST, "allowed_hosts": ("*.com",)}, r"\*\.com.*two labels"),
        ({"network": ALLOWLIST, "allowed_hosts": ("api.example.com", "*")}, r'"\*"'),
        ({"network": ALLOWLIST, "allowed_hosts": ("https://api.example.com/",)}, "api.example.com"),
        ({"network": ALLOWLIST}, "allowed_hosts names no host"),
        ({"network": ALLOWLIST, "allowed_hosts": ()}, "allowed_hosts names no host"),
        ({"allowed_hosts": ("api.example.com",)}, "allowed_hosts is set and network is not"),
    ],
)
def test_publish_refuses_an_allowlist_it_cannot_read(sandbox, code, named):
    with Runtime(sandbox=sandbox) as runtime:
        with pytest.raises(psych_runtime.PublishError, match=named):
            runtime.publish(spec_with_code(**code))


def test_a_profile_or_backend_pattern_that_does_not_parse_is_refused_when_wired(sandbox):
    with pytest.raises(psych_runtime.PsychError, match=r'"wide".*\*\.com') as refused:
        Runtime(sandboxes=[SandboxProfile("wide", sandbox, allowed_hosts=("*.com",))])
    assert refused.value.kind == "invalid_argument"
    with pytest.raises(psych_runtime.PsychError, match="allowed_hosts") as refused:
        local_sandbox(allowed_hosts=("*",))
    assert refused.value.kind == "invalid_argument"


# ---- the narrowing: who left nothing ----------------------------------------------------------


async def test_the_process_backend_refuses_the_allowlist_by_name(process_sandbox):
    described = await process_sandbox.describe()
    assert not described.network_allowlist and described.allowed_hosts is None
    assert not process_sandbox.offer().network_allowlist
    profile = SandboxProfile("default", process_sandbox, allowed_hosts=("api.example.com",))
    with Runtime(sandboxes=[profile], tools=[CodeTool("lookup_order", lookup_order)]) as runtime:
        spec = spec_with_code("lookup_order", network=ALLOWLIST, allowed_hosts=("api.example.com",))
        outcome = await run_once(runtime, spec)
        assert outcome.result is None
        assert outcome.refusal.reason == psych_runtime.RefusalReason.NETWORK_NOT_GRANTED
        assert "isolation=process" in outcome.refusal.message
        assert "network_not_granted" in outcome.payload
        # A refusal is data: the agent's other tools keep working.
        assert await runtime.call_tool("lookup_order", {"sku": "A"}) == {"sku": "A"}
    # The port refuses it as well: nothing runs.
    ran = await process_sandbox.run("return 1", network=ALLOWLIST, allowed_hosts=("api.example.com",))
    assert ran.failure is not None and "allowlist" in ran.failure.message and ran.egress is None


async def test_the_profile_the_policy_and_the_backend_each_narrow_and_are_named(isolated_sandbox):
    described = await isolated_sandbox.describe()
    assert described.network_allowlist and described.allowed_hosts is None

    def policy(tenant, grant):
        assert grant.allowed_hosts is None  # what the backend offers: hosts left to the others
        if tenant == "narrow":
            return dataclasses.replace(grant, allowed_hosts=("db.example.invalid",))
        return grant

    profile = SandboxProfile("default", isolated_sandbox, allowed_hosts=("*.example.invalid",))
    with Runtime(sandboxes=[profile], code_execution_policy=policy) as runtime:
        by_profile = await run_once(runtime, allowlist_spec("api.elsewhere.invalid"))
        assert by_profile.refusal.reason == "network_not_granted"
        assert by_profile.refusal.message.endswith("granted by the profile"), by_profile.refusal.message
        by_policy = await run_once(runtime, allowlist_spec("api.example.invalid"), tenant="narrow")
        assert by_policy.refusal.reason == "network_not_granted"
        assert by_policy.refusal.message.endswith("granted by the tenant policy"), by_policy.refusal.message

    capped = local_sandbox(isolation=IsolationLevel.ISOLATED, allowed_hosts=("*.internal.invalid",))
    try:
        assert (await capped.describe()).allowed_hosts == ("*.internal.invalid",)
        assert capped.offer().allowed_hosts == ("*.internal.invalid",)
        profile = SandboxProfile("default", capped, allowed_hosts=("*.example.invalid",))
        with Runtime(sandboxes=[profile]) as runtime:
            by_backend = await run_once(runtime, allowlist_spec("api.example.invalid"))
            assert by_backend.refusal.reason == "network_not_granted"
            assert by_backend.refusal.message.endswith("granted by the backend's configuration"), \
                by_backend.refusal.message
        # A direct run, whose terms nobody intersected, is held to the cap too: nothing runs.
        direct = await capped.run("return 1", isolation=IsolationLevel.ISOLATED, network=ALLOWLIST,
                                  allowed_hosts=("api.example.invalid",))
        assert direct.failure is not None and direct.isolation is None, direct
        assert "does not allow the host pattern api.example.invalid" in direct.failure.message
    finally:
        capped.close()


# ---- at isolation=isolated: the proxy and nothing else ------------------------------------------


def assert_refused_by_the_proxy(result: psych_runtime.SandboxResult) -> None:
    assert result.ok, result.failure
    seen = result.value
    assert seen["proxy"] == "http://127.0.0.1:3128" and seen["https_proxy"] == "http://127.0.0.1:3128", seen
    assert seen["http"] == 403, seen
    assert "403" in seen["https"], seen  # urllib: "Tunnel connection failed: 403 ..."
    assert result.guarantees.network == psych_runtime.Enforcement.ENFORCED, result.problems
    egress = result.egress
    assert egress is not None
    assert egress.connections_refused >= 1 and egress.connections_allowed == 0
    assert egress.bytes_sent == 0 and egress.bytes_received == 0
    refused = {(r.host, r.port) for r in egress.refusals}
    assert ("unlisted.invalid", 80) in refused and ("unlisted.invalid", 443) in refused, egress.refusals


async def test_an_unlisted_host_is_refused_by_the_proxy_through_run_code(isolated_sandbox):
    profile = SandboxProfile("default", isolated_sandbox, allowed_hosts=("example.invalid",))
    with Runtime(sandboxes=[profile]) as runtime:
        outcome = await run_once(runtime, allowlist_spec("example.invalid"), ASK_AN_UNLISTED_HOST)
        assert outcome.refusal is None, outcome.payload
        assert outcome.result.isolation == IsolationLevel.ISOLATED
        assert_refused_by_the_proxy(outcome.result)


async def test_an_unlisted_host_is_refused_by_the_proxy_through_the_port(isolated_sandbox):
    result = await isolated_sandbox.run(ASK_AN_UNLISTED_HOST, isolation=IsolationLevel.ISOLATED, network=ALLOWLIST,
                                        allowed_hosts=("example.invalid",))
    assert_refused_by_the_proxy(result)
    plain = await isolated_sandbox.run("return 1", isolation=IsolationLevel.ISOLATED)
    assert plain.ok and plain.egress is None  # only an allowlist run reports egress
