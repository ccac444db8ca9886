// One MCP session of psych mcp (mcp_server.hpp): the JSON-RPC methods, and run_code's executions on
// threads of their own, at most max_concurrent_per_session at once.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "mcp/json_rpc_wire.hpp"
#include "mcp_server/mcp_server_wire.hpp"
#include "mcp_server/offered_tools.hpp"
#include "psych/agent.hpp"
#include "psych/host/mcp_server.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/host/run_code.hpp"
#include "psych/host/runtime.hpp"
#include "psych/protocol/json.hpp"
#include "psych/utf8.hpp"

namespace psych {

namespace wire = mcp_server_wire;

namespace {

// JSON-RPC's codes, and MCP's use of them.
constexpr std::int64_t parse_error = -32700;
constexpr std::int64_t invalid_request = -32600;
constexpr std::int64_t method_not_found = -32601;
constexpr std::int64_t invalid_params = -32602;

/// Request ids whose answers went out, remembered so that a cancel crossing an answer is not taken
/// for a cancel of a request the client never made.
constexpr std::size_t remembered_answers = 1024;

std::string answer(const json_text& id, std::string result_json) {
  return protocol::encode_json(json_rpc_wire::reply_result_out{.id = id, .result = {std::move(result_json)}});
}

std::string error_answer(std::optional<json_text> id, std::int64_t code, std::string message) {
  return protocol::encode_json(json_rpc_wire::reply_error_out{.id = id.value_or(json_text{"null"}),
                                                              .error = {.code = code, .message = std::move(message)}});
}

/// An id MCP allows: a string or an integer (JSON-RPC's null is not one).
bool usable_id(const json_text& id) {
  if (id.text.empty()) return false;
  const char first = id.text.front();
  return first == '"' || first == '-' || (first >= '0' && first <= '9');
}

/// Whether the message's top level has an "id" member that is null.
bool has_null_id(std::string_view message) {
  rapidjson::Document document;
  document.Parse(message.data(), message.size());
  if (document.HasParseError() || !document.IsObject()) return false;
  const auto id = document.FindMember("id");
  return id != document.MemberEnd() && id->value.IsNull();
}

/// A tool result the model reads: the compact payload as text, and the same object structured.
std::string tool_result(std::string payload_json, bool is_error) {
  wire::call_result out{.content = {{.text = payload_json}}, .structuredContent = {payload_json}, .isError = is_error};
  return protocol::encode_json(out);
}

/// The payload of a call that ran nothing because its input was wrong: a failure the model can act on.
std::string input_failure(std::string_view kind, std::string message) {
  return fmt::format(R"({{"failure":{{"kind":{},"message":{}}}}})", protocol::encode_json(std::string(kind)),
                     protocol::encode_json(message));
}

/// A positive, finite limit, or the complaint about it.
std::optional<std::string> bad_limits(const code_execution_limits& limits) {
  std::optional<std::string> complaint;
  const auto check = [&](std::string_view name, std::optional<double> value) {
    if (!complaint && value && !(std::isfinite(*value) && *value > 0))
      complaint = fmt::format("limits.{} must be positive and finite, got {}", name, *value);
  };
  check("wall_seconds", limits.wall_seconds.value);
  check("cpu_seconds", limits.cpu_seconds.value);
  const auto count = [&](std::string_view name, std::optional<std::uint64_t> value) {
    if (!complaint && value && *value == 0) complaint = fmt::format("limits.{} must be positive, got 0", name);
  };
  count("memory_bytes", limits.memory_bytes.value);
  count("file_size_bytes", limits.file_size_bytes.value);
  count("process_count", limits.process_count.value);
  return complaint;
}

/// A run_code call's live output as notifications/progress on its request's progress token. Each
/// message is whole UTF-8: a character cut between two chunks waits for its rest.
class progress_relay final : public output_sink {
 public:
  progress_relay(mcp_send send, json_text token) : send_(std::move(send)), token_(std::move(token)) {}

