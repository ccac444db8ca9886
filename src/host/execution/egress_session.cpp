#include "execution/egress_session.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "egress/egress_proxy.hpp"
#include "execution/launcher_process.hpp"
#include "os/posix.hpp"
#include "platform/posix/descriptor_passing.hpp"

namespace psych::host {

struct egress_session::handover {
  unique_fd host_end, launcher_end;
};

namespace {

constexpr int most_listeners = 2;  // 127.0.0.1 and ::1 (launchers/linux/egress_listener.hpp)

/// Bytes a connection may move each way together: far beyond a model's fetch, short of a disk.
constexpr std::uint64_t connection_bytes = std::uint64_t{1} << 30;

/// The listeners, as the launcher sent them: one byte with the descriptors attached.
result<std::vector<int>> receive_listeners(int from_launcher) {
  auto received = posix::receive_descriptors<most_listeners>(from_launcher, MSG_DONTWAIT);
  if (!received.fds.empty()) return std::move(received.fds);
  if (received.error != 0)
    return fail_with(error_kind::system_call_failed,
                     fmt::format("recvmsg(the egress handover): {}", std::strerror(received.error)));
  return fail_with(error_kind::system_call_failed, "the launcher reported a start without handing over the egress "
                                                   "proxy's listeners");
}

psych::egress_report report_of(const egress_meters& meters) {
  psych::egress_report report{.connections_allowed = static_cast<std::int64_t>(meters.connections_allowed),
                              .connections_refused = static_cast<std::int64_t>(meters.connections_refused),
                              .connections_cut = static_cast<std::int64_t>(meters.cut_idle + meters.cut_lifetime +
                                                                           meters.cut_bytes),
                              .bytes_sent = static_cast<std::int64_t>(meters.bytes_sent),
                              .bytes_received = static_cast<std::int64_t>(meters.bytes_received)};
  for (const auto& refused : meters.latest_refusals)
    report.refusals.push_back({.host = refused.host,
                               .port = refused.port,
                               .reason = std::string(name_of(refused.error)),
                               .detail = refused.detail});
  report.refusals_omitted =
      std::max<std::int64_t>(0, report.connections_refused - static_cast<std::int64_t>(report.refusals.size()));
  return report;
}

}  // namespace

egress_session::egress_session() = default;
egress_session::~egress_session() { (void)finish(); }

result<void> egress_session::prepare(const execution_terms& terms, launcher_fds& fds) {
  if (terms.network != network_access::allowlist) return success();
  PSYCH_TRY(auto pair, unix_socket_pair());
  handover_ = std::make_unique<handover>(handover{std::move(pair.first), std::move(pair.second)});
  fds.egress_handover = handover_->launcher_end.get();
  return success();
}

void egress_session::release_launcher_end() {
  if (handover_) handover_->launcher_end.reset();
}

result<void> egress_session::serve(const execution_terms& terms) {
  if (!handover_) return success();
  PSYCH_TRY(auto listeners, receive_listeners(handover_->host_end.get()));
  handover_.reset();
  egress_proxy_options options;
  for (const auto& text : terms.allowed_hosts) {
    auto pattern = parse_host_pattern(text);
    if (!pattern) {
      for (const int fd : listeners) ::close(fd);
      return fail_with(error_kind::invalid_argument, "the terms' allowed_hosts: " + pattern.error().detail);
    }
    options.allowed.push_back(std::move(pattern).value());
  }
  options.connection_lifetime = std::chrono::milliseconds(
      static_cast<std::int64_t>(terms.limits.wall_seconds.value * 1000.0) + 1000);
  options.connection_bytes = connection_bytes;
  PSYCH_TRY(auto proxy, egress_proxy::start(std::move(options), std::move(listeners)));
  proxy_ = std::move(proxy);
  return success();
}

void egress_session::program_starts() {
  if (proxy_) before_program_ = report_of(proxy_->meters());
}

std::optional<egress_report> egress_session::finish() {
  handover_.reset();
  if (!proxy_) return std::nullopt;
  proxy_->stop();
  auto report = report_of(proxy_->meters());
  proxy_.reset();
  if (before_program_) {
    const auto& probe = *before_program_;
    report.connections_allowed -= probe.connections_allowed;
    report.connections_refused -= probe.connections_refused;
    report.connections_cut -= probe.connections_cut;
    report.bytes_sent -= probe.bytes_sent;
    report.bytes_received -= probe.bytes_received;
    // The list keeps the latest refusals, oldest first, and the probe's were the very first: of the
    // `total` refused, the list holds the last `kept`, so the probe's still in it are those of its
    // `probe_refused` that come after the first `total - kept`.
    const std::int64_t total = report.connections_refused + probe.connections_refused;
    const auto kept = static_cast<std::int64_t>(report.refusals.size());
    const std::int64_t probes = std::clamp<std::int64_t>(probe.connections_refused - (total - kept), 0, kept);
    report.refusals.erase(report.refusals.begin(), report.refusals.begin() + static_cast<std::ptrdiff_t>(probes));
    report.refusals_omitted = std::max<std::int64_t>(
        0, report.connections_refused - static_cast<std::int64_t>(report.refusals.size()));
  }
  return report;
}

}  // namespace psych::host
