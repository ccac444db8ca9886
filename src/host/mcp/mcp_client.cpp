// The MCP client (include/psych/host/mcp.hpp): what is MCP's own, the handshake, the paged tool
// list, tool calls and their results, over any transport (mcp_transport.hpp); and the stdio
// transport, where the server is a child process (child_process) and the session a JSON-RPC peer
// (json_rpc_peer) on its stdin and stdout, its stderr kept as a bounded tail. The Streamable HTTP
// transport is in mcp_http_client.cpp (psych::remote).
#include "psych/host/mcp.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "os/child_process.hpp"
#include "os/host_environment.hpp"
#include "mcp/json_rpc_peer.hpp"
#include "mcp/mcp_transport.hpp"
#include "os/os_handle.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"

namespace psych::mcp_wire {

// ---- MCP's own messages, as the codec's Hana structs (members named as on the wire) ----

struct client_info {
  std::string name;
  std::string version;
};

struct initialize_params {
  std::string protocolVersion;
  std::map<std::string, json_text> capabilities;
  client_info clientInfo;
};

struct initialize_result {
  std::string protocolVersion;
  static constexpr std::array<std::string_view, 1> required_members{"protocolVersion"};
};

struct list_params {
  std::string cursor;
};

/// The hints MCP lets a server give about a tool; psych reads the two that decide whether a
/// program may call it (docs/bindings.md, "Destructive MCP tools").
struct tool_annotations {
  std::optional<bool> readOnlyHint;
  std::optional<bool> destructiveHint;
};

struct wire_tool {
  std::string name;
  std::optional<std::string> description;
  std::optional<json_text> inputSchema;
  std::optional<tool_annotations> annotations;
  static constexpr std::array<std::string_view, 1> required_members{"name"};
};

struct list_result {
  std::vector<wire_tool> tools;
  std::optional<std::string> nextCursor;
  static constexpr std::array<std::string_view, 1> required_members{"tools"};
};

struct call_params {
  std::string name;
  json_text arguments;
};

struct content_item {
  std::string type;
  std::optional<std::string> text;
};

struct call_result_view {
  std::optional<bool> isError;
  std::vector<content_item> content;
};

}  // namespace psych::mcp_wire

BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::client_info, name, version);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::initialize_params, protocolVersion, capabilities, clientInfo);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::initialize_result, protocolVersion);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::list_params, cursor);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::tool_annotations, readOnlyHint, destructiveHint);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::wire_tool, name, description, inputSchema, annotations);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::list_result, tools, nextCursor);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::call_params, name, arguments);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::content_item, type, text);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_wire::call_result_view, isError, content);

namespace psych {
namespace {

using namespace std::chrono_literals;

/// The protocol versions a client may ask for: those whose rules it keeps.
constexpr std::array<std::string_view, 2> versions_spoken{"2025-06-18", "2025-11-25"};
constexpr std::size_t max_pages = 100;
constexpr std::size_t max_tools = 10'000;
constexpr std::size_t max_line_bytes = std::size_t{16} << 20;
/// Answers to the server's requests and our notifications waiting to be written: about 100,000
/// ping answers. A server past it is not reading its input.
constexpr std::size_t max_queued_bytes = std::size_t{4} << 20;
constexpr std::size_t stderr_tail_bytes = 4096;
constexpr auto exit_grace = 1000ms;  // after stdin closes, then again after SIGTERM

/// Messages may nest deeper than the launcher contract's frames (tool schemas, tool results).
constexpr protocol::json_bounds message_bounds{.max_bytes = max_line_bytes, .max_depth = 256};

/// The variables a server inherits from the host, as the MCP SDKs' default environment (on
/// Windows, theirs for Windows: what a program needs to find its files and the system's).
#ifdef _WIN32
constexpr std::array<const char*, 12> inherited_variables{
    "APPDATA",  "HOMEDRIVE",  "HOMEPATH", "LOCALAPPDATA", "PATH",        "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE", "SYSTEMROOT", "TEMP",     "USERNAME",     "USERPROFILE", "PROGRAMFILES"};
#else
constexpr std::array<const char*, 7> inherited_variables{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG"};
#endif

auto fail(mcp_error_kind kind, std::string detail, std::int64_t code = 0) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail), code});
}

/// A pipe for the server (os_handle.hpp: `first` read, `second` written), or spawn_failed.
mcp_result<host::os_handle_pair> server_pipe(result<host::os_handle_pair> made) {
  if (!made) return fail(mcp_error_kind::spawn_failed, made.error().message());
  return std::move(made).value();
}

