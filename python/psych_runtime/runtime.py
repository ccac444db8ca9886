"""The runtime face: what a runtime author wires. The deployment registers backends under profile
names with their hard limits; an agent's Spec asks for a profile and terms no wider. Publishing
checks the Spec and fixes its Version hash; an Attempt resolves the profile (loudly, if it is
unknown) and offers run_code only to an agent whose Spec has code_execution.

Everything asynchronous here is asyncio-native: a blocking compiled call runs on a thread this
Runtime owns, and cancelling the awaiting task stops it (for run_code: kills the process tree)
before the cancellation propagates.
"""
from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ._blocking import call_blocking, executor
from ._dispatch import ToolDispatch
from ._json import from_json, from_json_text, to_json_text
from .budget import MeterReadings
from .description import ProfileStatus
from .errors import ToolCallError, translate
from .live import OutputCallback, deliverer
from .grant import CodeExecutionGrant, CodeExecutionPolicy
from .results import OutputRequest, OutputWindow, RunCodeOutcome
from .sandbox.port import Sandbox
from .sandbox.profiles import SandboxProfile, SandboxProfiles
from .spec import AgentSpec, AgentVersion
from .tools import A2aPeer, CodeTool, HttpTool, McpHttpServer, McpServer, http_tokens, reserved_name_message


class UnknownCall(NamedTuple):
    """A call started and never finished by an earlier Attempt (a Worker died with it in flight)."""

    call_id: str
    tool: str


class RunLog:
    """The Run's journal. The per-Run meters are counted from it, so a Worker that dies mid-program
    does not hand the next Attempt a fresh allowance, and a call left in flight is UNKNOWN, never
    replayed."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    @staticmethod
    def file(path: str) -> "RunLog":
        """A run log in a file, created when absent."""
        from . import _psych

        try:
            return RunLog(_psych.RunLog.file(str(path)))
        except _psych.Failure as failure:
            raise translate(failure) from None

    @staticmethod
    def memory() -> "RunLog":
        from . import _psych

        return RunLog(_psych.RunLog.memory())



def _http_tool_declarations(http_tools: Any) -> str:
    """The HTTP tools' declarations as the JSON text psych parses (empty: none). A file's relative
    paths (a CA file) stay the file's business: its content is read here, as the CLI reads it."""
    if http_tools is None:
        return ""
    if isinstance(http_tools, Mapping):
        return json.dumps(http_tools)
    if isinstance(http_tools, (str, os.PathLike)):
        with open(http_tools, encoding="utf-8") as declarations:
            return declarations.read()
    raise TypeError(f"Runtime: http_tools takes a path or a dict, got {type(http_tools).__name__}")


