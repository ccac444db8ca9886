#pragma once
// The frames of the launcher contract (docs/contract.md), as plain structs.
// Each frame names its `type`; the codec (json.hpp) walks the fields
// generically, so the JSON of a frame is exactly its members. Members are
// optional on decode (a newer peer may add some) unless listed in
// required_members, without which the frame means nothing.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/isolation.hpp"
#include "psych/json_text.hpp"
#include "psych/limits.hpp"
#include "psych/open_enum.hpp"
#include "psych/protocol/launch_stage.hpp"
#include "psych/reports.hpp"
#include "psych/tool_errors.hpp"

namespace psych::protocol {

inline constexpr std::int64_t contract_version = 1;

struct probe_ports {
  std::int64_t ipv4_port = 0;  ///< 0: no listener on that family
  std::int64_t ipv6_port = 0;
};

struct identity {
  std::int64_t uid = -1;
  std::int64_t gid = -1;
  /// Only this execution runs as this uid (a uid per execution): every process of it is the
  /// program's, which a launcher without a subreaper finds its orphans by.
  bool exclusive = false;
};

// ---- control: host -> launcher ----------------------------------------------

struct launch_frame {
  static constexpr std::string_view type = "launch";
  static constexpr std::array<std::string_view, 2> required_members{"version", "token"};
  std::int64_t version = contract_version;
  std::string token;
  isolation_level isolation = isolation_level::process;
  sandbox_limits limits;
  network_access network = network_access::none;
  std::map<std::string, std::string> environment;
  std::string interpreter;
  std::string workspace;
  std::string tmp_dir;
  std::string canary;
  probe_ports probe;
  std::optional<identity> run_as;
  bool allow_same_uid = false;
  std::int64_t open_files = 256;
  /// A prepared sandbox (docs/pools.md): the launcher starts the child as usual but holds no wall
  /// clock until a `narrow` frame arrives; the limits above are the most the execution may get.
  bool prepared = false;
  /// network=allowlist (isolated only; docs/network.md): the port psych's egress proxy listens on
  /// inside the sandbox's network namespace. The launcher makes the listening sockets there and
  /// hands them to the host over fd 5 before `started`.
  std::int64_t egress_proxy_port = 0;
};

/// The descriptor a network=allowlist launch inherits besides 0-4: a Unix socket the launcher
/// sends the proxy's listening sockets over (SCM_RIGHTS), once, before `started`.
inline constexpr int egress_handover_fd = 5;

/// A prepared sandbox is claimed: its limits become these (each at most the launch's), the
/// launcher writes the cgroup's, restarts the wall clock and answers `narrowed`. Once, and only
/// for a `prepared` launch.
struct narrow_frame {
  static constexpr std::string_view type = "narrow";
  static constexpr std::array<std::string_view, 1> required_members{"limits"};
  sandbox_limits limits;
};

/// Why the host ends an execution with `cancel`.
enum class cancel_reason {
  /// The caller cancelled, or the host gave up on the execution (a broken contract, a lost peer).
  cancelled,
  /// The host's wall clock ran out: the launcher reports the end as `limit_hit: wall_seconds`.
  timeout,
};

}  // namespace psych::protocol

namespace psych {
PSYCH_ENUM_NAMES(protocol::cancel_reason, "cancelled", "timeout");
}

