#include "service/access_log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

#include <boost/asio/ip/address.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "psych/protocol/json.hpp"

BOOST_HANA_ADAPT_STRUCT(psych::host::access_record, time, peer, forwarded_for, method, path, status, client, tenant,
                        outcome, duration_ms);

namespace psych::host {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const std::tm tm = fmt::gmtime(t);  // gmtime_r where there is one, gmtime_s on Windows
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::string forwarded_client(std::string_view header) {
  if (header.empty()) return {};
  const auto comma = header.rfind(',');
  auto last = comma == std::string_view::npos ? header : header.substr(comma + 1);
  while (!last.empty() && (last.front() == ' ' || last.front() == '\t')) last.remove_prefix(1);
  while (!last.empty() && (last.back() == ' ' || last.back() == '\t')) last.remove_suffix(1);
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(std::string(last.substr(0, 64)), ec);
  return ec || last.size() > 64 ? "invalid" : address.to_string();
}

void write_access_log(const std::function<void(std::string_view)>& sink, const access_record& record) {
  const auto line = protocol::encode_json(record);
  if (sink) sink(line);
  else std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace psych::host