/// The few inherited variables, then the configuration's: nothing else of the host's.
std::vector<std::string> server_environment(const mcp_server_config& config) {
  std::map<std::string, std::string> variables;
  for (const char* name : inherited_variables)
    if (auto value = host::environment_value(name)) variables[name] = std::move(*value);
  for (const auto& [name, value] : config.environment) variables[name] = value;
  std::vector<std::string> environment;
  for (const auto& [name, value] : variables) environment.push_back(name + "=" + value);
  return environment;
}

/// What every transport's configuration must be; checked before anything is started or sent.
mcp_result<void> check_session_config(const mcp_server_config& config) {
  if (config.timeout <= std::chrono::milliseconds::zero())
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has a timeout that is not positive",
                                                            config.name));
  if (config.start_timeout && *config.start_timeout <= std::chrono::milliseconds::zero())
    return fail(mcp_error_kind::invalid_config,
                fmt::format("the server {} has a start_timeout that is not positive", config.name));
  if (std::find(versions_spoken.begin(), versions_spoken.end(), config.protocol_version) == versions_spoken.end())
    return fail(mcp_error_kind::invalid_config,
                fmt::format("the server {} is to be asked for protocol version \"{}\"; psych speaks {}", config.name,
                            protocol::detail::excerpt(config.protocol_version, 40), fmt::join(versions_spoken, " and ")));
  return boost::outcome_v2::success();
}

/// The stdio transport: the server is a child process, the session a JSON-RPC peer on its stdin and
/// stdout, its stderr kept as a bounded tail for the message that says it went.
class stdio_transport final : public host::mcp_transport {
 public:
  static mcp_result<std::unique_ptr<stdio_transport>> spawn(const mcp_server_config& config) {
    std::unique_ptr<stdio_transport> t{new stdio_transport{config.name}};
    host::os_handle to_server = host::no_os_handle, from_server = host::no_os_handle,
                    server_stderr = host::no_os_handle;
    {
      // On Windows the host's ends are overlapped: the server's stdin written, its outputs read.
      BOOST_OUTCOME_TRY(auto in, server_pipe(host::input_pipe()));
      BOOST_OUTCOME_TRY(auto out, server_pipe(host::output_pipe()));
      BOOST_OUTCOME_TRY(auto err, server_pipe(host::output_pipe()));
      auto spawned = host::child_process::spawn({.argv = config.command,
                                                 .search_path = true,
                                                 .environment = server_environment(config),
                                                 .descriptors = {in.first.get(), out.second.get(), err.second.get()}});
      if (!spawned)
        return fail(mcp_error_kind::spawn_failed,
                    fmt::format("the server {}: {}", config.name, spawned.error().message()));
      t->child_.emplace(std::move(spawned).value());
      to_server = in.second.release();
      from_server = out.first.release();
      server_stderr = err.first.release();
    }  // the child's ends close here: its exit is end of file on ours

    stdio_transport* raw = t.get();
    t->peer_ = std::make_unique<host::json_rpc_peer>(
        host::json_rpc_peer::options{.server_name = config.name,
                                     .max_line_bytes = max_line_bytes,
                                     .max_queued_bytes = max_queued_bytes,
                                     .write_limit = config.timeout},
        host::json_rpc_peer::handlers{
            .request = [](std::string_view method) { return answer_server_request(method); },
            .notification = [raw](std::string_view method) { raw->server_notified(method); },
            .side_bytes = [raw](std::string_view bytes) { raw->keep_stderr(bytes); },
            .epitaph = [raw] { return raw->epitaph(); }},
        from_server, to_server, server_stderr, t->child_->pidfd());
    return t;
  }

