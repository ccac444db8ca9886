#pragma once
// HTTP endpoints as tools: each declared tool is one method on one URL template, its arguments
// placed in the path, the query and a JSON body as the declaration says, sent through the egress
// seam (one origin, https unless loopback, bounded, one deadline), with a credential from a
// secret resolver in a header. Declared in C++ (http_tool) or in a JSON file (parse_http_tools).
// docs/http-tools.md has the rules; the header stays light (no Beast, no RapidJSON).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "psych/host/bindings.hpp"
#include "psych/host/secret_resolver.hpp"
#include "psych/names.hpp"
#include "psych/result.hpp"

namespace psych {

/// Where the arguments that are neither path nor query arguments go.
enum class http_body_mapping {
  /// Nowhere: such an argument is a malformed_call (a misspelt argument is not silently dropped).
  none,
  /// Together, as one JSON object, the request's body (Content-Type: application/json); "{}" when
  /// there are none. Not for GET or HEAD.
  json,
};
PSYCH_ENUM_NAMES(http_body_mapping, "none", "json");

/// The credential a tool sends: `header: prefix + resolve()`, resolved fresh for every call.
struct http_credential {
  std::string header = "Authorization";
  std::string prefix = "Bearer ";
  secret_resolver resolve;
};

/// One HTTP endpoint as a tool.
struct http_tool {
  /// The binding name the program calls; unique among the source's tools.
  std::string name;
  std::string description;
  /// An upper-case token (GET, POST, PUT, PATCH, DELETE...); CONNECT and TRACE are refused.
  std::string method = "GET";
  /// An absolute http(s) URL. Each `{arg}` in its path is a path argument, replaced by the argument's
  /// value percent-encoded as part of one segment; a placeholder in the origin or the query is refused.
  std::string url_template;
  /// The argument schema shown to programs, one JSON object. When it lists `properties`, every
  /// path and query argument must be one of them.
  std::string input_schema_json = "{}";
  /// Arguments sent as query parameters (after the template's own query, if it has one).
  std::vector<std::string> query;
  http_body_mapping body = http_body_mapping::none;
  std::optional<http_credential> credential;
  /// Whether a call may change something. Unset: every method but GET and HEAD is. A destructive tool
  /// needs a person's approval, so a program is refused it (approval_required_in_program).
  std::optional<bool> destructive;
  /// The whole exchange, connection to last byte.
  std::chrono::milliseconds timeout{30000};
  /// Bytes of the response body the host holds; one byte more ends the call (binding_result_too_large).
  std::size_t max_response_bytes = std::size_t{4} << 20;
  /// PEM file the server's certificate must chain to; default: the system's trust store.
  std::optional<std::string> ca_file;
  /// http:// to a host that is not loopback: only when the network in between is trusted.
  bool allow_insecure_http = false;

  /// `destructive`, or its default from the method.
  [[nodiscard]] bool is_destructive() const { return destructive.value_or(method != "GET" && method != "HEAD"); }
};

/// The tools of a JSON file (the CLI's --http-tools FILE): {"tools":[{...}, ...]}, each tool's members
/// named as in docs/http-tools.md. A member the format does not have is refused by name; a credential
/// is never in the file, only where to get it (a command, or an environment variable). The
/// declarations are not checked here beyond their form: http_tool_source::create checks them.
result<std::vector<http_tool>> parse_http_tools(std::string_view json_text);

/// A secret_resolver that reads the environment variable `variable` at each call; unset or empty is
/// an error that names the variable, never a value.
secret_resolver environment_secret(std::string variable);

/// Declared HTTP tools as one catalogue and invoker (bindings of origin binding_origin::tool). Calls
/// run on a small pool of threads of its own (blocking_invoker); each tool has one egress client.
///
/// Outcomes: the response's value (docs/http-tools.md, "Results"), or http_error for a status that
/// is not 2xx (the message starts "HTTP <status>"), malformed_call (arguments the mapping cannot
/// place), binding_result_too_large (the body passed max_response_bytes), timeout, cancelled,
/// denied (the egress refused: a redirect to another origin), tool_failed (unreachable, a
/// credential that could not be resolved, JSON that is not), unknown_outcome (a request with effects
/// that failed after it may have reached the server). Nothing is ever sent twice.
class http_tool_source final : public tool_catalogue, public tool_invoker {
 public:
  /// invalid_argument naming the tool and the problem: an empty or repeated name, a method that is
  /// not a token, a template that is no http(s) URL or has a placeholder outside its path, http://
  /// off loopback (unless allowed), an argument the schema does not list, a JSON body for GET or
  /// HEAD, a bad credential header, a timeout or bound that is not positive. Nothing is sent.
  static result<std::unique_ptr<http_tool_source>> create(std::vector<http_tool> tools, std::size_t threads = 4);
  ~http_tool_source() override;

  std::vector<binding> offered_now() override;
  /// A destructive tool needs a person's approval, so a program is refused it; every other is allowed.
  call_permission permit(const tool_call& call) override;
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

  /// One call, on the calling thread: what invoke() runs on its pool.
  tool_outcome call(std::string_view tool, std::string_view arguments_json, std::stop_token stop);

 private:
  struct impl;
  explicit http_tool_source(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych
