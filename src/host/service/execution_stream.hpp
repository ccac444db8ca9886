#pragma once
// The sandbox service's executions on the wire: an execution's answer is one NDJSON stream
// (docs/remote-protocol.md) of `accepted`, its program's relayed calls, its captured output and
// `done`; or a single `error` frame when it never ran. A client's results for the relayed calls
// and its cancel arrive on requests of their own. The execution's blocking run() has a thread of its
// own, and everything it says to its client is posted to the event loop, which alone writes.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "psych/host/remote_protocol.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/host/sandbox_service.hpp"
#include "psych/result.hpp"
#include "service/access_log.hpp"
#include "service/admission.hpp"
#include "service/service_description.hpp"
#include "service/service_metrics.hpp"

namespace psych::host {

class execution_streams {
 public:
  execution_streams(boost::asio::io_context& io, sandbox& backend, const sandbox_service_options& options,
                    service_counters& counters, admission& admitted, service_description& description)
      : io_(io), backend_(backend), options_(options), counters_(counters), admitted_(admitted),
        description_(description) {}

  /// POST /v1/executions/{id}: refuses the request, or admits it and streams the execution to its
  /// end. The connection closes afterwards. Stream: beast::tcp_stream or tls_stream.
  template <class Stream>
  boost::asio::awaitable<void> execute(Stream& stream, const std::string& id, const std::string& client,
                                       std::string_view body, access_record& record);
  /// POST .../cancel. False when `client` has no such execution: another's is answered as one that
  /// does not exist.
  bool cancel(const std::string& id, const std::string& client);
  /// POST .../results: the client's answers to relayed calls; how many were for a call that waited.
  result<std::size_t> deliver(const std::string& id, const std::string& client, std::string_view body);

 private:
  template <class Stream>
  boost::asio::awaitable<bool> start_stream(Stream& stream, access_record& record);
  template <class Stream>
  boost::asio::awaitable<bool> send_line(Stream& stream, const std::string& line);
  template <class Stream>
  boost::asio::awaitable<void> end_stream(Stream& stream);
  template <class Stream>
  boost::asio::awaitable<void> stream_single(Stream& stream, const remote::error_frame& frame, access_record& record);
  template <class Stream>
  boost::asio::awaitable<void> stream_execution(Stream& stream, std::shared_ptr<service_execution> exec,
                                                remote::execution_request request, access_record& record);

  boost::asio::io_context& io_;
  sandbox& backend_;
  const sandbox_service_options& options_;
  service_counters& counters_;
  admission& admitted_;
  service_description& description_;
};

}  // namespace psych::host
