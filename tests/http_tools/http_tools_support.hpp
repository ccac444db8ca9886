#pragma once
// What the http_tools tests share: a source of tools built or failed loudly, a call on the calling
// thread, and the one check every outcome gets (the credential appears nowhere in it).
#include <doctest/doctest.h>

#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "loopback_server.hpp"
#include "psych/host/http_tools.hpp"

namespace psych::testing {

/// A credential no server could guess, so that finding it anywhere is an echo.
inline constexpr std::string_view distinctive_secret = "httptool-secret-8c2e41f09d7b53aa";

inline std::unique_ptr<http_tool_source> source_of(std::vector<http_tool> tools) {
  auto created = http_tool_source::create(std::move(tools));
  if (!created) FAIL("create: " << created.error().message());
  return std::move(created).value();
}

inline http_tool tool_at(const loopback_server& server, std::string name, std::string_view path) {
  return {.name = std::move(name), .url_template = server.url(path)};
}

inline http_credential secret_credential() {
  return {.resolve = [] { return result<std::string>(std::string(distinctive_secret)); }};
}

/// The outcome's every word, value and message.
inline bool mentions(const tool_outcome& outcome, std::string_view text) {
  return outcome.value_json.find(text) != std::string::npos || outcome.message.find(text) != std::string::npos;
}

inline tool_outcome call(http_tool_source& source, std::string_view tool, std::string_view arguments = "{}",
                         std::stop_token stop = {}) {
  auto outcome = source.call(tool, arguments, std::move(stop));
  CAPTURE(outcome.value_json);
  CAPTURE(outcome.message);
  CHECK_FALSE(mentions(outcome, distinctive_secret));
  return outcome;
}

}  // namespace psych::testing