class Runtime:
    """Sandboxes under profile names, the agent's tools, and the tenant policy that narrows them.

    `sandboxes`: SandboxProfiles or a sequence of SandboxProfile; `sandbox`: one sandbox, which
    registers as the profile "default" (giving both is a ValueError). `tools`: CodeTools with a
    function. `mcp_servers`: McpServer (stdio) and McpHttpServer, whose tools are bindable as
    `server__tool`. `a2a_peers`: A2aPeer, each skill a tool `peer__skill`. `http_tools`: HTTP
    endpoints declared as tools, in the format of `psych run --http-tools FILE` (docs/http-tools.md):
    that file's path, or its content as a dict ({"tools": [...]}); a credential is never in it, only
    the command or environment variable it comes from. `code_execution_policy(tenant, grant) ->
    grant` narrows a grant per tenant.
    `blob_store`: a directory where outputs, artifacts and large results are preserved (None:
    nothing is; OutputPolicy.preserve=REQUIRED is then refused). `profiles_known_at_publish` /
    `tools_known_at_publish`: False when those are registered after publishing, so that publish
    does not refuse what it cannot know yet (the Attempt checks the profile instead).
    """

    def __init__(
        self,
        *,
        sandboxes: "SandboxProfiles | Sequence[SandboxProfile] | None" = None,
        sandbox: Optional[Sandbox] = None,
        tools: Sequence[CodeTool] = (),
        mcp_servers: Sequence[McpServer | McpHttpServer] = (),
        a2a_peers: Sequence[A2aPeer] = (),
        http_tools: "str | os.PathLike[str] | Mapping[str, Any] | None" = None,
        code_execution_policy: Optional[CodeExecutionPolicy] = None,
        blob_store: Optional[str] = None,
        profiles_known_at_publish: bool = True,
        tools_known_at_publish: bool = True,
    ) -> None:
        profiles = _profiles(sandboxes, sandbox)
        registered = _registered_tools(tools)
        servers = tuple(mcp_servers)
        for server in servers:
            if not isinstance(server, (McpServer, McpHttpServer)):
                raise TypeError(f"Runtime: mcp_servers takes McpServer and McpHttpServer, got {type(server).__name__}")
        peers = tuple(a2a_peers)
        for peer in peers:
            if not isinstance(peer, A2aPeer):
                raise TypeError(f"Runtime: a2a_peers takes A2aPeer, got {type(peer).__name__}")
        declared = _http_tool_declarations(http_tools)
        if code_execution_policy is not None and not callable(code_execution_policy):
            raise TypeError("Runtime: code_execution_policy must be a callable (tenant, grant) -> grant")
        for name, flag in (("profiles_known_at_publish", profiles_known_at_publish),
                           ("tools_known_at_publish", tools_known_at_publish)):
            if not isinstance(flag, bool):
                raise TypeError(f"Runtime: {name} must be bool")

        # Before anything is started (an MCP server), so a wrong sandbox leaves nothing running.
        wired = [(p.name, _compiled_sandbox(p), to_json_text(p.caps), p.allow_network, list(p.allowed_hosts),
                  to_json_text(p.binding_budget))
                 for p in profiles]

        from . import _psych

        # The compiled objects hold the dispatch and the policy; neither refers back to this
        # Runtime, so dropping the Runtime frees them without waiting for the cycle collector.
        self._loop = _LoopSlot()
        self._threads = executor("psych-runtime")
        try:
            self._tools = None
            if registered or servers or peers or declared:
                self._tools = _psych.ToolSource(
                    [(t.name, t.description or "", json.dumps(t.input_schema or {"type": "object"}), t.destructive)
                     for t in registered.values()],
                    ToolDispatch(registered, self._loop.get),
                    to_json_text(tuple(s.wire() for s in servers)),
                    dict(http_tokens(servers + peers)),
                    to_json_text(tuple(p.wire() for p in peers)),
                    declared,
                )
            blobs = None if blob_store is None else _psych.BlobStore.directory(str(blob_store))
            self._compiled = _psych.Runtime(
                wired,
                None if code_execution_policy is None else _policy_for_compiled(code_execution_policy),
                self._tools,
                blobs,
                profiles_known_at_publish,
                tools_known_at_publish,
            )
        except _psych.Failure as failure:
            self._threads.shutdown(wait=False)
            raise translate(failure) from None
        self._profiles = profiles

    def _record_loop(self) -> None:
        # The loop async tools run on: the one this Runtime's calls are awaited from.
        self._loop.loop = asyncio.get_running_loop()

    # -- publishing and Attempts ----------------------------------------------------------------

    def publish(self, spec: AgentSpec) -> AgentVersion:
        """The Version of `spec`. PublishError when it claims run_code, lists a binding that is
        neither a granted tool, a callable built-in nor addressed to a connected server, is granted
        a tool the runtime does not have (when it knows its tools), or names a profile that is not
        registered (when it knows its profiles)."""
        from . import _psych

        if not isinstance(spec, AgentSpec):
            raise TypeError(f"publish takes an AgentSpec, got {type(spec).__name__}")
        # A spec claiming run_code never gets here: AgentSpec refuses it, and so does the C++ publish.
        try:
            digest = self._live().publish(to_json_text(spec))
        except _psych.Failure as failure:
            raise translate(failure, publishing=True) from None
        return AgentVersion(spec=spec, hash=digest)

    async def verify_sandboxes(self) -> tuple[ProfileStatus, ...]:
        """describe() of every profile, at startup: readiness without running model-written code."""
        from . import _psych

        self._record_loop()
        compiled = self._live()
        try:
            text = await call_blocking(self._threads, compiled.verify_sandboxes)
        except _psych.Failure as failure:
            raise translate(failure) from None
        return from_json(tuple[ProfileStatus, ...], json.loads(text))

    def start_attempt(self, version: AgentVersion, run_log: RunLog, tenant: str = "default") -> "Attempt":
        """One Attempt of a Run of `version` for `tenant`, journalled in `run_log`. A profile name
        nothing is registered under stops it here, loudly: SandboxSetupError."""
        from . import _psych

        if not isinstance(version, AgentVersion):
            raise TypeError(f"start_attempt takes the AgentVersion publish() returned, got {type(version).__name__}")
        if not isinstance(run_log, RunLog):
            raise TypeError(f"start_attempt: run_log must be a RunLog, got {type(run_log).__name__}")
        if not isinstance(tenant, str):
            raise TypeError("start_attempt: tenant must be str")
        try:
            compiled = self._live().start_attempt(to_json_text(version.spec), run_log._compiled, tenant)
        except _psych.Failure as failure:
            # The compiled side publishes the spec again first: its invalid_argument is a publish
            # refusal (a hand-made AgentVersion); an unknown profile it could not check is setup.
            raise translate(failure, publishing=True) from None
        return Attempt(self, compiled, version, run_log, tenant)

    # -- the model's own tool path --------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """A direct call by the model: the tool's value, or ToolCallError(kind, message)."""
        self._record_loop()
        if not isinstance(name, str):
            raise TypeError("call_tool: name must be str")
        if not isinstance(arguments, dict):
            raise TypeError(f"call_tool: arguments must be a dict, got {type(arguments).__name__}")
        if self._tools is None:
            raise ToolCallError("unknown_tool", f"no tool named {name!r}: this runtime has no tools")
        arguments_json = json.dumps(arguments, allow_nan=False)
        tools = self._tools
        answer = await call_blocking(self._threads, lambda: tools.call(name, arguments_json))
        if answer[0]:
            return json.loads(answer[1])
        raise ToolCallError(answer[1], answer[2])

    async def read_tool_output(self, handle: str, *, offset: int = 0, limit: int = 100,
                               pattern: Optional[str] = None, tenant: str = "default") -> OutputWindow:
        """One window of a preserved result, by line window or, with `pattern`, by regular
        expression: a large output is paged, never re-inserted whole."""
        from . import _psych

        self._record_loop()
        request = to_json_text(OutputRequest(offset=offset, limit=limit, pattern=pattern))
        compiled = self._live()
        try:
            text = await call_blocking(self._threads, lambda: compiled.read_tool_output(tenant, handle, request))
        except _psych.Failure as failure:
            raise translate(failure) from None
        return from_json_text(OutputWindow, text)

    # -- lifetime -------------------------------------------------------------------------------

    def _live(self) -> Any:
        if self._compiled is None:
            raise RuntimeError("this Runtime is closed")
        return self._compiled

    def close(self) -> None:
        """Waits for the calls in flight, then releases the compiled runtime and its tool source
        (stopping its MCP servers)."""
        self._threads.shutdown(wait=True)
        if self._tools is not None:
            self._tools.close()  # joins the tools' threads and stops the MCP servers now, not at GC
        self._compiled = None
        self._tools = None

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> "Runtime":
        self._record_loop()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    @property
    def profiles(self) -> tuple[SandboxProfile, ...]:
        return self._profiles


