#include "confinement.hpp"

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <string_view>

#include <pwd.h>
#include <unistd.h>

namespace psych::launcher {

namespace {

/// Where the secrets of the machine's accounts live, whoever the worker is.
constexpr std::array<const char*, 4> secret_subtrees = {"/Users", "/private/var/root", "/Library/Keychains",
                                                        "/private/var/folders"};

setup_result<std::string> canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return fail(system_failure(launch_stage::seatbelt, "realpath", errno, path));
  return std::string(resolved);
}

std::string parent_of(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string("/") : std::string(path.substr(0, slash));
}

bool within(std::string_view path, std::string_view tree) {
  return path == tree || (path.starts_with(tree) && path.size() > tree.size() && path[tree.size()] == '/');
}

/// The installation an interpreter belongs to: <prefix>/bin/python3 -> <prefix>.
std::string installation_of(const std::string& interpreter) {
  const auto bin = parent_of(interpreter);
  return bin.ends_with("/bin") ? parent_of(bin) : bin;
}

}  // namespace

setup_result<seatbelt_terms> seatbelt_terms_for(const protocol::launch_frame& launch) {
  seatbelt_terms terms;
  PSYCH_TRY(terms.workspace, canonical(launch.workspace));
  PSYCH_TRY(terms.tmp_dir, canonical(launch.tmp_dir));
  PSYCH_TRY(auto canary, canonical(launch.canary));
  PSYCH_TRY(auto interpreter, canonical(launch.interpreter));
  terms.network = launch.network == network_access::unrestricted;

  for (const char* subtree : secret_subtrees) terms.read_denied.emplace_back(subtree);
  // The worker's home (the launcher runs as the worker, or as root); "/" would deny everything.
  if (const passwd* worker = ::getpwuid(::getuid()); worker != nullptr && worker->pw_dir != nullptr) {
    if (auto home = canonical(worker->pw_dir); home && home.value() != "/") terms.read_denied.push_back(home.value());
  }
  // The host makes <temp root>/psych-XXXX/workspace and <temp root>/psych-canary-XXXX/canary: the
  // temp root holds every other execution's directories and the canaries.
  const auto temp_root = parent_of(parent_of(terms.workspace));
  if (temp_root != "/") terms.read_denied.push_back(temp_root);
  terms.read_denied.push_back(parent_of(canary));

  const auto installation = installation_of(interpreter);
  for (const auto& denied : terms.read_denied)
    if (within(installation, denied)) {
      terms.read_reopened.push_back(installation);
      break;
    }
  return terms;
}

}  // namespace psych::launcher
