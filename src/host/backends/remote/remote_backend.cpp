// The remote backend's description of the service, its connections, and its constructor
// (remote_backend.hpp, remote_sandbox.hpp).
#include "backends/remote/remote_backend.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "backends/backend_support.hpp"
#include "backends/remote/remote_execution.hpp"
#include "psych/host/remote_protocol.hpp"

namespace psych {
namespace host {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t description_limit = 1u << 20;

}  // namespace

remote_backend::~remote_backend() {
  if (session_) SSL_SESSION_free(session_);
}

description remote_backend::describe() {
  // One budget for every attempt: a service that holds the connection and never answers costs the
  // caller the budget once, not once per attempt.
  const auto deadline = clock::now() + millis(options_.connect_timeout_seconds);
  std::string last;
  int attempts = 0;
  auto backoff = std::chrono::milliseconds(200);
  while (attempts < std::max(1, options_.describe_attempts)) {
    ++attempts;
    auto fetched = fetch_description(deadline);
    if (fetched) {
      std::lock_guard lock(mutex_);
      cached_ = fetched.value();
      cached_at_ = clock::now();
      return fetched.value();
    }
    last = fetched.error().message();
    if (attempts >= options_.describe_attempts || clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
  description failed = not_ready(fmt::format(
      "the sandbox service at {} could not be described within the connect budget of {} s ({} {}): {}",
      where_.authority, options_.connect_timeout_seconds, attempts, attempts == 1 ? "attempt" : "attempts", last));
  std::lock_guard lock(mutex_);
  cached_ = failed;
  cached_at_ = clock::now();
  return failed;
}

sandbox_result remote_backend::run(const run_request& request, std::stop_token stop) {
  // Network, an allowlist included, is the service's to grant (refusal_by_backend, below).
  const backend_offer service_decides{.network_allowlist = true};
  if (auto refused = refusal_every_backend_makes(request, "remote", true, &service_decides)) return std::move(*refused);
  // Refuse before running: a service that already says it cannot meet the terms is not sent
  // the program.
  const description known = cached_description();
  if (const auto refused = refusal_by_backend(known.offer(), request.terms))
    return refused_result(refusal_failure(refused->reason),
                                fmt::format("the sandbox service: {}; nothing was sent", refused->message));
  execution_terms terms = request.terms;
  narrow(terms.limits, known.limit_ceiling);  // as a local backend: never beyond the ceiling
  auto token = resolve_token(options_.token);
  if (!token) return refused_result(failure_kind::provider_error, token.error().message());
  remote_execution execution(*this, request, terms, std::move(token).value());
  return execution.run(std::move(stop));
}

awaitable<result<std::unique_ptr<http_link>>> remote_backend::connect(clock::duration timeout) {
  SSL_SESSION* resume = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (session_ && SSL_SESSION_is_resumable(session_)) resume = SSL_SESSION_dup(session_);
  }
  auto link = co_await http_link::open(where_, tls_.get(), std::min(timeout, clock::duration(millis(options_.connect_timeout_seconds))), resume);
  if (resume) SSL_SESSION_free(resume);
  co_return link;
}

void remote_backend::keep_session(const http_link& link) {
  SSL_SESSION* kept = link.session();
  if (!kept) return;
  std::lock_guard lock(mutex_);
  if (session_) SSL_SESSION_free(session_);
  session_ = kept;
}

description remote_backend::not_ready(std::string why) {
  description d;
  d.ready = false;
  d.backend = "remote";
  d.problems.push_back(std::move(why));
  return d;
}

description remote_backend::cached_description() const {
  {
    std::lock_guard lock(mutex_);
    // Only a ready description is kept: a service that was busy or unreachable is asked again.
    if (cached_ && cached_->ready && clock::now() - cached_at_ < millis(options_.describe_ttl_seconds))
      return *cached_;
  }
  return const_cast<remote_backend*>(this)->describe();
}

result<description> remote_backend::fetch_description(clock::time_point deadline) {
  auto token = resolve_token(options_.token);
  if (!token) return token.error();
  asio::io_context io;
  return run_here(io, fetch_description_with(token.value(), deadline));
}

// g++ 12 at -O2 reports Asio's awaitable_frame_base::operator delete as mismatched with the
// frame's allocation here (as it does under UBSan elsewhere, CMakeLists.txt): Asio allocates the
// frame with that class's own operator new, so the pair matches.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
awaitable<result<description>> remote_backend::fetch_description_with(std::string token,
                                                                      clock::time_point deadline) {
  auto link = co_await connect(until(deadline));
  if (!link) co_return link.error();
  // Fresh: describe() is the port's probe, not the service's last periodic one.
  auto request = request_to<http::string_body>(http::verb::get, "/v1/describe?fresh=1", token);
  request.set(http::field::accept, "application/json");
  auto response = co_await exchange(*link.value(), request, description_limit, until(deadline));
  if (!response) co_return response.error();
  keep_session(*link.value());
  link.value()->close();
  if (response.value().status != 200)
    co_return fail_with(error_kind::provider_error, status_problem(response.value().status, "describe"));
  if (!response.value().content_type.starts_with("application/json"))
    co_return fail_with(error_kind::provider_error,
                      fmt::format("describe: the service answered with content type {}, not JSON",
                                  peer_excerpt(response.value().content_type, 60)));
  auto decoded = protocol::decode_json<description>(response.value().body, {.max_bytes = description_limit});
  if (!decoded) co_return fail_with(error_kind::provider_error, "describe: " + decoded.error().message());
  description d = std::move(decoded).value();
  d.backend = "remote:" + d.backend;
  d.mechanisms.push_back(fmt::format("remote: executions run on the sandbox service at {} ({})", where_.authority,
                                     where_.tls ? "TLS, peer verified" : "plaintext HTTP"));
  co_return d;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace host

result<std::unique_ptr<sandbox>> remote_sandbox(remote_sandbox_options options) {
  using namespace psych::host;
  auto where = parse_service_url(options.url);
  if (!where) return where.error();
  if (!where.value().tls && !is_loopback_host(where.value().host) && !options.allow_insecure_http)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("a credential is refused over plaintext http:// to {}, which is not loopback; use "
                               "https://, or allow_insecure_http when the network in between is trusted",
                               where.value().authority));
  if (!options.token) return fail_with(error_kind::sandbox_setup, "remote_sandbox needs a token resolver");
  std::unique_ptr<asio::ssl::context> tls;
  if (where.value().tls) {
    tls = tls_context(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    if (options.ca_file) tls->load_verify_file(*options.ca_file, ec);
    else tls->set_default_verify_paths(ec);
    if (ec)
      return fail_with(error_kind::sandbox_setup,
                     fmt::format("the CA file {}: {}", options.ca_file.value_or("(system)"), ec.message()));
    SSL_CTX_set_session_cache_mode(tls->native_handle(), SSL_SESS_CACHE_CLIENT);
  }
  return std::unique_ptr<sandbox>(
      std::make_unique<remote_backend>(std::move(options), std::move(where).value(), std::move(tls)));
}

}  // namespace psych
