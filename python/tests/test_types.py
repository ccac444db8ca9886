"""The value types, without the compiled module: specs, limits, grants, results, descriptions, their C++ JSON, validation."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psych_runtime as pr  # noqa: E402
from psych_runtime._json import WireError, from_json, from_json_text, to_json, to_json_text  # noqa: E402
from psych_runtime.core.code_execution import CALLABLE_BUILTINS, EXCLUDED_BUILTINS  # noqa: E402
from psych_runtime.description import BackendOffer, ExecutionTerms  # noqa: E402
from psych_runtime.errors import translate  # noqa: E402
from psych_runtime.results import result_from_compiled  # noqa: E402
from psych_runtime.sandbox.profiles import SandboxProfile, SandboxProfiles  # noqa: E402

MIB = 1 << 20


def wire(value: object) -> object:
    """What the compiled module would receive, parsed back."""
    return json.loads(to_json_text(value))


def without_the_compiled_module(code: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports psych_runtime from where this test found it,
    so that another test of the session having loaded the compiled module proves nothing."""
    package_root = str(Path(pr.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": package_root, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_the_compiled_module_is_not_loaded_by_the_value_types() -> None:
    ran = without_the_compiled_module(
        "import sys, psych_runtime\n"
        "import psych_runtime.sandbox.local, psych_runtime.sandbox.container, psych_runtime.sandbox.remote\n"
        "import psych_runtime.sandbox.profiles\n"
        "assert 'psych_runtime._psych' not in sys.modules, 'loaded'\n")
    assert ran.returncode == 0, ran.stderr


# -- JSON: what goes to the C++ ---------------------------------------------------------------
# Expected JSON is written out by hand from the C++ headers (member names, enum spellings,
# defaults), so a drift between the two faces fails here rather than in the compiled decoder.


def test_sandbox_limits_defaults_are_the_specs() -> None:
    assert wire(pr.SandboxLimits()) == {
        "cpu_seconds": 10.0, "address_space_bytes": 512 * MIB, "file_size_bytes": 10 * MIB,
        "process_count": 64, "wall_seconds": 30.0,
    }


def test_caps_and_requests_leave_unset_dimensions_out() -> None:
    assert wire(pr.LimitCaps()) == {}
    assert wire(pr.LimitCaps(wall_seconds=10)) == {"wall_seconds": 10.0}
    assert wire(pr.CodeExecutionLimits(wall_seconds=60, memory_bytes=256 * MIB)) == {
        "wall_seconds": 60.0, "memory_bytes": 256 * MIB}


def test_caps_from_sandbox_limits_cap_every_dimension() -> None:
    caps = pr.LimitCaps.of(pr.SandboxLimits(wall_seconds=120))
    assert wire(caps) == {"cpu_seconds": 10.0, "address_space_bytes": 512 * MIB, "file_size_bytes": 10 * MIB,
                          "process_count": 64, "wall_seconds": 120.0}


def test_binding_budget_uses_the_cpp_transfer_name() -> None:
    budget = pr.BindingBudget(max_calls=5, max_total_bytes=1024)
    assert wire(budget) == {
        "max_calls": 5, "max_transfer_bytes": 1024, "max_produced_bytes": 64 * MIB,
        "max_preserved_bytes": 64 * MIB, "max_argument_bytes": 256 << 10, "max_result_bytes": 1 * MIB,
        "max_run_calls": 1000, "max_run_transfer_bytes": 32 * MIB, "max_run_produced_bytes": 256 * MIB,
        "max_run_preserved_bytes": 256 * MIB,
    }
    assert from_json(pr.BindingBudget, wire(budget)) == budget


def test_output_and_artifact_policies() -> None:
    assert wire(pr.OutputPolicy()) == {"preview_bytes": 4000, "max_bytes": 8 * MIB, "preserve": "when_available"}
    assert wire(pr.OutputPolicy(preserve=pr.OutputPreservation.REQUIRED))["preserve"] == "required"
    assert wire(pr.ArtifactPolicy(collection=pr.ArtifactCollection.COLLECT)) == {
        "collection": "collect", "max_files": 100, "max_file_bytes": 8 * MIB, "max_total_bytes": 32 * MIB,
        "max_depth": 16}


def test_agent_spec_is_the_cpp_agent_spec() -> None:
    spec = pr.AgentSpec(
        name="analyst",
        model=pr.ModelRef(model="gpt-5"),
        tools=(pr.CodeTool(name="lookup_order"), pr.HttpTool(name="weather", url="https://w.example/api")),
        code_execution=pr.CodeExecution(
            profile="default", isolation=pr.IsolationLevel.ISOLATED, bindings=("lookup_order",),
            limits=pr.CodeExecutionLimits(wall_seconds=5), network=pr.NetworkAccess.UNRESTRICTED,
            output=pr.OutputPolicy(preview_bytes=100)),
    )
    assert wire(spec) == {
        "name": "analyst",
        "model": {"model": "gpt-5", "provider": ""},
        "tools": [{"kind": "code", "name": "lookup_order"},
                  {"kind": "http", "name": "weather", "url": "https://w.example/api"}],
        "code": {"profile": "default", "isolation": "isolated", "bindings": ["lookup_order"],
                 "limits": {"wall_seconds": 5.0}, "network": "unrestricted",
                 "output": {"preview_bytes": 100, "max_bytes": 8 * MIB, "preserve": "when_available"}},
    }
    assert from_json(pr.AgentSpec, wire(spec)) == spec


def test_an_allowlist_spec_names_its_hosts_and_a_spec_without_leaves_them_out() -> None:
    asked = pr.CodeExecution(network=pr.NetworkAccess.ALLOWLIST, allowed_hosts=["api.example.com", "*.pypi.org:443"])
    assert pr.NetworkAccess.ALLOWLIST == "allowlist"
    assert asked.allowed_hosts == ("api.example.com", "*.pypi.org:443")  # a list becomes a tuple
    encoded = wire(asked)
    assert encoded["network"] == "allowlist" and encoded["allowed_hosts"] == ["api.example.com", "*.pypi.org:443"]
    # In the C++ member order: network, allowed_hosts, output.
    assert list(encoded) == ["profile", "isolation", "limits", "network", "allowed_hosts"]
    assert from_json(pr.CodeExecution, encoded) == asked
    # Absent means absent, not null and not []: the spec's JSON (and so its Version hash) is as before.
    assert "allowed_hosts" not in wire(pr.CodeExecution())
    assert "allowed_hosts" not in to_json_text(pr.AgentSpec(name="a", model=pr.ModelRef("m"),
                                                            code_execution=pr.CodeExecution()))
    assert from_json(pr.CodeExecution, wire(pr.CodeExecution())).allowed_hosts is None
    assert wire(pr.CodeExecution(allowed_hosts=()))["allowed_hosts"] == []  # set, if empty: publish refuses it
    with pytest.raises(TypeError, match="allowed_hosts"):
        pr.CodeExecution(network=pr.NetworkAccess.ALLOWLIST, allowed_hosts="api.example.com")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="allowed_hosts"):
        pr.CodeExecution(network=pr.NetworkAccess.ALLOWLIST, allowed_hosts=(443,))  # type: ignore[arg-type]


def test_a_grant_leaves_hosts_to_the_profile_or_narrows_them() -> None:
    offered = from_json_text(pr.CodeExecutionGrant, json.dumps({"allow_network": False, "allowed_hosts": None}))
    assert offered.allowed_hosts is None
    assert "allowed_hosts" not in wire(offered)  # None: the C++ reads nullopt, hosts left to the others
    narrowed = dataclasses.replace(offered, allowed_hosts=["db.example.com"])
    assert narrowed.allowed_hosts == ("db.example.com",)
    assert list(wire(narrowed)) == ["limits", "allow_network", "allowed_hosts", "budget"]
    assert wire(dataclasses.replace(offered, allowed_hosts=()))["allowed_hosts"] == []  # none at all
    assert from_json(pr.CodeExecutionGrant, wire(narrowed)) == narrowed


def test_execution_terms_carry_the_hosts() -> None:
    terms = ExecutionTerms(isolation=pr.IsolationLevel.ISOLATED, network=pr.NetworkAccess.ALLOWLIST,
                           allowed_hosts=("example.invalid",))
    assert wire(terms)["allowed_hosts"] == ["example.invalid"] and wire(terms)["network"] == "allowlist"
    assert from_json(ExecutionTerms, wire(terms)) == terms


def test_a_local_sandbox_caps_the_hosts() -> None:
    from psych_runtime.sandbox.local import _options

    def options(**given: object) -> dict:
        arguments = dict(isolation=pr.IsolationLevel.ISOLATED, python_bin=None, default_limits=None,
                         env_allowlist=None, allow_same_uid=False, backend=None, temp_root=None, prepared=0,
                         launcher_path="/x")
        return wire(_options(**{**arguments, **given}))

    assert "allowed_hosts" not in options()  # no cap of its own: the C++ default (nullopt)
    assert options(allowed_hosts=["*.example.com"])["allowed_hosts"] == ["*.example.com"]
    assert options(allowed_hosts=[])["allowed_hosts"] == []  # a cap that allows nothing
    with pytest.raises(TypeError, match="allowed_hosts"):
        options(allowed_hosts="*.example.com")


def test_a_spec_without_code_execution_has_no_code_member() -> None:
    assert wire(pr.AgentSpec(name="a", model=pr.ModelRef("m", provider="p"))) == {
        "name": "a", "model": {"model": "m", "provider": "p"}, "tools": []}


def test_a_tools_function_and_schema_stay_on_this_side() -> None:
    def lookup_order(sku: str) -> dict:
        """An order by SKU."""
        return {}

    spec = pr.AgentSpec(name="a", model=pr.ModelRef("m"), tools=(pr.CodeTool("lookup_order", lookup_order),))
    assert wire(spec)["tools"] == [{"kind": "code", "name": "lookup_order"}]


def test_execution_terms_and_output_request() -> None:
    from psych_runtime.results import OutputRequest

    assert wire(ExecutionTerms()) == {
        "isolation": "process", "limits": wire(pr.SandboxLimits()), "network": "none", "allowed_hosts": [],
        "output": wire(pr.OutputPolicy()), "artifacts": wire(pr.ArtifactPolicy())}
    assert wire(OutputRequest()) == {"offset": 0, "limit": 100}
    assert wire(OutputRequest(pattern="err.*")) == {"offset": 0, "limit": 100, "pattern": "err.*"}


def test_grant_round_trip() -> None:
    text = json.dumps({
        "limits": {"cpu_seconds": 5, "address_space_bytes": 1024, "file_size_bytes": 2048, "process_count": 3,
                   "wall_seconds": 7.5},
        "allow_network": True,
        "budget": {"max_calls": 9, "max_transfer_bytes": 99, "max_produced_bytes": 1, "max_preserved_bytes": 2,
                   "max_argument_bytes": 3, "max_result_bytes": 4, "max_run_calls": 5, "max_run_transfer_bytes": 6,
                   "max_run_produced_bytes": 7, "max_run_preserved_bytes": 8},
    })
    grant = from_json_text(pr.CodeExecutionGrant, text)
    assert grant.limits.cpu_seconds == 5.0 and isinstance(grant.limits.cpu_seconds, float)
    assert grant.budget.max_total_bytes == 99
    assert grant.allow_network is True
    narrowed = dataclasses.replace(grant, allow_network=False)
    assert json.loads(to_json_text(narrowed)) == {**json.loads(text), "allow_network": False,
                                                  "limits": {**json.loads(text)["limits"], "cpu_seconds": 5.0}}


def test_mcp_server_configs() -> None:
    stdio = pr.McpServer("warehouse", ["python3", "server.py"], env={"MODE": "test"}, timeout=2.5)
    assert wire(stdio.wire()) == {"name": "warehouse", "command": ["python3", "server.py"],
                                  "environment": {"MODE": "test"}, "timeout_ms": 2500}
    http = pr.McpHttpServer("docs", "https://docs.example/mcp", token=lambda: "secret")
    assert wire(http.wire()) == {"name": "docs", "url": "https://docs.example/mcp", "allow_insecure_http": False}
    assert "secret" not in to_json_text(http.wire())


# -- JSON: what comes from the C++ ------------------------------------------------------------

RESULT_JSON = {
    "value": {"sum": 66.75, "rows": [1, 2, 3]},
    "failure": None,
    "stdout": "looked up 3 orders\n",
    "stderr": "",
    "stdout_size": 19,
    "stderr_size": 0,
    "limit_hit": None,
    "cancelled": False,
    "duration_seconds": 0,
    "isolation": "isolated",
    "guarantees": {"filesystem": "enforced", "network": "enforced", "process_tree": "enforced",
                   "identity": "unverified", "cpu": "enforced", "memory": "enforced", "file_size": "enforced",
                   "process_count": "unverified", "wall_clock": "enforced", "environment": "attested"},
    "network_denied": True,
    "artifacts": [{"path": "out/report.csv", "size_bytes": 4}],
    "artifacts_omitted": 2,
    "artifacts_omitted_by_reason": {"symlink": 1, "quarantined": 1},
    "attachments": [{"name": "stdout", "handle": "", "content_type": "text/plain", "size_bytes": 19,
                     "truncated": False, "location": "inline", "bytes_let_go": 0, "preview": "looked up 3 orders\n"}],
    "problems": [],
    "bindings_spent": {"calls": 4, "transfer": 120, "produced": 130, "preserved": 0},
    "unavailable_bindings": ["gone_tool"],
    "a_member_of_a_newer_service": {"ignored": True},
}


def test_sandbox_result_from_the_compiled_run() -> None:
    result = result_from_compiled(json.dumps(RESULT_JSON), b"looked up 3 orders\n", b"", [b"a,b\n"])
    assert result.ok
    assert result.value == {"sum": 66.75, "rows": [1, 2, 3]}
    assert result.stdout == "looked up 3 orders\n" and result.stdout_data == b"looked up 3 orders\n"
    assert result.stdout_size == 19 and result.stderr_data == b""
    assert result.isolation is pr.IsolationLevel.ISOLATED
    assert result.guarantees.filesystem is pr.Enforcement.ENFORCED
    assert result.guarantees.identity is pr.Enforcement.UNVERIFIED
    assert result.guarantees.environment == "attested"  # a newer spelling: kept, not a crash
    assert result.artifacts == (pr.Artifact(path="out/report.csv", size_bytes=4, data=b"a,b\n"),)
    assert result.artifacts_omitted_by_reason == {pr.OmissionReason.SYMLINK: 1, "quarantined": 1}
    assert result.attachments[0].location is pr.AttachmentLocation.INLINE
    assert result.bindings_spent == pr.MeterReadings(calls=4, transfer=120, produced=130)
    assert result.unavailable_bindings == ("gone_tool",)
    assert result.duration_seconds == 0.0 and isinstance(result.duration_seconds, float)
    assert result.limit_hit is None and not result.cancelled


def test_an_allowlist_result_carries_its_egress_and_others_none() -> None:
    assert result_from_compiled(RESULT_JSON, b"", b"", [b"a,b\n"]).egress is None
    egress = {"connections_allowed": 2, "connections_refused": 3, "connections_cut": 1, "bytes_sent": 517,
              "bytes_received": 1 << 20,
              "refusals": [{"host": "evil.example", "port": 443, "reason": "destination_ip_prohibited",
                            "detail": "not in the allowlist"},
                           {"host": "10.0.0.1", "port": 80, "reason": "http_request_denied", "detail": "an IP literal",
                            "a_member_of_a_newer_service": 1}],
              "refusals_omitted": 1}
    result = result_from_compiled({**RESULT_JSON, "egress": egress}, b"", b"", [b"a,b\n"])
    assert result.egress == pr.EgressReport(
        connections_allowed=2, connections_refused=3, connections_cut=1, bytes_sent=517, bytes_received=1 << 20,
        refusals=(pr.EgressRefusal("evil.example", 443, "destination_ip_prohibited", "not in the allowlist"),
                  pr.EgressRefusal("10.0.0.1", 80, "http_request_denied", "an IP literal")),
        refusals_omitted=1)
    assert wire(result)["egress"]["refusals"][0] == egress["refusals"][0]
    assert "egress" not in wire(result_from_compiled(RESULT_JSON, b"", b"", [b"a,b\n"]))
    with pytest.raises(WireError, match="egress.connections_refused"):
        result_from_compiled({**RESULT_JSON, "egress": {**egress, "connections_refused": "three"}}, b"", b"",
                             [b"a,b\n"])


def test_a_failed_result_carries_the_traceback() -> None:
    data = {**RESULT_JSON, "value": None, "artifacts": [], "limit_hit": "memory_bytes",
            "failure": {"kind": "exception", "message": "MemoryError", "traceback": "Traceback...\n", "line": 3}}
    result = result_from_compiled(data, b"", b"Traceback...\n", [])
    assert not result.ok
    assert result.failure == pr.SandboxFailure(kind=pr.FailureKind.EXCEPTION, message="MemoryError",
                                               traceback="Traceback...\n", line=3)
    assert result.limit_hit == "memory_bytes" and result.value is None


def test_artifact_bytes_must_match_the_json() -> None:
    with pytest.raises(WireError):
        result_from_compiled(RESULT_JSON, b"", b"", [])


def test_the_result_json_leaves_the_captured_bytes_out() -> None:
    result = result_from_compiled(RESULT_JSON, b"x", b"y", [b"a,b\n"])
    encoded = wire(result)
    assert "stdout_data" not in encoded and "stderr_data" not in encoded
    assert encoded["artifacts"] == [{"path": "out/report.csv", "size_bytes": 4}]
    assert encoded["stdout"] == "looked up 3 orders\n"


def test_run_code_outcome_refused() -> None:
    outcome = pr.RunCodeOutcome.from_compiled(
        json.dumps({"refused": {"reason": "network_not_granted", "message": "network access is not granted by the profile"}}),
        b"", b"", [], '{"refused":{}}')
    assert outcome.result is None
    assert outcome.refusal == pr.Refusal(pr.RefusalReason.NETWORK_NOT_GRANTED, "network access is not granted by the profile")
    assert outcome.payload == '{"refused":{}}'


def test_run_code_outcome_ran() -> None:
    outcome = pr.RunCodeOutcome.from_compiled(json.dumps(RESULT_JSON), b"o", b"", [b"a,b\n"], "{}")
    assert outcome.refusal is None and outcome.result is not None and outcome.result.stdout_data == b"o"


DESCRIPTION_JSON = {
    "ready": True, "backend": "linux-namespaces", "isolation": "isolated",
    "guarantees": {"filesystem": "enforced", "network": "enforced", "process_tree": "enforced",
                   "identity": "enforced", "cpu": "enforced", "memory": "enforced", "file_size": "enforced",
                   "process_count": "enforced", "wall_clock": "enforced", "environment": "enforced"},
    "mechanisms": ["bwrap", "rlimits"], "problems": [],
    "limit_ceiling": {"cpu_seconds": 10.0, "address_space_bytes": 536870912, "file_size_bytes": 10485760,
                      "process_count": 64, "wall_seconds": 30.0},
    "network": False, "network_allowlist": True, "allowed_hosts": ["*.example.com", "api.example.org:8443"],
    "interpreter": "/usr/bin/python3.11", "launcher": "/opt/psych/libexec/psych/psych-launch-linux",
    "run_as": {"mode": "per_execution", "first": 1500000, "count": 1024, "free": 1020, "held": 4, "stray": 0,
               "lock_dir": "/run/psych/uids"},
}


def test_description_round_trip() -> None:
    described = from_json(pr.Description, DESCRIPTION_JSON)
    assert described.ready and described.isolation is pr.IsolationLevel.ISOLATED
    assert described.limit_ceiling == pr.SandboxLimits()
    assert described.run_as == pr.RunAsReport(mode=pr.RunAsMode.PER_EXECUTION, first=1500000, count=1024,
                                               free=1020, held=4, stray=0, lock_dir="/run/psych/uids")
    assert described.network_allowlist and described.allowed_hosts == ("*.example.com", "api.example.org:8443")
    assert wire(described) == DESCRIPTION_JSON
    assert from_json(pr.Description, {**DESCRIPTION_JSON, "run_as": None}).run_as is None
    uncapped = from_json(pr.Description, {**DESCRIPTION_JSON, "allowed_hosts": None})
    assert uncapped.allowed_hosts is None and "allowed_hosts" not in wire(uncapped)
    older = {k: v for k, v in DESCRIPTION_JSON.items() if k not in ("network_allowlist", "allowed_hosts")}
    assert not from_json(pr.Description, older).network_allowlist  # an older service's description


def test_profile_statuses_backends_and_offers() -> None:
    statuses = from_json(tuple[pr.ProfileStatus, ...], [{"profile": "default", "described": DESCRIPTION_JSON}])
    assert statuses[0].profile == "default" and statuses[0].description.backend == "linux-namespaces"
    backends = from_json(tuple[pr.BackendInfo, ...], [
        {"name": "linux-process", "isolation": "process", "available": True, "reason": "rlimits"},
        {"name": "macos-process", "isolation": "process", "available": False, "reason": "not macOS"}])
    assert [b.available for b in backends] == [True, False]
    offer = from_json(BackendOffer, {"ready": True, "isolation": "process", "limit_ceiling": DESCRIPTION_JSON["limit_ceiling"],
                                     "network": True, "problems": []})
    assert offer.network and offer.limit_ceiling == pr.SandboxLimits()
    assert not offer.network_allowlist and offer.allowed_hosts is None
    capped = from_json(BackendOffer, {"ready": True, "isolation": "isolated", "network": False,
                                      "network_allowlist": True, "allowed_hosts": ["*.example.com"], "problems": []})
    assert capped.network_allowlist and capped.allowed_hosts == ("*.example.com",)
    assert wire(capped)["allowed_hosts"] == ["*.example.com"]


def test_output_window() -> None:
    window = from_json_text(pr.OutputWindow, json.dumps({
        "lines": [{"number": 0, "text": "a"}, {"number": 1, "text": "b"}], "total_lines": 10, "total_bytes": 20,
        "next_offset": 2, "line_truncated": False, "search_cut": False}))
    assert window.lines == (pr.OutputLine(0, "a"), pr.OutputLine(1, "b")) and window.next_offset == 2
    assert from_json(pr.OutputWindow, {"lines": [], "next_offset": None}).next_offset is None


def test_json_that_does_not_fit_is_named() -> None:
    with pytest.raises(WireError, match="limit_ceiling.cpu_seconds"):
        from_json(pr.Description, {**DESCRIPTION_JSON, "limit_ceiling": {"cpu_seconds": "ten"}})
    with pytest.raises(WireError, match="address_space_bytes"):
        from_json(pr.SandboxLimits, {"address_space_bytes": 1.5})


# -- validation --------------------------------------------------------------------------------


def test_wrong_types_name_the_parameter() -> None:
    with pytest.raises(TypeError, match="cpu_seconds"):
        pr.SandboxLimits(cpu_seconds="10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="process_count"):
        pr.SandboxLimits(process_count=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="address_space_bytes"):
        pr.SandboxLimits(address_space_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bindings"):
        pr.CodeExecution(bindings="lookup_order")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="network"):
        pr.CodeExecution(network="unrestricted")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model"):
        pr.AgentSpec(name="a", model="gpt-5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_total_bytes"):
        pr.BindingBudget(max_total_bytes="8M")  # type: ignore[arg-type]


def test_values_out_of_range_are_value_errors() -> None:
    with pytest.raises(ValueError, match="cpu_seconds"):
        pr.SandboxLimits(cpu_seconds=-1)
    with pytest.raises(ValueError, match="wall_seconds"):
        pr.SandboxLimits(wall_seconds=float("nan"))
    with pytest.raises(ValueError, match="wall_seconds"):
        pr.CodeExecutionLimits(wall_seconds=0)
    with pytest.raises(ValueError, match="max_calls"):
        pr.BindingBudget(max_calls=-1)
    with pytest.raises(ValueError, match="preview_bytes"):
        pr.OutputPolicy(preview_bytes=-1)
    with pytest.raises(ValueError, match="file_size_bytes"):
        pr.LimitCaps(file_size_bytes=1 << 64)


def test_values_are_normalised() -> None:
    assert pr.SandboxLimits(cpu_seconds=5).cpu_seconds == 5.0
    assert isinstance(pr.SandboxLimits(cpu_seconds=5).cpu_seconds, float)
    assert pr.CodeExecution(bindings=["a", "b"]).bindings == ("a", "b")
    hash(pr.CodeExecution(bindings=["a"]))  # frozen and hashable


def test_run_code_is_reserved_in_a_spec_only() -> None:
    tool = pr.CodeTool(name="run_code")
    with pytest.raises(pr.PublishError, match="reserved"):
        pr.AgentSpec(name="a", model=pr.ModelRef("m"), tools=(tool,))
    assert issubclass(pr.PublishError, ValueError)


def test_a_function_tool_cannot_take_an_mcp_address() -> None:
    with pytest.raises(ValueError, match="__"):
        pr.CodeTool("warehouse__stock", lambda: None)
    pr.CodeTool("warehouse__stock_level")  # naming a server's tool in a spec is fine


def test_profiles() -> None:
    class FakeSandbox:
        async def describe(self) -> pr.Description:
            return pr.Description()

        async def run(self, program: str, **terms: object) -> pr.SandboxResult:
            return pr.SandboxResult()

    profile = SandboxProfile("heavy", FakeSandbox(), hard_limits=pr.SandboxLimits(wall_seconds=120))
    assert profile.hard_limits == pr.LimitCaps.of(pr.SandboxLimits(wall_seconds=120))
    assert SandboxProfile("default", FakeSandbox()).caps == pr.LimitCaps()
    with pytest.raises(ValueError, match="twice"):
        SandboxProfiles([SandboxProfile("a", FakeSandbox()), SandboxProfile("a", FakeSandbox())])
    with pytest.raises(TypeError, match="sandbox"):
        SandboxProfile("a", object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sandbox must be Sandbox, got NoneType"):
        SandboxProfile("a", None)  # type: ignore[arg-type]
    profiles = SandboxProfiles([SandboxProfile("a", FakeSandbox()), SandboxProfile("b", FakeSandbox(), allow_network=True)])
    assert profiles.names == ("a", "b") and profiles["b"].allow_network and len(profiles) == 2
    assert profiles["a"].allowed_hosts == ()  # a profile allows no host unless it says so
    listed = SandboxProfile("c", FakeSandbox(), allowed_hosts=["*.example.com"])
    assert listed.allowed_hosts == ("*.example.com",)
    with pytest.raises(TypeError, match="allowed_hosts"):
        SandboxProfile("c", FakeSandbox(), allowed_hosts="*.example.com")  # type: ignore[arg-type]


def test_runtime_refuses_sandbox_and_sandboxes_before_loading_anything() -> None:
    class FakeSandbox:
        async def describe(self) -> None: ...
        async def run(self, program: str) -> None: ...

    with pytest.raises(ValueError, match="not both"):
        pr.Runtime(sandbox=FakeSandbox(), sandboxes=[SandboxProfile("x", FakeSandbox())])
    with pytest.raises(ValueError, match="no function"):
        pr.Runtime(tools=[pr.CodeTool("lookup")])
    with pytest.raises(ValueError, match="twice"):
        pr.Runtime(tools=[pr.CodeTool("f", lambda: 1), pr.CodeTool("f", lambda: 2)])
    ran = without_the_compiled_module(
        "import sys, psych_runtime as pr\n"
        "try:\n    pr.Runtime(sandbox=object(), sandboxes=[])\nexcept ValueError:\n    pass\n"
        "assert 'psych_runtime._psych' not in sys.modules\n")
    assert ran.returncode == 0, ran.stderr


def test_excluded_builtins() -> None:
    assert set(EXCLUDED_BUILTINS) == {
        "ask_question", "delegate", "spawn_subagent", "check_subagent", "message_subagent", "remember", "forget",
        "update_tasks", "load_skill", "show_component", "run_code"}
    assert CALLABLE_BUILTINS == {"list_tools", "get_tool_info", "read_tool_output"}
    assert all(reason.startswith(name) for name, reason in EXCLUDED_BUILTINS.items())
    assert pr.EXCLUDED_BUILTINS is EXCLUDED_BUILTINS


def test_failures_map_to_exceptions_by_kind() -> None:
    class Failure(Exception):
        def __init__(self, kind: str, message: str) -> None:
            super().__init__(message)
            self.kind, self.message = kind, message

    setup = translate(Failure("sandbox_setup", "no backend reaches isolated: install bwrap"))
    assert isinstance(setup, pr.SandboxSetupError) and setup.message.endswith("install bwrap")
    assert isinstance(translate(Failure("launcher_unavailable", "x")), pr.SandboxSetupError)
    assert isinstance(translate(Failure("invalid_argument", "bad"), publishing=True), pr.PublishError)
    other = translate(Failure("blob_not_found", "no such handle"))
    assert isinstance(other, RuntimeError) and other.kind == "blob_not_found" and "blob_not_found" in str(other)


def test_to_json_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(TypeError):
        to_json(object())
