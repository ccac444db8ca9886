#include "egress/name_cache.hpp"

#include <algorithm>

namespace psych::host::egress {

std::optional<std::vector<boost::asio::ip::address>> name_cache::find(const std::string& host,
                                                                      clock::time_point now) const {
  const auto it = answers_.find(host);
  if (it == answers_.end() || now >= it->second.until) return std::nullopt;
  return it->second.addresses;
}

void name_cache::keep(const std::string& host, std::vector<boost::asio::ip::address> addresses,
                      clock::time_point until, clock::time_point now) {
  if (addresses.empty() || until <= now) return;
  if (!answers_.contains(host) && answers_.size() >= most_names) {
    std::erase_if(answers_, [now](const auto& kept) { return now >= kept.second.until; });
    if (answers_.size() >= most_names)
      answers_.erase(std::ranges::min_element(answers_, {}, [](const auto& kept) { return kept.second.until; }));
  }
  answers_.insert_or_assign(host, answer{std::move(addresses), until});
}

void name_cache::forget(const std::string& host) { answers_.erase(host); }

}  // namespace psych::host::egress