namespace psych::protocol {

/// A reason this launcher does not have (a newer host's) ends the execution as `cancelled` does.
struct cancel_frame {
  static constexpr std::string_view type = "cancel";
  open_enum<cancel_reason> reason;
};

// ---- control: launcher -> host ----------------------------------------------

struct started_frame {
  static constexpr std::string_view type = "started";
  static constexpr std::array<std::string_view, 2> required_members{"pid", "mechanisms"};
  std::int64_t pid = 0;
  mechanism_report mechanisms;
};

/// Setup failed before the program could run. Names the stage, the call and errno.
struct launch_error_frame {
  static constexpr std::string_view type = "error";
  open_enum<launch_stage> stage;
  std::string syscall;
  std::int64_t error_number = 0;
  std::string message;
};

/// The answer to `narrow`: the cgroup holds the narrowed limits, and these are the rlimits the
/// child is to lower its own to (what `started` would have reported for these limits).
struct narrowed_frame {
  static constexpr std::string_view type = "narrowed";
  static constexpr std::array<std::string_view, 1> required_members{"rlimits"};
  applied_rlimits rlimits;
};

struct exit_frame {
  static constexpr std::string_view type = "exit";
  static constexpr std::array<std::string_view, 1> required_members{"exit_code"};
  std::int64_t exit_code = -1;
  /// The number of the signal that ended the child (the host names it for messages); null when
  /// the child exited.
  std::optional<std::int64_t> signal;
  double user_seconds = 0;
  double system_seconds = 0;
  std::int64_t max_rss_bytes = 0;
  double wall_seconds = 0;
  std::optional<limit_name> limit_hit;  ///< the cap the launcher saw end the child; null: none
  bool cancelled = false;
  std::int64_t killed = 0;     ///< descendants killed after the child ended
  std::int64_t survivors = 0;  ///< descendants still alive after the kill: must be 0
};

// ---- channel: child -> host -------------------------------------------------

struct hello_frame {
  static constexpr std::string_view type = "hello";
  static constexpr std::array<std::string_view, 2> required_members{"token", "report"};
  std::string token;
  child_report report;
};

enum class program_error_kind { exception, syntax_error, value_not_serializable };

struct program_error {
  program_error_kind kind = program_error_kind::exception;
  std::string type;  ///< the exception's qualified name
  std::string message;
  std::string traceback;
  std::int64_t line = 0;   ///< the program's own line, 0 when unknown
  std::string limit_hint;  ///< a limit_name spelling the child recognised, or empty
};

/// A program's call of one of its bindings (call_tool or an alias). `arguments` is a JSON object.
struct call_frame {
  static constexpr std::string_view type = "call";
  static constexpr std::array<std::string_view, 3> required_members{"id", "tool", "arguments"};
  std::int64_t id = 0;  ///< the program's, unique within the execution
  std::string tool;
  json_text arguments;
};

/// The program gave up on one of its calls (an asyncio cancellation, wait_for's timeout). The
/// host asks the tool to stop; the call's `result` still comes, and the program ignores it.
struct cancel_call_frame {
  static constexpr std::string_view type = "cancel_call";
  static constexpr std::array<std::string_view, 1> required_members{"id"};
  std::int64_t id = 0;
};

/// What a prepared child observes of its limits after lowering them: the part of its hello report
/// that narrowing changes, graded again before the program is sent.
struct lowered_frame {
  static constexpr std::string_view type = "lowered";
  static constexpr std::array<std::string_view, 1> required_members{"rlimits"};
  child_rlimits rlimits;
  std::int64_t cgroup_memory_limit = -1;
  std::int64_t cgroup_pids_limit = -1;
};

struct done_frame {
  static constexpr std::string_view type = "done";
  static constexpr std::array<std::string_view, 1> required_members{"ok"};
  bool ok = false;
  std::optional<json_text> value;
  std::optional<program_error> error;
};

// ---- channel: host -> child -------------------------------------------------

/// One tool the program may call, as `run` offers it: TOOLS, the aliases and call_tool's names.
struct binding_info {
  std::string name;
  std::string description;
  bool deferred = false;  ///< out of the model's prompt; get_tool_info has its schema
};

/// A built-in the program may not call, with its own reason (builtins.hpp).
struct excluded_builtin {
  std::string name;
  std::string reason;
};

struct run_frame {
  static constexpr std::string_view type = "run";
  std::string program;
  std::string filename = "<program>";
  std::vector<binding_info> bindings;
  std::vector<excluded_builtin> excluded;
};

/// Why a call produced no result, as the program's ToolError carries it.
struct call_error {
  tool_error_kind kind = tool_error_kind::tool_failed;
  std::string tool;
  std::string message;
};

/// A result too large to hand over whole, preserved on the host: the program reads it in
/// windows (ToolResultHandle.read, read_tool_output), each within the per-call ceiling.
struct result_handle {
  std::string handle;
  std::uint64_t size_bytes = 0;
  std::uint64_t lines = 0;  ///< of the preserved text, which is the result pretty-printed
};

/// The host's answer to one call, exactly once per id: a value, a handle, or an error.
struct result_frame {
  static constexpr std::string_view type = "result";
  static constexpr std::array<std::string_view, 2> required_members{"id", "ok"};
  std::int64_t id = 0;
  bool ok = false;
  std::optional<json_text> value;
  std::optional<call_error> error;
  std::optional<result_handle> handle;
};

/// A prepared child is claimed: lower its rlimits to these (soft; RLIMIT_CPU's hard one second
/// above, as the launcher sets it), then observe and report them in `lowered`. Before `run`.
struct lower_limits_frame {
  static constexpr std::string_view type = "lower_limits";
  static constexpr std::array<std::string_view, 1> required_members{"rlimits"};
  applied_rlimits rlimits;
};

struct abort_frame {
  static constexpr std::string_view type = "abort";
  std::string reason;
};

}  // namespace psych::protocol

namespace psych {
PSYCH_ENUM_NAMES(protocol::program_error_kind, "exception", "syntax_error", "value_not_serializable");
}

BOOST_HANA_ADAPT_STRUCT(psych::protocol::probe_ports, ipv4_port, ipv6_port);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::identity, uid, gid, exclusive);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::launch_frame, version, token, isolation, limits, network,
                        environment, interpreter, workspace, tmp_dir, canary, probe, run_as,
                        allow_same_uid, open_files, prepared, egress_proxy_port);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::narrow_frame, limits);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::narrowed_frame, rlimits);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::lower_limits_frame, rlimits);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::lowered_frame, rlimits, cgroup_memory_limit, cgroup_pids_limit);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::cancel_frame, reason);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::started_frame, pid, mechanisms);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::launch_error_frame, stage, syscall, error_number, message);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::exit_frame, exit_code, signal, user_seconds, system_seconds,
                        max_rss_bytes, wall_seconds, limit_hit, cancelled, killed, survivors);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::hello_frame, token, report);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::program_error, kind, type, message, traceback, line,
                        limit_hint);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::done_frame, ok, value, error);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::call_frame, id, tool, arguments);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::cancel_call_frame, id);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::binding_info, name, description, deferred);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::excluded_builtin, name, reason);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::run_frame, program, filename, bindings, excluded);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::call_error, kind, tool, message);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::result_handle, handle, size_bytes, lines);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::result_frame, id, ok, value, error, handle);
BOOST_HANA_ADAPT_STRUCT(psych::protocol::abort_frame, reason);
