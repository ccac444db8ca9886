#include "mcp_http_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "host_leftovers.hpp"
#include "service_kit.hpp"
#include "skip.hpp"

namespace mcp_http_test {
namespace {

/// The root the executions make their directories in (0711: reachable by child_uid), removed at exit.
const std::string& children_root() {
  static psych::testing::temp_dir root("psych-mcp-http-children", 0711);
  static const std::string path = root.path().string();
  return path;
}

std::string json_string(std::string_view text) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
  return buffer.GetString();
}

}  // namespace

server_under_test::~server_under_test() {
  if (server) server->shutdown();
  server.reset();
  backend.reset();
  if (::geteuid() == 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!psych::testing::processes_of(child_uid).empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_MESSAGE(psych::testing::processes_of(child_uid).empty(), "an execution's process outlived the server");
  }
}

std::unique_ptr<server_under_test> server_or_skip(const tuning& tune, bool tls, std::source_location where) {
  auto s = std::make_unique<server_under_test>();
  s->dir = std::make_unique<psych::testing::temp_dir>("psych-mcp-http");
  s->token = remote_test::fresh_token();
  s->token_file = s->dir->file("tokens");
  remote_test::write_file(s->token_file, "tests " + s->token + "\n");
  s->tls = tls;

  psych::local_sandbox_options local;
  local.isolation = psych::isolation_level::process;
  local.backend = "linux-process";
  local.temp_root = children_root();
  if (::geteuid() == 0) local.run_as_uid = local.run_as_gid = child_uid;
  else local.allow_same_uid = true;
  auto backend = psych::local_sandbox(local);
  if (!backend) {
    psych::testing::skip_case("the local linux-process backend cannot be made here: " + backend.error().message(),
                              where);
    return nullptr;
  }
  s->backend = std::move(backend).value();
  auto blobs = psych::open_directory_blob_store(s->dir->file("blobs"));
  REQUIRE_MESSAGE(blobs, (blobs ? "" : blobs.error().message()));
  s->blobs = std::move(blobs).value();

  s->sessions.backend = s->backend.get();
  s->sessions.ask.isolation = psych::isolation_level::process;
  s->sessions.ask.limits.wall_seconds = 60;
  s->sessions.blobs = s->blobs.get();
  s->sessions.server_version = "tests";
  psych::mcp_http_options options;
  options.token_file = s->token_file;
  options.request_timeout_seconds = 5;
  options.idle_timeout_seconds = 5;
  options.write_timeout_seconds = 5;
  if (tls) {
    std::string why;
    const auto* certificate = remote_test::test_certificate(&why);
    if (!certificate) {
      psych::testing::skip_case(why, where);
      return nullptr;
    }
    options.tls_cert_file = certificate->cert;
    options.tls_key_file = certificate->key;
  }
  if (tune) tune(options, s->sessions);
  auto started = psych::mcp_http_server::start(s->sessions, std::move(options));
  REQUIRE_MESSAGE(started, (started ? "" : started.error().message()));
  s->server = std::move(started).value();
  return s;
}

std::unique_ptr<raw_connection> connect(const endpoint& to) {
  std::string why;
  auto made = raw_connection::open(to.port, to.tls, &why);
  REQUIRE_MESSAGE(made, why);
  return made;
}

void send(const endpoint& to, raw_connection& c, const http_call& call) {
  header_list headers{{"Content-Type", "application/json"}, {"Accept", call.accept}};
  const auto token = call.token.value_or(to.token);
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  if (!call.session.empty()) {
    headers.emplace_back("Mcp-Session-Id", call.session);
    headers.emplace_back("MCP-Protocol-Version", "2025-11-25");
  }
  for (const auto& extra : call.extra) headers.push_back(extra);
  REQUIRE(c.send_request(call.method, call.target, headers, call.body));
}

raw_response response_on(raw_connection& c, double timeout) {
  std::string why;
  auto response = c.read_response(timeout, &why);
  REQUIRE_MESSAGE(response, why);
  return std::move(response).value();
}

raw_response exchange(const endpoint& to, const http_call& call, double timeout) {
  auto c = connect(to);
  send(to, *c, call);
  return response_on(*c, timeout);
}