  /// The server's stdin closed, then 1 s for it to exit, SIGTERM to its group, 1 s, SIGKILL; the
  /// session's threads are stopped before the server is reaped (the reader watches its pidfd).
  ~stdio_transport() override {
    if (peer_) peer_->close_output();
    if (child_ && child_->pid() > 0) {
      if (!child_->wait_exit(exit_grace)) {
        child_->signal_group(host::ending::ask);
        if (!child_->wait_exit(exit_grace)) child_->signal_group(host::ending::kill);
      }
      // Whatever the leader left in its group goes too: unreaped, the group's id is still its.
      child_->signal_group(host::ending::kill);
    }
    if (peer_) {
      peer_->break_with(mcp_error_kind::unusable, fmt::format("the client of {} was closed", name_));
      peer_.reset();
    }
    if (child_) (void)child_->reap();
  }

  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop, bool cancellable) override {
    return peer_->request(method, std::move(params_json), timeout, std::move(stop), cancellable);
  }
  void notify(std::string_view method, std::string params_json) override {
    peer_->notify(method, std::move(params_json));
  }
  [[nodiscard]] std::optional<mcp_error> broken() const override { return peer_->broken(); }
  [[nodiscard]] pid_t pid() const noexcept override { return child_ ? child_->pid() : -1; }

 private:
  explicit stdio_transport(std::string name) : name_(std::move(name)) {}

  void keep_stderr(std::string_view bytes) {
    std::lock_guard lock{stderr_mutex_};
    stderr_tail_.append(bytes);
    if (stderr_tail_.size() > stderr_tail_bytes) stderr_tail_.erase(0, stderr_tail_.size() - stderr_tail_bytes);
  }

  /// "exited with status 2; its stderr ends: no config file".
  std::string epitaph() {
    std::string text = child_->status_text(200ms);
    std::lock_guard lock{stderr_mutex_};
    std::string_view tail = stderr_tail_;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' ')) tail.remove_suffix(1);
    if (tail.size() > 1000) tail = tail.substr(tail.size() - 1000);
    if (!tail.empty()) text += fmt::format("; its stderr ends: {}", tail);
    return text;
  }

  std::string name_;
  std::optional<host::child_process> child_;
  std::mutex stderr_mutex_;
  std::string stderr_tail_;                    ///< guarded by stderr_mutex_
  std::unique_ptr<host::json_rpc_peer> peer_;  ///< last: it goes first, its threads with it
};

}  // namespace

struct mcp_client::state {
  mcp_server_config config;
  std::unique_ptr<host::mcp_transport> transport;
  std::mutex handshake_mutex;     ///< one handshake at a time
  std::string protocol_version;  ///< written by a handshake

  /// initialize (which may not be cancelled: the MCP lifecycle), then notifications/initialized.
  mcp_result<void> handshake(std::chrono::milliseconds timeout) {
    const std::string params = protocol::encode_json(mcp_wire::initialize_params{
        .protocolVersion = config.protocol_version,
        .capabilities = {},
        .clientInfo = {.name = "psych", .version = "0.1.0"}});
    auto answer = transport->request("initialize", params, timeout, {}, /*cancellable=*/false);
    if (!answer) {
      mcp_error e = std::move(answer).error();
      e.detail = "initialize: " + e.detail;
      return boost::outcome_v2::failure(std::move(e));
    }
    auto initialized = protocol::decode_json<mcp_wire::initialize_result>(answer.value(), message_bounds);
    if (!initialized)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("initialize: the server {} answered {}", config.name, initialized.error().message()));
    protocol_version = std::move(initialized.value().protocolVersion);
    transport->session_began(protocol_version);
    transport->notify("notifications/initialized", "{}");
    if (auto broken = transport->broken()) return boost::outcome_v2::failure(std::move(*broken));
    return boost::outcome_v2::success();
  }

  /// A request in the session: a session the server lost begins again first (over HTTP; the
  /// request that found it lost is never sent again).
  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop) {
    if (transport->session_lost()) {
      std::lock_guard lock{handshake_mutex};
      if (transport->session_lost()) {
        BOOST_OUTCOME_TRY(handshake(timeout));
      }
    }
    return transport->request(method, std::move(params_json), timeout, std::move(stop));
  }
};

// ---- mcp_client -------------------------------------------------------------------------------

mcp_client::mcp_client(std::unique_ptr<state> s) : state_(std::move(s)) {}

mcp_client::~mcp_client() = default;

const std::string& mcp_client::name() const noexcept { return state_->config.name; }
const std::string& mcp_client::protocol_version() const noexcept { return state_->protocol_version; }
pid_t mcp_client::pid() const noexcept { return state_->transport->pid(); }
bool mcp_client::take_tools_changed() noexcept { return state_->transport->take_tools_changed(); }
bool mcp_client::usable() const { return !state_->transport->broken(); }

mcp_result<std::unique_ptr<mcp_client>> mcp_client::start(const mcp_server_config& config) {
  if (!config.url.empty())
    return fail(mcp_error_kind::invalid_config,
                fmt::format("the server {} has a url: an MCP server over HTTP is started with start_mcp_http_client "
                            "(psych::remote)",
                            config.name));
  if (config.command.empty() || config.command.front().empty())
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has no command", config.name));
  BOOST_OUTCOME_TRY(check_session_config(config));
  BOOST_OUTCOME_TRY(auto transport, stdio_transport::spawn(config));
  return over(config, std::move(transport));
}

