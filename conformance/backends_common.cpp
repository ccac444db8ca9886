// The part of the suite's backends every platform shares: a subcase per backend with the checks
// after it, the terms a runtime would compute, and the case's scratch directories.
#include <filesystem>

#include "backends.hpp"
#include "backends_platform.hpp"
#include "os/random_hex.hpp"
#include "platform/utf8_path.hpp"

namespace conformance {

std::unique_ptr<psych::sandbox> sandbox_or_skip(const backend_under_test& backend) {
  if (detail::reported_unavailable(backend)) return nullptr;
  auto sandbox = make_sandbox(backend);
  if (!sandbox) {
    psych::testing::skip_case(backend.name + " is not available here: " + sandbox.error().message());
    return nullptr;
  }
  return std::move(sandbox).value();
}

void for_each_backend(const std::function<void(psych::sandbox&, const backend_under_test&)>& body) {
  for_each_backend([](const backend_under_test&) { return true; }, body);
}

void for_each_backend(const std::function<bool(const backend_under_test&)>& applies_to,
                      const std::function<void(psych::sandbox&, const backend_under_test&)>& body) {
  for (const auto& backend : backends()) {
    if (!applies_to(backend)) continue;
    SUBCASE(backend.name.c_str()) {
      const auto before = detail::census_before_case(backend);
      auto sandbox = sandbox_or_skip(backend);
      if (!sandbox) continue;
      body(*sandbox, backend);
      sandbox.reset();  // a pool's waiting sandboxes go with it, and must leave nothing either
      detail::check_nothing_left_since(backend, before);
      CHECK(leftovers_in_temp_root().empty());
    }
  }
}

psych::execution_terms terms_for(const psych::sandbox& sandbox, psych::code_execution_limits limits,
                                 psych::isolation_level isolation) {
  if (!limits.wall_seconds.value) limits.wall_seconds = 20.0;
  const auto offer = sandbox.offer();
  auto decision = psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = isolation, .limits = limits},
                                         {});
  REQUIRE(std::holds_alternative<psych::execution_terms>(decision));
  return std::get<psych::execution_terms>(decision);
}

psych::sandbox_result run(psych::sandbox& sandbox, std::string program, psych::code_execution_limits limits,
                          std::stop_token stop) {
  return sandbox.run({.program = std::move(program), .terms = terms_for(sandbox, limits)}, std::move(stop));
}

std::vector<std::string> leftovers_in_temp_root() {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(psych::platform::utf8_path(temp_root())))
    found.push_back(entry.path().string());
  return found;
}

std::string make_scratch_directory(std::string_view prefix) {
  namespace fs = std::filesystem;
  const auto path = psych::platform::utf8_path(temp_root()).parent_path() / (std::string(prefix) + psych::host::random_hex(6));
  REQUIRE(fs::create_directory(path));
  // Owner all, others through: a child of the suite's uid passes through to what it is given.
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  return path.string();
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

}  // namespace conformance