std::string refusal_of(const raw_response& response) {
  if (response.body.find("\"error\"") == std::string::npos) return {};
  const auto message = string_at(parsed(response.body), "/error/message");
  return message.substr(0, message.find(':'));
}

started_stream start_stream(const endpoint& to, const http_call& call, bool first_event) {
  started_stream out{.connection = connect(to)};
  send(to, *out.connection, call);
  std::string why;
  const auto head = out.connection->read_response_header(60, &why);
  REQUIRE_MESSAGE(head, why);
  REQUIRE_MESSAGE(head->status == 200, head->status);
  CHECK(head->content_type == "text/event-stream");
  out.events = std::make_unique<sse_reader>(*out.connection);
  if (first_event) {
    auto first = out.events->next(60);
    REQUIRE_MESSAGE(first, "no event came");
    out.first = std::move(*first);
  }
  return out;
}

std::string request_text(std::int64_t id, std::string_view method, std::string_view params) {
  return fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})", id, method, params);
}

std::string run_code_text(std::int64_t id, std::string_view program, std::optional<std::string> progress_token) {
  const auto meta = progress_token ? fmt::format(R"(,"_meta":{{"progressToken":{}}})", json_string(*progress_token))
                                   : std::string{};
  return request_text(id, "tools/call",
                      fmt::format(R"({{"name":"run_code","arguments":{{"program":{}}}{}}})", json_string(program), meta));
}

std::string open_session(const endpoint& to) {
  const auto answered = exchange(
      to, {.body = request_text(1, "initialize",
                               R"({"protocolVersion":"2025-11-25","capabilities":{},)"
                               R"("clientInfo":{"name":"mcp-http-tests","version":"1"}})")});
  REQUIRE_MESSAGE(answered.status == 200, answered.body);
  const auto id = answered.header("Mcp-Session-Id");
  REQUIRE_MESSAGE(!id.empty(), "initialize's answer carries no Mcp-Session-Id");
  const auto initialized =
      exchange(to, {.body = R"({"jsonrpc":"2.0","method":"notifications/initialized"})", .session = id});
  REQUIRE_MESSAGE(initialized.status == 202, initialized.body);
  return id;
}

std::optional<std::string> sse_reader::next(double timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(timeout * 1000));
  for (;;) {
    if (const auto end = pending_.find("\n\n"); end != std::string::npos) {
      const std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      std::string data;
      std::size_t at = 0;
      while (at < event.size()) {
        auto line_end = event.find('\n', at);
        if (line_end == std::string::npos) line_end = event.size();
        const auto line = std::string_view(event).substr(at, line_end - at);
        if (line.starts_with("data: ")) {
          if (!data.empty()) data.push_back('\n');
          data.append(line.substr(6));
        }
        at = line_end + 1;
      }
      return data;
    }
    if (ended_) return std::nullopt;
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return std::nullopt;
    bool ended = false;
    const auto some = c_.read_body_some(left, &ended);
    if (!some) return std::nullopt;
    pending_ += *some;
    ended_ = ended;
  }
}

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document document;
  document.Parse(text.c_str(), text.size());
  REQUIRE_MESSAGE(!document.HasParseError(), text);
  return document;
}

std::string value_of(const std::string& answer) {
  const auto document = parsed(answer);
  const auto* value = rapidjson::Pointer("/result/structuredContent/value").Get(document);
  REQUIRE_MESSAGE(value, answer);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value->Accept(writer);
  return buffer.GetString();
}

std::string string_at(const rapidjson::Document& document, const char* pointer) {
  const auto* value = rapidjson::Pointer(pointer).Get(document);
  return value && value->IsString() ? std::string(value->GetString(), value->GetStringLength()) : std::string{};
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmRSS:")) return std::atol(line.c_str() + 6);
  return 0;
}

memory_peak::memory_peak() : before_(rss_kib()), peak_(before_), sampler_([this] {
  while (sampling_) {
    peak_ = std::max(peak_.load(), rss_kib());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}) {}

memory_peak::~memory_peak() { stop(); }

long memory_peak::stop() {
  sampling_ = false;
  if (sampler_.joinable()) sampler_.join();
  peak_ = std::max(peak_.load(), rss_kib());
  return peak_;
}

bool eventually(const std::function<bool()>& done, std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return done();
}

}  // namespace mcp_http_test
