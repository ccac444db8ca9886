// One execution on the service (remote_execution.hpp).
#include "backends/remote/remote_execution.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include "backends/backend_support.hpp"
#include "backends/remote/remote_backend.hpp"
#include "backends/remote/remote_requests.hpp"
#include "execution/finish_result.hpp"
#include "execution/session.hpp"
#include "http/base64.hpp"

namespace psych::host {
namespace {

using clock = std::chrono::steady_clock;
using remote::ndjson_content_type;

/// The id in the URL: the Run's execution id when it may stand there as it is, else a fresh one.
std::string wire_id(const std::string& execution_id) {
  return remote::is_url_safe_id(execution_id) ? execution_id : random_token();
}

}  // namespace

/// What a refusal of the service's becomes in a result: as a local backend reports the same.
failure_kind refusal_failure(const std::optional<refusal_reason>& reason) {
  return reason == refusal_reason::isolation_unreachable ? failure_kind::isolation_unavailable
                                                         : failure_kind::launch_failed;
}

remote_execution::remote_execution(remote_backend& backend, const run_request& request, execution_terms terms,
                                   std::string token)
    : backend_(backend), request_(request), terms_(std::move(terms)), token_(std::move(token)),
      setup_(gateway_setup_of(request)), gateway_(setup_),
      calls_(io_, gateway_, setup_.run.execution_id, [this](const protocol::result_frame& answer) {
        answers_.push_back(answer);
        answers_ready_.cancel();
      }),
      clock_(io_), answers_ready_(io_), cancel_grace_(io_), gone_grace_(io_) {
  if (request.live_output) live_.emplace(*request.live_output);
  live_frames_ = live_.has_value();
}

sandbox_result remote_execution::run(std::stop_token stop) {
  started_ = clock::now();
  const auto& options = backend_.options();
  deadline_ = started_ + millis(terms_.limits.wall_seconds.value + options.wall_clock_slack_seconds +
                                options.cancel_grace_seconds);
  id_ = wire_id(setup_.run.execution_id);
  asio::co_spawn(io_, main(), asio::detached);
  std::stop_callback on_stop(stop, [this] { asio::post(io_, [this] { begin_cancel(ending::cancelled); }); });
  io_.run();
  finish_live_output();
  return assemble();
}

clock::time_point remote_execution::within_deadline(double seconds) const {
  return std::min(clock::now() + clock::duration(millis(seconds)), deadline_);
}

void remote_execution::finish_live_output() {
  if (!live_) return;
  std::array<std::uint64_t, 2> sizes = live_end_;
  if (outcome_ && ending_ != ending::provider_error) sizes = {outcome_->stdout_size, outcome_->stderr_size};
  if (!live_frames_) {
    // A version-1 service: the sink gets what the result captured, at the end.
    live_->push(output_stream::stdout_stream, 0, stdout_);
    live_->push(output_stream::stderr_stream, 0, stderr_);
  }
  live_->finish(std::max<std::uint64_t>(sizes[0], live_frames_ ? 0 : stdout_.size()),
                std::max<std::uint64_t>(sizes[1], live_frames_ ? 0 : stderr_.size()));
}

void remote_execution::fail(std::string why) {
  if (ending_ != ending::none) return;
  ending_ = ending::provider_error;
  why_ = std::move(why);
}

/// Timeout and cancellation: post a cancel (once), then give the service cancel_grace to say how
/// the execution ended before the stream is closed under it.
void remote_execution::begin_cancel(ending why) {
  if (outcome_ || refused_) return;  // the service has already said how it ended
  if (ending_ == ending::none) ending_ = why;
  // Not connected yet: main() calls this again once it is. Not accepted yet: the service may hold
  // the execution in its queue, and the cancel takes it out.
  if (cancel_requested_ || !stream_link_) return;
  cancel_requested_ = true;
  asio::co_spawn(io_, post_cancel(), asio::detached);
  cancel_grace_.expires_at(within_deadline(backend_.options().cancel_grace_seconds));
  cancel_grace_.async_wait([this](boost::system::error_code ec) {
    if (!ec && stream_link_) stream_link_->close();
  });
}

awaitable<void> remote_execution::main() {
  const auto& options = backend_.options();
  clock_.expires_after(millis(terms_.limits.wall_seconds.value + options.wall_clock_slack_seconds));
  clock_.async_wait([this](boost::system::error_code ec) {
    if (!ec) begin_cancel(ending::timeout);
  });
  asio::co_spawn(io_, post_answers(), asio::detached);

  // Twice at most: a service that speaks only version 1 refuses version 2 before anything ran.
  for (bool again = true; again;) {
    again = false;
    auto link = co_await backend_.connect(until(deadline_));
    if (!link) {
      fail(link.error().message());
      break;
    }
    // Cancelled (or out of time) before the program was sent: it is not sent at all.
    if (ending_ == ending::none) {
      stream_link_ = link.value().get();
      co_await stream_frames(*link.value());
    }
    if (accepted_ && !outcome_ && !cancel_posted_) {
      // The stream failed with the program possibly running: make sure it ends on the service.
      co_await post_cancel();
    }
    stream_link_ = nullptr;
    link.value()->close();
    if (version_refused_) {
      version_refused_ = false;
      live_frames_ = false;
      id_ = random_token();  // an id is never sent twice, even one refused before anything ran
      again = true;
    }
  }
  clock_.cancel();
  cancel_grace_.cancel();
  gone_grace_.cancel();
  auto unanswered = co_await calls_.end_calls();
  problems_.insert(problems_.end(), unanswered.begin(), unanswered.end());
  answers_closed_ = true;
  answers_ready_.cancel();
}

awaitable<void> remote_execution::stream_frames(http_link& link) {
  const auto& options = backend_.options();
  remote::execution_request body{.version = std::string(live_frames_ ? remote::protocol_version_live
                                                                     : remote::protocol_version),
                                 .program = request_.program,
                                 .filename = request_.filename,
                                 .terms = terms_,
                                 .bindings = gateway_.bindings_for_run(),
                                 .tenant = request_.tenant};
  auto request = backend_.request_to<http::string_body>(http::verb::post, "/v1/executions/" + id_, token_);
  request.set(http::field::content_type, "application/json");
  request.set(http::field::accept, ndjson_content_type);
  request.body() = protocol::encode_json(body);
  request.prepare_payload();
  link.tcp().expires_at(within_deadline(options.connect_timeout_seconds));
  auto [write_ec, written] = co_await link.with([&](auto& s) { return http::async_write(s, request, use_tuple); });
  if (write_ec) {
    fail("sending the execution: " + write_ec.message());
    co_return;
  }
  // From here on the deadline bounds the whole stream, however the bytes arrive: a per-read
  // timeout would be reset by a service that sends a byte now and then.
  link.tcp().expires_at(deadline_);

  http::response_parser<http::buffer_body> parser;
  parser.header_limit(max_header_bytes);
  // The body's own bounds are the line reader's; Beast's is set past them.
  const std::uint64_t captured = 2 * terms_.output.max_bytes + terms_.artifacts.max_total_bytes;
  // Live output (version 2) is as long as the program's output, which only its wall clock bounds;
  // what it costs here is the relay's window, not the stream's length.
  const std::uint64_t live = live_frames_ ? std::uint64_t{1} << 40 : 0;
  const protocol::stream_bounds bounds{.max_frame_bytes = 24u << 20,
                                       .max_stream_bytes = (1ull << 30) + captured / 3 * 4 + (16u << 20) + live,
                                       .max_frames = 1'000'000 + captured / (32 * 1024) + live / 4096,
                                       .max_empty_lines = 1'000};
  parser.body_limit(bounds.max_stream_bytes + 1024);
  auto [header_ec, header_read] =
      co_await link.with([&](auto& s) { return http::async_read_header(s, link.buffer(), parser, use_tuple); });
  if (header_ec) {
    fail(header_ec == http::error::header_limit ? "the response header is larger than allowed"
                                                : "reading the response: " + header_ec.message());
    co_return;
  }
  if (too_many_fields(parser.get())) {
    fail("the response has more header fields than allowed");
    co_return;
  }
  if (const auto status = parser.get().result_int(); status == 400 && live_frames_) {
    // Perhaps a service of version 1 only (it refuses the version before anything else, and before
    // anything ran): main() asks again in version 1, whose refusal, if any, is then the answer.
    version_refused_ = true;
    co_return;
  } else if (status != 200) {
    // psych serve answers 503 (busy, shutting down) before an execution starts, and a proxy's 503
    // (no replica up, its queue timed out) means the request reached none: either way the program
    // did not run, which the caller needs to know to decide on sending it again.
    fail(status == 503 ? status_problem(status, "the execution") + "; the program did not run"
                       : status_problem(status, "the execution"));
    co_return;
  }
  if (const auto type = parser.get()[http::field::content_type]; !type.starts_with(ndjson_content_type)) {
    fail(fmt::format("the service answered 200 with content type {}, not {}", peer_excerpt(type, 60),
                     ndjson_content_type));
    co_return;
  }

  auto read_frames = [&](auto& stream) -> awaitable<void> {
    ndjson_body_reader<std::remove_reference_t<decltype(stream)>, false> frames(stream, link.buffer(), parser, bounds);
    for (;;) {
      auto frame = co_await frames.template next<remote::accepted_frame, protocol::call_frame, protocol::cancel_call_frame,
                                                 remote::output_frame, remote::done_frame, remote::error_frame,
                                                 remote::live_output_frame>();
      // A failure after the last frame changes nothing that arrived; one at the deadline is the
      // deadline's closing the stream.
      if (!frame && clock::now() >= deadline_) begin_cancel(ending::timeout);
      if (!frame && !outcome_ && !refused_) fail("the service's stream: " + frame.error().message());
      if (!frame) co_return;
      if (!frame.value() && !outcome_ && !refused_) fail("the service's stream ended before `done`");
      if (!frame.value() || !take_frame(*frame.value())) co_return;
    }
  };
  co_await link.with(read_frames);
  if (outcome_ || refused_) backend_.keep_session(link);
}

bool remote_execution::take_frame(stream_frame& f) {
  if (outcome_ || refused_) {
    outcome_.reset();
    refused_.reset();
    fail("the service sent frames after its last one");
    return false;
  }
  if (!accepted_) {
    if (auto* error = std::get_if<remote::error_frame>(&f)) {
      refused_ = std::move(*error);
      return true;
    }
    const auto* accepted = std::get_if<remote::accepted_frame>(&f);
    if (!accepted) {
      fail("frame_out_of_sequence: the service's first frame is neither `accepted` nor `error`");
      return false;
    }
    // The service says it accepted an execution: whatever is wrong with the frame, ours may be
    // running under it, so main() posts a cancel once the stream is given up.
    accepted_ = true;
    if (accepted->execution_id != id_) {
      fail("the service's stream is for another execution");
      return false;
    }
    const auto asked = live_frames_ ? remote::protocol_version_live : remote::protocol_version;
    if (accepted->version != asked) {
      fail(fmt::format("the service speaks {}, not {}", peer_excerpt(accepted->version, 40), asked));
      return false;
    }
    return true;
  }
  if (const auto* call = std::get_if<protocol::call_frame>(&f)) {
    calls_.dispatch(*call);
  } else if (const auto* cancel = std::get_if<protocol::cancel_call_frame>(&f)) {
    calls_.give_up(cancel->id);
  } else if (const auto* output = std::get_if<remote::output_frame>(&f)) {
    if (auto taken = take_output(*output); !taken) {
      fail(taken.error().message());
      return false;
    }
  } else if (const auto* live = std::get_if<remote::live_output_frame>(&f)) {
    if (auto taken = take_live_output(*live); !taken) {
      fail(taken.error().message());
      return false;
    }
  } else if (auto* done = std::get_if<remote::done_frame>(&f)) {
    outcome_ = std::move(done->outcome);
  } else if (const auto* error = std::get_if<remote::error_frame>(&f)) {
    fail(fmt::format("the service ended the execution: {}: {}", peer_excerpt(error->code.spelling(), 40),
                     peer_excerpt(error->message, 400)));
    return false;
  } else {
    fail("frame_out_of_sequence: a second `accepted`");
    return false;
  }
  return true;
}

result<void> remote_execution::take_output(const remote::output_frame& frame) {
  auto bytes = base64_decode(frame.data);
  if (!bytes) return fail_with(error_kind::provider_error, "an output frame's data is not base64");
  const auto& output = terms_.output;
  const auto& artifacts = terms_.artifacts;
  if (frame.stream == "stdout" || frame.stream == "stderr") {
    auto& into = frame.stream == "stdout" ? stdout_ : stderr_;
    if (into.size() + bytes->size() > output.max_bytes)
      return fail_with(error_kind::provider_error,
                     fmt::format("the service sent more {} than the terms' {} bytes", frame.stream, output.max_bytes));
    into += *bytes;
    return success();
  }
  if (frame.stream == "artifact") {
    if (artifacts.collection != artifact_collection::collect || frame.index >= artifacts.max_files)
      return fail_with(error_kind::provider_error, "the service sent an artifact the terms do not collect");
    auto& into = artifact_bytes_[frame.index];
    artifact_total_ += bytes->size();
    if (into.size() + bytes->size() > artifacts.max_file_bytes || artifact_total_ > artifacts.max_total_bytes)
      return fail_with(error_kind::provider_error, "the service sent more artifact bytes than the terms allow");
    into += *bytes;
    return success();
  }
  return fail_with(error_kind::provider_error, "an output frame names no stream this protocol has");
}

result<void> remote_execution::take_live_output(const remote::live_output_frame& frame) {
  if (!live_frames_)
    return fail_with(error_kind::provider_error, "the service sent live_output in a version-1 stream");
  auto bytes = base64_decode(frame.data);
  if (!bytes) return fail_with(error_kind::provider_error, "a live_output frame's data is not base64");
  auto& end = live_end_[static_cast<std::size_t>(frame.stream)];
  // Offsets only grow: a service may skip bytes (the client was behind), never repeat or reorder them.
  if (frame.offset < end || frame.offset > (std::uint64_t{1} << 62))
    return fail_with(error_kind::provider_error,
                     fmt::format("a live_output frame's offset {} goes back (its stream is at {})", frame.offset, end));
  end = frame.offset + bytes->size();
  live_->push(frame.stream, frame.offset, *bytes);
  return success();
}

/// The program's call results, posted in batches as they are ready, on a connection of their own.
awaitable<void> remote_execution::post_answers() {
  std::unique_ptr<http_link> link;
  for (;;) {
    if (answers_.empty()) {
      if (answers_closed_) break;
      answers_ready_.expires_at(clock::time_point::max());
      co_await answers_ready_.async_wait(use_tuple);
      continue;
    }
    if (ending_ != ending::none || outcome_ || refused_ || execution_gone_) {
      answers_.clear();  // nobody on the service waits for them any more
      continue;
    }
    std::string body;
    while (!answers_.empty()) {
      body += protocol::encode_frame(answers_.front());
      answers_.pop_front();
    }
    if (!link) {
      auto opened = co_await backend_.connect(until(deadline_));
      if (!opened) {
        fail("delivering call results: " + opened.error().message());
        begin_cancel(ending::provider_error);
        continue;
      }
      link = std::move(opened).value();
    }
    auto request = backend_.request_to<http::string_body>(http::verb::post, "/v1/executions/" + id_ + "/results",
                                                          token_);
    request.set(http::field::content_type, ndjson_content_type);
    request.body() = std::move(body);
    auto response = co_await exchange(*link, request, 64 * 1024,
                                      until(within_deadline(backend_.options().connect_timeout_seconds)));
    if (response && response.value().status == 404) {
      // Usually the execution ended on the service while this answer was on its way (the program
      // gave up on the call, or finished without it): its `done` is on the stream, and the answer
      // is moot, as a local program's late answer. But if no `done` comes, the results reached a
      // service that does not run this execution (a load balancer routed them to another replica
      // than its stream), and the program would wait for its answer until its wall clock.
      execution_gone_ = true;
      gone_grace_.expires_at(within_deadline(backend_.options().cancel_grace_seconds));
      gone_grace_.async_wait([this](boost::system::error_code ec) {
        if (ec || outcome_ || refused_) return;
        fail("delivering call results: the service answered 404 (no such execution) while the execution's "
             "stream was still open, so the results reached a service other than the one running it (check "
             "that a load balancer routes /v1/executions/{id}/results where the stream went)");
        begin_cancel(ending::provider_error);
      });
    } else if (!response || response.value().status != 200) {
      fail(response ? status_problem(response.value().status, "delivering call results")
                    : "delivering call results: " + response.error().message());
      begin_cancel(ending::provider_error);
      link.reset();
    }
  }
  if (link) link->close();
}

awaitable<void> remote_execution::post_cancel() {
  if (cancel_posted_) co_return;
  cancel_posted_ = true;
  auto link = co_await backend_.connect(until(deadline_));
  if (!link) {
    problems_.push_back("remote: the cancel could not be posted: " + link.error().message());
    co_return;
  }
  auto request = backend_.request_to<http::string_body>(http::verb::post, "/v1/executions/" + id_ + "/cancel",
                                                        token_);
  auto response = co_await exchange(*link.value(), request, 64 * 1024,
                                    until(within_deadline(backend_.options().connect_timeout_seconds)));
  if (!response) problems_.push_back("remote: the cancel could not be posted: " + response.error().message());
  else if (response.value().status != 200 && response.value().status != 404)
    problems_.push_back(status_problem(response.value().status, "remote: the cancel"));
  link.value()->close();
}

sandbox_result remote_execution::assemble() {
  sandbox_result r;
  const double elapsed = std::chrono::duration<double>(clock::now() - started_).count();
  if (refused_ && !accepted_) {
    r = refused_result(refused_->code == remote::error_code::terms_unmet ? refusal_failure(refused_->refusal)
                       : refused_->code == remote::error_code::cancelled ? failure_kind::cancelled
                                                                         : failure_kind::provider_error,
                       fmt::format("the sandbox service did not run the program ({}): {}",
                                   peer_excerpt(refused_->code.spelling(), 40), peer_excerpt(refused_->message, 400)));
    r.cancelled = refused_->code == remote::error_code::cancelled;
  } else if (outcome_ && ending_ != ending::provider_error) {
    auto& o = *outcome_;
    // The service's grades pass through unchanged: the client has nothing to upgrade them with.
    remote::for_each_carried_member([&](auto carried, auto into) { r.*into = std::move(o.*carried); });
    for (std::size_t i = 0; i < o.artifacts.size(); ++i) {
      auto& bytes = artifact_bytes_[i];
      if (bytes.size() != o.artifacts[i].size_bytes) {
        ending_ = ending::provider_error;
        why_ = "an artifact's bytes do not match the size `done` gives";
        break;
      }
      r.artifacts.push_back({.path = o.artifacts[i].path, .size_bytes = bytes.size(), .data = std::move(bytes)});
    }
    if (!r.failure && (!r.isolation || *r.isolation < terms_.isolation))
      r.failure = sandbox_failure{failure_kind::isolation_unavailable,
                                  fmt::format("the sandbox service reports isolation={} for a request of {}",
                                              r.isolation ? name_of(*r.isolation) : "none", name_of(terms_.isolation))};
  }
  if (ending_ == ending::provider_error || (!outcome_ && !refused_ && ending_ == ending::none)) {
    sandbox_result failed;
    failed.failure = sandbox_failure{failure_kind::provider_error,
                                     why_.empty() ? std::string("the sandbox service gave no result") : why_};
    failed.duration_seconds = elapsed;
    failed.problems = std::move(r.problems);
    r = std::move(failed);
  } else if (ending_ == ending::timeout) {
    if (!outcome_) r.duration_seconds = elapsed;
    r.failure = sandbox_failure{failure_kind::timeout,
                                fmt::format("the sandbox service did not finish within the wall clock ({} s) and {} s "
                                            "of slack; a cancel was posted, and its `done` waited for {} s at most",
                                            terms_.limits.wall_seconds.value,
                                            backend_.options().wall_clock_slack_seconds,
                                            backend_.options().cancel_grace_seconds)};
    r.limit_hit = limit_name::wall_seconds;
  } else if (ending_ == ending::cancelled) {
    if (!outcome_) r.duration_seconds = elapsed;
    r.cancelled = true;
    if (!r.failure || r.failure->kind != failure_kind::cancelled)
      r.failure = sandbox_failure{failure_kind::cancelled, "cancelled by the caller; a cancel was posted"};
  }
  r.stdout_data = std::move(stdout_);
  r.stderr_data = std::move(stderr_);
  r.stdout_size = std::max<std::uint64_t>(r.stdout_size, r.stdout_data.size());
  r.stderr_size = std::max<std::uint64_t>(r.stderr_size, r.stderr_data.size());
  r.unavailable_bindings = request_.unavailable_bindings;
  auto tail = tail_of_calls(gateway_);
  tail.problems = std::move(problems_);
  finish_result(r, std::move(tail),
                {.output = terms_.output,
                 .blobs = request_.blobs,
                 .tenant = request_.tenant,
                 .account = {request_.budget, setup_.run}});
  return r;
}

}  // namespace psych::host