mcp_result<std::unique_ptr<mcp_client>> mcp_client::over(const mcp_server_config& config,
                                                         std::unique_ptr<host::mcp_transport> transport) {
  BOOST_OUTCOME_TRY(check_session_config(config));
  if (!transport) return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has no transport", config.name));
  auto s = std::make_unique<state>();
  s->config = config;
  s->transport = std::move(transport);
  state* raw = s.get();
  std::unique_ptr<mcp_client> client{new mcp_client{std::move(s)}};  // a failed start stops the server
  if (auto broken = raw->transport->broken()) return boost::outcome_v2::failure(std::move(*broken));
  BOOST_OUTCOME_TRY(raw->handshake(config.start_timeout.value_or(config.timeout)));
  return client;
}

mcp_result<std::vector<mcp_tool>> mcp_client::list_tools() {
  std::vector<mcp_tool> tools;
  std::optional<std::string> cursor;
  for (std::size_t page = 0; page < max_pages; ++page) {
    std::string params = cursor ? protocol::encode_json(mcp_wire::list_params{*cursor}) : std::string{"{}"};
    BOOST_OUTCOME_TRY(auto raw, state_->request("tools/list", std::move(params), state_->config.timeout, {}));
    auto listed = protocol::decode_json<mcp_wire::list_result>(raw, message_bounds);
    if (!listed)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("tools/list: the server {} answered {}", name(), listed.error().message()));
    for (mcp_wire::wire_tool& t : listed.value().tools) {
      if (tools.size() == max_tools)
        return fail(mcp_error_kind::protocol_violation,
                    fmt::format("tools/list: the server {} lists more than {} tools", name(), max_tools));
      // Destructive when the server says so; a read-only tool never is (MCP: destructiveHint means
      // something only when readOnlyHint is false).
      const bool destructive = t.annotations && t.annotations->destructiveHint.value_or(false) &&
                               !t.annotations->readOnlyHint.value_or(false);
      tools.push_back({std::move(t.name), t.description.value_or(""),
                       t.inputSchema ? std::move(t.inputSchema->text) : std::string{"{}"}, destructive});
    }
    cursor = std::move(listed.value().nextCursor);
    if (!cursor || cursor->empty()) return tools;
  }
  return fail(mcp_error_kind::protocol_violation,
              fmt::format("tools/list: the server {} pages past {} pages", name(), max_pages));
}

mcp_result<mcp_call_result> mcp_client::call_tool(std::string_view name, std::string_view arguments_json,
                                                  std::stop_token stop) {
  return call_tool(name, arguments_json, std::move(stop), state_->config.timeout);
}

mcp_result<mcp_call_result> mcp_client::call_tool(std::string_view tool, std::string_view arguments_json,
                                                  std::stop_token stop, std::chrono::milliseconds timeout) {
  auto arguments = protocol::decode_json<json_text>(arguments_json, message_bounds);
  if (!arguments || arguments.value().text.front() != '{')
    return fail(mcp_error_kind::invalid_arguments,
                arguments ? std::string{"the arguments are not a JSON object"} : arguments.error().message());
  std::string params = protocol::encode_json(
      mcp_wire::call_params{.name = std::string(tool), .arguments = std::move(arguments).value()});
  BOOST_OUTCOME_TRY(auto raw, state_->request("tools/call", std::move(params), timeout, std::move(stop)));
  auto view = protocol::decode_json<mcp_wire::call_result_view>(raw, message_bounds);
  if (!view)
    return fail(mcp_error_kind::protocol_violation,
                fmt::format("tools/call {}: the server {} answered {}", tool, name(), view.error().message()));
  if (view.value().isError.value_or(false)) {
    std::string text;
    for (const mcp_wire::content_item& item : view.value().content) {
      if (!item.text) continue;
      if (!text.empty()) text += '\n';
      text += *item.text;
      if (text.size() > stderr_tail_bytes) break;
    }
    if (text.empty()) text = protocol::detail::excerpt(raw, 1000);
    return fail(mcp_error_kind::tool_failed, protocol::detail::excerpt(text, stderr_tail_bytes));
  }
  return mcp_call_result{std::move(raw)};
}

}  // namespace psych