class Attempt:
    """One Attempt of a Run: the tools the model is shown, and run_code."""

    def __init__(self, runtime: Runtime, compiled: Any, version: AgentVersion, run_log: RunLog, tenant: str) -> None:
        self._runtime = runtime
        self._compiled = compiled
        self._run_log = run_log  # the compiled Attempt journals into it: kept alive as long as this
        self.version = version
        self.tenant = tenant

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The Spec's tools, and run_code only when the Spec has code_execution."""
        return tuple(self._compiled.tool_names())

    async def run_code(self, program: str, *, on_output: Optional[OutputCallback] = None) -> RunCodeOutcome:
        """One program. A refusal (no network grant, an isolation level the backend cannot reach, a
        backend that is not ready) and every failure of the program are data in the outcome; a
        policy that widened its grant is an error (PsychError, invalid_argument). Cancelling the
        awaiting task kills the process tree before the cancellation propagates. `on_output(chunk)`
        receives the program's output as it arrives, on this event loop (psych_runtime.live)."""
        from . import _psych

        if not isinstance(program, str):
            raise TypeError(f"run_code: program must be str, got {type(program).__name__}")
        runtime = self._runtime
        runtime._record_loop()
        runtime._live()
        stop = _psych.StopSource()
        compiled = self._compiled
        deliver = deliverer(on_output)
        try:
            outcome, out, err, artifact_data, payload = await call_blocking(
                runtime._threads, lambda: compiled.run_code(program, stop, deliver), stop)
        except _psych.Failure as failure:
            raise translate(failure) from None
        return RunCodeOutcome.from_compiled(outcome, out, err, artifact_data, payload)

    @property
    def unknown_calls(self) -> tuple[UnknownCall, ...]:
        """Each call an earlier Attempt left in flight, (call_id, tool): recorded UNKNOWN when this
        Attempt opened, counted, and never re-run."""
        return tuple(UnknownCall(c["call_id"], c["tool"]) for c in json.loads(self._compiled.unknown_calls_json()))

    def run_spent(self) -> MeterReadings:
        """The Run's meters, recounted from its log."""
        from . import _psych

        try:
            return from_json_text(MeterReadings, self._compiled.run_spent_json())
        except _psych.Failure as failure:
            raise translate(failure) from None


