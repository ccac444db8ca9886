#include "backends.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace conformance {

const std::string& temp_root() {
  static const std::string root = [] {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/psych-conformance-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    ::chmod(pattern.c_str(), 0711);  // removed by main() after the run
    return pattern;
  }();
  return root;
}

const std::vector<backend_under_test>& backends() {
  static const std::vector<backend_under_test> all = [] {
    psych::local_sandbox_options process;
    process.isolation = psych::isolation_level::process;
    process.run_as_uid = process.run_as_gid = suite_uid;
    process.temp_root = temp_root();
    process.allow_same_uid = ::geteuid() != 0;  // unprivileged CI: the only way to run at all
    psych::local_sandbox_options isolated = process;
    isolated.isolation = psych::isolation_level::isolated;
    return std::vector<backend_under_test>{{"linux-process", process}, {"linux-isolated", isolated}};
  }();
  return all;
}

void for_each_backend(const std::function<void(psych::sandbox&, const backend_under_test&)>& body) {
  for (const auto& backend : backends()) {
    SUBCASE(backend.name.c_str()) {
      auto sandbox = psych::local_sandbox(backend.options);
      if (!sandbox) {
        MESSAGE("skipped " << backend.name << ": " << sandbox.error().message());
        continue;
      }
      body(*sandbox.value(), backend);
      if (::geteuid() == 0) CHECK(processes_of(suite_uid).empty());
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

std::vector<int> processes_of(std::int64_t uid) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0 && static_cast<std::int64_t>(st.st_uid) == uid)
      found.push_back(std::stoi(name));
  }
  return found;
}

std::vector<std::string> leftovers_in_temp_root() {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(temp_root()))
    found.push_back(entry.path().string());
  return found;
}

}  // namespace conformance
