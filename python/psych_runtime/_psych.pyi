# The compiled half of psych_runtime: a pybind11 module over psych::host (python/extension/).
# Everything structured crosses as one JSON text, encoded and decoded by psych's own codec (the
# Hana field walk), so a field is named once, in the C++ struct, and the Python dataclasses
# mirror those names. Every call that can block (a probe, a program, a tool source's start)
# releases the GIL. Nothing here is public API: psych_runtime's modules wrap it.
from typing import Callable, Optional

class Failure(Exception):
    """A psych error: .kind is the error kind's name (sandbox_setup, invalid_argument, ...; an MCP
    server that could not be started: mcp_server_unavailable); args == (kind, message)."""

    kind: str
    message: str

class StopSource:
    """A std::stop_source: request_stop() cancels the run it was handed to (kills the tree)."""

    def __init__(self) -> None: ...
    def request_stop(self) -> bool: ...
    def stop_requested(self) -> bool: ...

class Sandbox:
    """A std::shared_ptr<psych::sandbox>."""

    def describe(self) -> str: ...  # psych::description as JSON (result_json.hpp's names)
    def offer(self) -> str: ...  # psych::backend_offer as JSON
    # One program under terms (psych::execution_terms as JSON: isolation, limits (sandbox_limits),
    # network, allowed_hosts, output, artifacts), no bindings. Returns
    # (sandbox_result JSON, stdout bytes, stderr bytes, [artifact bytes, in the JSON's order]).
    # on_output(stream, offset, data, skipped): live output, on psych's delivery thread with the GIL.
    def run(self, program: str, terms_json: str, filename: str, stop: StopSource,
            on_output: Optional[Callable[[str, int, bytes, int], None]] = None) -> tuple[str, bytes, bytes, list[bytes]]: ...

# options_json: psych::local_sandbox_options as JSON (every member optional; the C++ defaults).
def local_sandbox(options_json: str) -> Sandbox: ...
def detect_local_backends(options_json: str) -> str: ...  # a JSON list of backend_info
def container_sandbox(options_json: str) -> Sandbox: ...  # container_sandbox_options
# remote_sandbox_options as JSON, minus the token; token() is called fresh per request and returns
# the credential (str) or None for none. An exception it raises is a sandbox_setup failure.
def remote_sandbox(options_json: str, token: Optional[Callable[[], Optional[str]]]) -> Sandbox: ...

class RunLog:
    @staticmethod
    def file(path: str) -> "RunLog": ...  # open_file_run_log; creates the file when absent
    @staticmethod
    def memory() -> "RunLog": ...

class BlobStore:
    @staticmethod
    def directory(path: str) -> "BlobStore": ...

class ToolSource:
    """The agent's tools: Python functions (psych::function_tools), MCP servers over stdio, MCP
    servers over HTTP, A2A peers and HTTP tools, offered as one catalogue (binding_sources)."""

    # tools: (name, description, input schema JSON, requires_approval) each.
    # dispatch(name, arguments_json, stop) is called on a pool thread with the GIL held, once per call,
    # and returns (True, value JSON) or (False, "tool_error_kind name", message). An exception it
    # raises becomes tool_failed. stop.stop_requested() turns true when the program stopped waiting.
    # mcp_servers_json: a JSON list of {"name", "command": [...], "environment": {...}, "timeout_ms",
    # "start_timeout_ms"} (stdio) or {"name", "url", "ca_file", "allow_insecure_http", "timeout_ms"}
    # (HTTP), each HTTP one with an optional token callback in tokens[name]. Servers start
    # here (blocking, GIL released); one that cannot is Failure("mcp_server_unavailable").
    def __init__(
        self,
        tools: list[tuple[str, str, str, bool]],
        dispatch: Callable[[str, str, "StopToken"], tuple],
        mcp_servers_json: str,
        tokens: dict[str, Callable[[], Optional[str]]],  # per MCP-over-HTTP server and A2A peer, by name
        a2a_peers_json: str = "[]",  # [{"name", "url", "ca_file", "allow_insecure_http", "timeout_ms", "start_timeout_ms"}]
        http_tools_json: str = "",  # the declarations, in the format of psych run --http-tools FILE
    ) -> None: ...
    def offered_json(self) -> str: ...  # offered_now(), as JSON bindings
    def connected_servers(self) -> list[str]: ...
    # A direct call by the model (the runtime's own tool path): (ok, value JSON or kind, message).
    def call(self, name: str, arguments_json: str) -> tuple: ...
    # Joins the tools' threads and stops the MCP servers; a Runtime over a closed source refuses to
    # start an Attempt or run a program (Failure invalid_argument "this Runtime is closed").
    def close(self) -> None: ...

class StopToken:
    def stop_requested(self) -> bool: ...

class Runtime:
    # profiles: (name, Sandbox, hard_limits JSON (limit_caps), allow_network, allowed_hosts (host
    # patterns), budget JSON (binding_budget)). A pattern that does not parse is Failure(invalid_argument).
    # policy(tenant, grant JSON) -> grant JSON (code_execution_grant), or None for no policy.
    def __init__(
        self,
        profiles: list[tuple[str, Sandbox, str, bool, list[str], str]],
        policy: Optional[Callable[[str, str], str]],
        tools: Optional[ToolSource],
        blobs: Optional[BlobStore],
        profiles_known_at_publish: bool,
        tools_known_at_publish: bool,
    ) -> None: ...
    def publish(self, spec_json: str) -> str: ...  # the Version hash; Failure(invalid_argument) otherwise
    def verify_sandboxes(self) -> str: ...  # JSON list of {"profile", "described"}
    def start_attempt(self, spec_json: str, log: RunLog, tenant: str) -> "Attempt": ...
    # read_tool_output for the model: output_request JSON {"offset","limit","pattern"} -> output_window JSON
    def read_tool_output(self, tenant: str, handle: str, request_json: str) -> str: ...

class Attempt:
    def tool_names(self) -> list[str]: ...
    # One run_code call: (outcome JSON — {"refused": {...}} or a sandbox_result —, stdout bytes,
    # stderr bytes, [artifact bytes], the model's payload JSON text). Failure for a policy that widened.
    def run_code(self, program: str, stop: StopSource,
                 on_output: Optional[Callable[[str, int, bytes, int], None]] = None) -> tuple[str, bytes, bytes, list[bytes], str]: ...
    # The calls this Attempt found in flight from an earlier one (started, never finished), which
    # opening it recorded as unknown_outcome: [{"call_id", "execution_id", "tool", "argument_bytes"}].
    def unknown_calls_json(self) -> str: ...
    def run_spent_json(self) -> str: ...  # the Run's meters, recounted from its log (meter_readings)