class _LoopSlot:
    loop: Optional[asyncio.AbstractEventLoop] = None

    def get(self) -> Optional[asyncio.AbstractEventLoop]:
        return self.loop


def _policy_for_compiled(policy: CodeExecutionPolicy) -> Callable[[str, str], str]:
    def answer(tenant: str, grant_json: str) -> str:
        # Called by the compiled runtime on the thread running run_code. An exception propagates
        # back out of run_code: a policy that cannot answer must never be read as "allow".
        offered = from_json_text(CodeExecutionGrant, grant_json)
        answered = policy(tenant, offered)
        if not isinstance(answered, CodeExecutionGrant):
            raise TypeError(f"the CodeExecutionPolicy returned {type(answered).__name__}, not a CodeExecutionGrant")
        return to_json_text(answered)

    return answer


def _profiles(sandboxes: "SandboxProfiles | Sequence[SandboxProfile] | None",
              sandbox: Optional[Sandbox]) -> tuple[SandboxProfile, ...]:
    if sandboxes is not None and sandbox is not None:
        raise ValueError("give a Runtime either sandboxes= or sandbox=, not both")
    if sandbox is not None:
        return (SandboxProfile("default", sandbox),)
    if sandboxes is None:
        return ()
    if not isinstance(sandboxes, SandboxProfiles):
        if isinstance(sandboxes, (str, bytes)) or not hasattr(sandboxes, "__iter__"):
            raise TypeError("Runtime: sandboxes must be SandboxProfiles or a sequence of SandboxProfile")
        sandboxes = SandboxProfiles(sandboxes)
    return tuple(sandboxes)


def _registered_tools(tools: Sequence[CodeTool]) -> dict[str, CodeTool]:
    registered: dict[str, CodeTool] = {}
    for tool in tools:
        if isinstance(tool, HttpTool):
            raise TypeError(f"Runtime: HttpTool {tool.name!r} is declared with http_tools=, not tools= "
                            "(which takes CodeTools with a function)")
        if not isinstance(tool, CodeTool):
            raise TypeError(f"Runtime: tools takes CodeTool values, got {type(tool).__name__}")
        if tool.fn is None:
            raise ValueError(f"Runtime: CodeTool {tool.name!r} has no function to run")
        reserved = reserved_name_message(tool.name)
        if reserved:
            raise ValueError(reserved)
        if tool.name in registered:
            raise ValueError(f"Runtime: tool {tool.name!r} is registered twice")
        registered[tool.name] = tool
    return registered


def _compiled_sandbox(profile: SandboxProfile) -> Any:
    compiled = getattr(profile.sandbox, "_compiled_sandbox", None)
    if compiled is None:
        raise TypeError(
            f"profile {profile.name!r}: a Runtime runs programs through a compiled psych sandbox "
            "(local_sandbox(), ContainerSandbox, RemoteSandbox); "
            f"{type(profile.sandbox).__name__} satisfies the Sandbox port but cannot be wired into a profile")
    return compiled


__all__ = ["Attempt", "Runtime", "RunLog", "UnknownCall"]