  void on_output(const output_chunk& chunk) override {
    const auto stream = static_cast<std::size_t>(chunk.stream);
    auto& held = held_[stream];
    if (chunk.skipped != 0) held.clear();  // its rest was skipped: it can never be completed
    std::string text = std::move(held);
    text.append(chunk.data);
    const std::size_t tail = utf8::incomplete_tail(text);
    held.assign(text, text.size() - tail);
    text.resize(text.size() - tail);
    passed_[stream] = chunk.offset + chunk.data.size();
    const std::uint64_t progress = passed_[0] + passed_[1];
    if (progress <= last_progress_ || (text.empty() && chunk.skipped == 0)) return;
    last_progress_ = progress;
    wire::progress_params params{.progressToken = token_,
                                 .progress = progress,
                                 .message = std::move(text),
                                 ._meta = {.stream = std::string(name_of(chunk.stream)),
                                           .offset = chunk.offset,
                                           .skipped = chunk.skipped}};
    send_({.json = protocol::encode_json(json_rpc_wire::notification_out{
               .method = "notifications/progress", .params = {protocol::encode_json(params)}}),
           .droppable = true});
  }

 private:
  mcp_send send_;
  json_text token_;
  std::array<std::string, 2> held_;
  std::array<std::uint64_t, 2> passed_{};
  std::uint64_t last_progress_ = 0;
};

/// The catalogue and invoker of a server given no upstream tools.
class no_tools final : public tool_catalogue, public tool_invoker {
 public:
  std::vector<binding> offered_now() override { return {}; }
  call_permission permit(const tool_call&) override { return call_permission::allow(); }
  void invoke(const tool_call& call, std::stop_token, std::function<void(tool_outcome)> done) override {
    done(tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no tool named {:?}", call.tool)));
  }
};

}  // namespace

struct mcp_server_session::state {
  struct execution {
    std::string request_id;
    std::stop_source stop;
    bool silenced = false;  ///< cancelled: its answer is not sent
    bool done = false;
    std::thread thread;
  };

  mcp_server_options options;
  std::string id;
  std::unique_ptr<run_log> log;
  std::optional<code_run> run;

  mutable std::mutex mutex;
  bool initialized = false;
  std::string version;
  std::list<execution> executions;
  std::set<std::string> handles;          ///< made by this session's executions
  std::deque<std::string> answered_ids;   ///< the last remembered_answers, oldest first
  std::set<std::string> answered_lookup;

  /// Joins the threads of executions that ended. Called with the lock held.
  void reap() {
    for (auto it = executions.begin(); it != executions.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      if (it->thread.joinable()) it->thread.join();
      it = executions.erase(it);
    }
  }

  std::size_t running_now() const {
    return static_cast<std::size_t>(std::count_if(executions.begin(), executions.end(),
                                                  [](const execution& e) { return !e.done; }));
  }

  void remember_answer(const std::string& request_id) {
    if (answered_lookup.insert(request_id).second) answered_ids.push_back(request_id);
    if (answered_ids.size() > remembered_answers) {
      answered_lookup.erase(answered_ids.front());
      answered_ids.pop_front();
    }
  }

  std::string initialize_result(std::string_view asked) {
    const auto* known = std::find(std::begin(mcp_server_versions), std::end(mcp_server_versions), asked);
    version = known != std::end(mcp_server_versions) ? std::string(asked) : std::string(mcp_server_versions[0]);
    initialized = true;
    return fmt::format(
        R"({{"protocolVersion":{},"capabilities":{{"tools":{{"listChanged":false}},"logging":{{}}}},)"
        R"("serverInfo":{{"name":"psych","title":"psych sandbox","version":{}}},"instructions":{}}})",
        protocol::encode_json(version), protocol::encode_json(options.server_version),
        protocol::encode_json(std::string(
            "run_code runs one Python program in a sandbox; the program can call the tools listed in run_code's "
            "description in a loop and returns only what it computes. Prefer one program over many tool calls.")));
  }

  /// The terms of one execution: the deployment's ask, narrowed by the call's own limits.
  std::variant<execution_terms, refusal> terms_for(const code_execution_limits& narrower) const {
    const auto offer = options.backend->offer();
    // The ask is the deployment's, so its hosts are the profile's too.
    auto decided = intersect_terms(offer, {.limits = offer.limit_ceiling, .allow_network = false, .budget = options.budget},
                                   options.ask, {.allowed_hosts = options.ask.allowed_hosts});
    if (auto* terms = std::get_if<execution_terms>(&decided)) narrow(terms->limits, narrower);
    return decided;
  }

