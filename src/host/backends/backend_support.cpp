// What every backend of this host shares: where the launcher is, the child's environment built
// from nothing, the refusals made before anything starts, and the mechanism report in words.
#ifdef _WIN32
#include <windows.h>  // GetModuleFileNameW

#include "platform/windows/environment_block.hpp"  // same_variable_name
#else
#include <unistd.h>  // access
#endif
#ifdef __APPLE__
#include <mach-o/dyld.h>  // _NSGetExecutablePath
#endif

#include "backends/backend_support.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/platform_backends.hpp"  // host_launcher_name
#include "os/host_environment.hpp"
#include "os/random_hex.hpp"
#include "platform/utf8_path.hpp"
#include "psych/utf8.hpp"

#if !defined(PSYCH_LAUNCHER_BESIDE_BIN) && defined(_WIN32)
#define PSYCH_LAUNCHER_BESIDE_BIN "../libexec/psych/psych-launch-windows.exe"
#elif !defined(PSYCH_LAUNCHER_BESIDE_BIN)
#define PSYCH_LAUNCHER_BESIDE_BIN "../libexec/psych/psych-launch-linux"
#endif

namespace psych {
namespace {

/// A string literal (static storage) from the including program; see register_package_launcher.
std::atomic<const char*> package_launcher{nullptr};

/// The launchers an installed executable may have beside it: bin/psych finds libexec/psych/…, and
/// an executable installed in libexec/psych/ itself (psych-remote) the one in its own directory.
std::vector<std::string> launchers_beside_executable() {
#if defined(__APPLE__)
  char path[4096];
  std::uint32_t size = sizeof path;
  if (::_NSGetExecutablePath(path, &size) != 0) return {};
  std::error_code ec;
  const auto executable = std::filesystem::weakly_canonical(path, ec);
#elif defined(_WIN32)
  std::wstring path(32768, L'\0');
  path.resize(::GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size())));
  if (path.empty()) return {};
  std::error_code ec;
  const auto executable = std::filesystem::weakly_canonical(path, ec);
#else
  std::error_code ec;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", ec);
#endif
  if (ec) return {};
  const std::filesystem::path from_bin = PSYCH_LAUNCHER_BESIDE_BIN;
  return {(executable.parent_path() / from_bin).lexically_normal().string(),
          (executable.parent_path() / from_bin.filename()).string()};
}

}  // namespace

void register_package_launcher(const char* path) noexcept { package_launcher.store(path); }

namespace host {

namespace {

/// A regular file this process may run: executable by its mode on POSIX; on Windows, which has no
/// execute bit, any regular file (CreateProcessW decides by its format).
bool launcher_runnable(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(platform::utf8_path(path), ec)) return false;
#ifdef _WIN32
  return true;
#else
  return ::access(path.c_str(), X_OK) == 0;
#endif
}

}  // namespace

result<std::string> find_launcher(const std::optional<std::string>& explicit_path) {
  // An explicit choice is the only candidate: falling back to another
  // launcher would run something the deployment did not name.
  std::vector<std::string> candidates;
  if (explicit_path) candidates.push_back(*explicit_path);
  else if (auto env = environment_value("PSYCH_LAUNCHER"); env && !env->empty()) candidates.push_back(std::move(*env));
  else {
    if (const char* packaged = package_launcher.load(); packaged && *packaged) candidates.emplace_back(packaged);
    for (auto& beside : launchers_beside_executable()) candidates.push_back(std::move(beside));
  }
  for (const auto& path : candidates)
    if (launcher_runnable(path)) return path;
  std::string tried;
  for (const auto& path : candidates) tried.append(tried.empty() ? "" : ", ").append(path);
  return fail_with(error_kind::launcher_unavailable,
                 fmt::format("no executable {} found (tried: {}); install psych (cmake --install) "
                             "and build against its package (find_package(psych)), or point PSYCH_LAUNCHER or "
                             "launcher_path at the launcher",
                             host_launcher_name().empty() ? "launcher" : host_launcher_name(),
                             tried.empty() ? "nothing" : tried));
}