  std::string tools_list() const {
    auto offered = options.catalogue ? options.catalogue->offered_now() : std::vector<binding>{};
    std::sort(offered.begin(), offered.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
    const auto terms = terms_for({});
    execution_terms shown;
    if (const auto* decided = std::get_if<execution_terms>(&terms)) shown = *decided;
    else shown.limits = options.backend->offer().limit_ceiling;
    return host::tools_list_json(host::run_code_description(offered, shown, options.budget, options.blobs != nullptr),
                                 options.blobs != nullptr);
  }

  std::string read_output(std::string_view arguments_json) {
    auto asked = protocol::decode_json_strict<wire::read_output_arguments>(arguments_json);
    if (!asked) return tool_result(input_failure("invalid_arguments", asked.error().message()), true);
    {
      std::lock_guard lock(mutex);
      if (!handles.contains(asked.value().handle))
        return tool_result(input_failure("denied", "read_tool_output reads only handles that run_code results of this "
                                                   "session returned"),
                           true);
    }
    const output_request window{.offset = asked.value().offset.value_or(0),
                                .limit = asked.value().limit.value_or(100),
                                .pattern = asked.value().pattern};
    auto read = psych::read_tool_output(*options.blobs, options.tenant, asked.value().handle, window);
    if (!read) return tool_result(input_failure(name_of(read.error().kind), read.error().message()), true);
    return tool_result(protocol::encode_json(read.value()), false);
  }

  /// The body of one run_code execution, on its own thread.
  void execute(execution& self, json_text request_id, wire::run_code_arguments arguments,
               std::optional<json_text> progress_token, mcp_send send) {
    const code_execution asked{.isolation = options.ask.isolation,
                               .limits = arguments.limits.value_or(code_execution_limits{}),
                               .network = options.ask.network};
    auto decided = terms_for(asked.limits);
    std::string payload;
    bool is_error = true;
    if (const auto* refused = std::get_if<refusal>(&decided)) {
      payload = run_code_payload(*refused, asked);
    } else {
      std::optional<progress_relay> progress;
      if (progress_token) progress.emplace(send, *progress_token);
      const auto result = run->run({.program = std::move(arguments.program),
                                    .terms = std::get<execution_terms>(decided),
                                    .filename = "<run_code>",
                                    .live_output = progress ? &*progress : nullptr},
                                   self.stop.get_token());
      {
        std::lock_guard lock(mutex);
        for (const auto& attachment : result.attachments)
          if (!attachment.handle.empty()) handles.insert(attachment.handle);
      }
      payload = run_code_payload(result, asked);
      is_error = result.failure.has_value();
    }
    auto text = answer(request_id, tool_result(std::move(payload), is_error));
    std::unique_lock lock(mutex);
    const bool silenced = self.silenced;
    remember_answer(request_id.text);
    lock.unlock();
    if (!silenced) send({.json = std::move(text)});
    lock.lock();
    self.done = true;
  }

  mcp_receipt call_tool(const json_text& request_id, std::string_view params_json, const mcp_send& send) {
    auto params = protocol::decode_json<wire::call_params>(params_json);
    if (!params) {
      send({.json = error_answer(request_id, invalid_params, "tools/call: " + params.error().message())});
      return {.what = mcp_receipt::kind::answering};
    }
    const std::string arguments = params.value().arguments ? params.value().arguments->text : "{}";
    if (params.value().name == host::read_tool_output_tool && options.blobs) {
      send({.json = answer(request_id, read_output(arguments))});
      return {.what = mcp_receipt::kind::answering};
    }
    if (params.value().name != run_code_tool) {
      send({.json = error_answer(request_id, invalid_params,
                                 fmt::format("unknown tool {:?}: this server offers run_code{}", params.value().name,
                                             options.blobs ? " and read_tool_output" : ""))});
      return {.what = mcp_receipt::kind::answering};
    }
    auto decoded = protocol::decode_json_strict<wire::run_code_arguments>(arguments);
    if (!decoded) {
      send({.json = answer(request_id, tool_result(input_failure("invalid_arguments", decoded.error().message()), true))});
      return {.what = mcp_receipt::kind::answering};
    }
    if (decoded.value().limits) {
      if (auto complaint = bad_limits(*decoded.value().limits)) {
        send({.json = answer(request_id, tool_result(input_failure("invalid_limit", *complaint), true))});
        return {.what = mcp_receipt::kind::answering};
      }
    }
    std::optional<json_text> token;
    if (params.value()._meta) token = params.value()._meta->progressToken;

    std::lock_guard lock(mutex);
    reap();
    for (const auto& running : executions)
      if (!running.done && running.request_id == request_id.text) {
        send({.json = error_answer(request_id, invalid_request,
                                   fmt::format("request id {} is still running in this session", request_id.text))});
        return {.what = mcp_receipt::kind::answering};
      }
    if (running_now() >= options.max_concurrent_per_session) {
      const auto busy = input_failure(
          "too_many_executions",
          fmt::format("{} run_code calls are running in this session, the most it runs at once; nothing ran: call "
                      "again when one has finished",
                      running_now()));
      send({.json = answer(request_id, tool_result(busy, true))});
      return {.what = mcp_receipt::kind::answering};
    }
    auto& started = executions.emplace_back();
    started.request_id = request_id.text;
    started.thread = std::thread([this, &started, request_id, arguments = std::move(decoded).value(), token, send] {
      execute(started, request_id, arguments, token, send);
    });
    return {.what = mcp_receipt::kind::answering};
  }

  mcp_receipt cancel(std::string_view params_json) {
    auto params = protocol::decode_json<wire::cancelled_params>(params_json);
    if (!params || !params.value().requestId)
      return {.what = mcp_receipt::kind::rejected,
              .error_json = error_answer(std::nullopt, invalid_params, "notifications/cancelled needs a requestId"),
              .problem = "notifications/cancelled needs a requestId",
              .answerable = false};
    const auto& id_text = params.value().requestId->text;
    std::lock_guard lock(mutex);
    for (auto& running : executions)
      if (running.request_id == id_text && !running.done) {
        running.silenced = true;
        running.stop.request_stop();
        return {.what = mcp_receipt::kind::accepted};
      }
    if (answered_lookup.contains(id_text)) return {.what = mcp_receipt::kind::accepted};  // crossed its answer
    auto problem = fmt::format("cancel_unknown_request: no request {} of this session is running or was answered",
                               id_text);
    return {.what = mcp_receipt::kind::rejected,
            .error_json = error_answer(std::nullopt, invalid_params, problem),
            .problem = problem,
            .answerable = false};
  }
};

result<std::unique_ptr<mcp_server_session>> mcp_server_session::open(const mcp_server_options& options,
                                                                     std::string session_id) {
  if (!options.backend) return fail_with(error_kind::invalid_argument, "psych mcp needs a sandbox backend");
  auto s = std::make_unique<state>();
  s->options = options;
  s->id = std::move(session_id);
  if (options.run_log_dir.empty()) {
    s->log = open_memory_run_log();
  } else {
    PSYCH_TRY(s->log, open_file_run_log(options.run_log_dir + "/" + s->id + ".runlog"));
  }
  // A session without upstream tools still runs through a code_run: its meters and its log.
  static no_tools none;
  tool_catalogue* catalogue = options.catalogue ? options.catalogue : &none;
  tool_invoker* invoker = options.invoker ? options.invoker : &none;
  PSYCH_TRY(auto run, code_run::attempt({.backend = options.backend,
                                         .catalogue = catalogue,
                                         .invoker = invoker,
                                         .log = s->log.get(),
                                         .budget = options.budget,
                                         .blobs = options.blobs,
                                         .tenant = options.tenant}));
  s->run.emplace(std::move(run));
  return std::unique_ptr<mcp_server_session>(new mcp_server_session(std::move(s)));
}

mcp_server_session::mcp_server_session(std::unique_ptr<state> s) : state_(std::move(s)) {}

mcp_server_session::~mcp_server_session() { cancel_all(); }

void mcp_server_session::cancel_all() {
  std::list<state::execution> ending;
  {
    std::lock_guard lock(state_->mutex);
    for (auto& running : state_->executions) {
      running.silenced = true;
      running.stop.request_stop();
    }
  }
  // Joined without the lock: an execution takes it on its way out.
  for (auto& running : state_->executions)
    if (running.thread.joinable()) running.thread.join();
  std::lock_guard lock(state_->mutex);
  state_->executions.clear();
}

const std::string& mcp_server_session::id() const noexcept { return state_->id; }

bool mcp_server_session::initialized() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->initialized;
}

std::string mcp_server_session::protocol_version() const {
  std::lock_guard lock(state_->mutex);
  return state_->version;
}

std::size_t mcp_server_session::running() const {
  std::lock_guard lock(state_->mutex);
  return state_->running_now();
}

mcp_receipt mcp_server_session::receive(std::string_view message, mcp_send send) {
  using kind = mcp_receipt::kind;
  const auto rejected = [](std::int64_t code, std::string problem) {
    return mcp_receipt{.what = kind::rejected, .error_json = error_answer(std::nullopt, code, problem), .problem = problem};
  };
  // Any JSON at all first: what is not JSON is a parse error, what is JSON of the wrong shape an
  // invalid request.
  if (auto any = protocol::decode_json<json_text>(message); !any)
    return rejected(parse_error, "parse error: " + any.error().message());
  const auto first = message.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && message[first] == '[')
    return rejected(invalid_request, "invalid request: a batch (JSON array) is not accepted since MCP 2025-06-18");
  auto decoded = protocol::decode_json<wire::incoming>(message);
  if (!decoded) return rejected(invalid_request, "invalid request: " + decoded.error().message());
  auto& in = decoded.value();
  const bool has_id = in.id.has_value();
  if (in.jsonrpc != "2.0") {
    if (has_id && usable_id(*in.id)) {
      send({.json = error_answer(in.id, invalid_request, "invalid request: jsonrpc must be \"2.0\"")});
      return {.what = kind::answering};
    }
    return rejected(invalid_request, "invalid request: jsonrpc must be \"2.0\"");
  }
  if (!in.method) {
    // A response of the client's: psych mcp sends no requests, so there is nothing to match.
    if (has_id) return {.what = kind::accepted};
    return rejected(invalid_request, "invalid request: no method, and no id");
  }
  const std::string params = in.params ? in.params->text : "{}";
  const auto& method = *in.method;
  if (!has_id) {
    // The codec reads "id": null as no id; JSON-RPC's null id is not a notification's absent one.
    if (has_null_id(message)) return rejected(invalid_request, "invalid request: an id is a string or an integer, not null");
    if (method == "notifications/cancelled") return state_->cancel(params);
    return {.what = kind::accepted};  // notifications/initialized, and any other: nothing to answer
  }
  if (!usable_id(*in.id)) return rejected(invalid_request, "invalid request: an id is a string or an integer");
  const json_text& id = *in.id;
  const auto reply = [&](std::string result_json) {
    send({.json = answer(id, std::move(result_json))});
    return mcp_receipt{.what = kind::answering};
  };
  if (method == "initialize") {
    auto asked = protocol::decode_json<wire::initialize_params>(params);
    std::lock_guard lock(state_->mutex);
    return reply(state_->initialize_result(asked && asked.value().protocolVersion ? *asked.value().protocolVersion : ""));
  }
  if (method == "ping") return reply("{}");
  if (!initialized()) {
    send({.json = error_answer(id, invalid_request, fmt::format("{}: the session is not initialized (initialize first)",
                                                                method))});
    return {.what = kind::answering};
  }
  if (method == "tools/list") return reply(state_->tools_list());
  if (method == "tools/call") return state_->call_tool(id, params, send);
  if (method == "logging/setLevel") return reply("{}");
  send({.json = error_answer(id, method_not_found, fmt::format("method not found: {}", method))});
  return {.what = kind::answering};
}

}  // namespace psych