std::map<std::string, std::string> child_environment(const std::vector<std::string>& allowlist) {
  // Built from nothing: the allowlist plus what psych sets itself.
#ifdef _WIN32
  // The launcher adds nothing, and CPython cannot seed its hash or start Winsock (the channel)
  // without SystemRoot (docs/windows-launcher.md): it is the host's, and PATH is the system's own
  // directories, as /usr/bin:/bin is on POSIX.
  std::map<std::string, std::string> env{{"PYTHONDONTWRITEBYTECODE", "1"}};
  if (const auto root = environment_value("SystemRoot"); root && !root->empty()) {
    env.emplace("SystemRoot", *root);
    env.emplace("PATH", fmt::format("{0}\\System32;{0}", *root));
  }
#else
  // LC_CTYPE is set so that the interpreter does not coerce a C locale by adding it.
  std::map<std::string, std::string> env{{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                         {"PYTHONDONTWRITEBYTECODE", "1"},
                                         {"LC_CTYPE", "C.UTF-8"}};
#endif
  for (const auto& name : allowlist) {
#ifdef _WIN32
    // Path and PATH are one variable on Windows: a name already set, by psych or by the allowlist
    // in another case, is not added again (the launcher would refuse the pair), as emplace keeps
    // psych's own on POSIX.
    if (std::any_of(env.begin(), env.end(), [&](const auto& set) { return windows::same_variable_name(set.first, name); }))
      continue;
#endif
    if (auto value = environment_value(name)) env.emplace(name, std::move(*value));
  }
  return env;
}

sandbox_result refused_result(failure_kind kind, std::string message) {
  sandbox_result r;
  r.failure = sandbox_failure{kind, std::move(message)};
  return r;
}

namespace {

/// A program that is not UTF-8, as Python itself fails it: a syntax error at the first ill-formed
/// byte. The program travels as a JSON string, whose encoder would put U+FFFD in its place and run
/// something the author never wrote; Python runs no such file either.
std::optional<sandbox_result> not_utf8(const run_request& request) {
  const std::string_view source = request.program;
  const std::size_t at = utf8::first_invalid(source);
  if (at == std::string_view::npos) return std::nullopt;
  const auto before = source.substr(0, at);
  const auto line = static_cast<std::int64_t>(std::count(before.begin(), before.end(), '\n')) + 1;
  const std::string said =
      fmt::format("(unicode error) 'utf-8' codec can't decode byte {:#04x} in position {}: {}",
                  static_cast<unsigned char>(source[at]), at, utf8::ill_formed_reason(source, at));
  sandbox_result r;
  r.failure = sandbox_failure{.kind = failure_kind::syntax_error,
                              .message = fmt::format("SyntaxError: {} ({}, line {})", said, request.filename, line),
                              .traceback = fmt::format("  File \"{}\", line {}\nSyntaxError: {}\n", request.filename,
                                                       line, said),
                              .line = line};
  return r;
}

}  // namespace

std::optional<sandbox_result> refusal_every_backend_makes(const run_request& request, std::string_view backend,
                                                   bool grants_network, const backend_offer* offer) {
  if (auto valid = validate_limits(request.terms.limits); !valid)
    return refused_result(failure_kind::launch_failed, valid.error().message());
  if (request.terms.output.preserve == output_preservation::required && !request.blobs)
    return refused_result(failure_kind::preservation_unavailable,
                                "output.preserve is REQUIRED and no BlobStore is wired: nothing ran");
  if (request.terms.network == network_access::unrestricted && !grants_network)
    return refused_result(failure_kind::launch_failed,
                                fmt::format("the {} backend does not grant network access", backend));
  if (request.terms.network == network_access::allowlist && (!offer || !offer->network_allowlist))
    return refused_result(failure_kind::launch_failed,
                          fmt::format("the {} backend does not offer network=allowlist", backend));
  if (offer)
    if (auto beyond = allowlist_beyond_cap(*offer, request.terms))
      return refused_result(failure_kind::launch_failed, beyond->message);
  return not_utf8(request);
}

gateway_setup gateway_setup_of(const run_request& request) {
  gateway_setup setup{.offered = request.bindings,
                      .unavailable = request.unavailable_bindings,
                      .invoker = request.invoker,
                      .relayed = request.relay != nullptr,
                      .budget = request.budget,
                      .run = request.run,
                      .blobs = request.blobs,
                      .tenant = request.tenant};
  if (setup.run.execution_id.empty()) setup.run.execution_id = random_token();
  return setup;
}

void add_request(session_plan& plan, const run_request& request) {
  plan.program = request.program;
  plan.filename = request.filename;
  plan.bindings = gateway_setup_of(request);
  plan.relay = request.relay;
  plan.live_output = request.live_output;
  plan.blobs = request.blobs;
  plan.tenant = request.tenant;
}

std::vector<std::string> mechanism_names(const mechanism_report& m) {
  std::vector<std::string> out;
  const auto add = [&](bool on, std::string name) {
    if (on) out.push_back(std::move(name));
  };
  add(m.session, "session: own session and process group");
  add(m.subreaper, "subreaper: orphans return to the launcher, the tree is killed and verified");
  add(m.uid_sweep, "tree: orphans found by the run_as uid this execution holds alone, killed with the tree");
  add(m.uid_drop, "identity: setresuid/setresgid to run_as, no supplementary groups");
  add(m.no_new_privs, "no_new_privs");
  add(m.seccomp == seccomp_state::filter, "seccomp: filter (socket() denied for every family, socketpair(AF_UNIX) only; dangerous calls denied)");
  add(!m.namespaces.empty(), "namespaces: " + fmt::format("{}", fmt::join(m.namespaces, ", ")));
  add(!m.root_entries.empty(), "filesystem: pivot_root into a minimal root holding " +
                                   fmt::format("{}", fmt::join(m.root_entries, ", ")));
  add(m.landlock_abi > 0, fmt::format("landlock: ABI {}", m.landlock_abi));
  add(m.seatbelt, "seatbelt: reads denied under the secrets' subtrees, writes only to the workspace and the temp "
                  "dir, network denied without a grant");
  add(!m.address_space_limit, "memory: no address-space limit (the platform has none its interpreter respects)");
  add(m.cgroup != "none", "cgroup: " + m.cgroup + " (memory and pids for the whole tree)");
  add(m.rlimits.cpu_seconds >= 0,
      fmt::format("rlimits: cpu {} s, address space {} B, file size {} B, processes {} (+{} existing), "
                  "open files {}, core {}",
                  m.rlimits.cpu_seconds, m.rlimits.address_space_bytes, m.rlimits.file_size_bytes,
                  m.rlimits.process_count - m.process_count_base, m.process_count_base, m.rlimits.open_files,
                  m.rlimits.core_bytes));
  add(m.environment_built, "environment: built from nothing");
  add(m.fds_closed, "descriptors: all closed but stdio and the channel");
  return out;
}

}  // namespace host

}  // namespace psych
