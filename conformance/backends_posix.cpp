#include "backends_posix.hpp"

#include "backends_platform.hpp"

#include "backends/container/container_runtime.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox_service.hpp"
#include "psych/protocol/json.hpp"
#include "os/run_command.hpp"
#include "execution/session.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

namespace conformance {

namespace {

/// Set once temp_root() has made the directory. after_the_run() removes it only then: asking
/// temp_root() there would make one outside any case (a query such as --list-test-cases runs none),
/// where its REQUIRE has no test to fail and doctest crashes.
std::atomic<bool> temp_root_made{false};

}  // namespace

const std::string& temp_root() {
  static const std::string root = [] {
    std::string pattern = std::filesystem::temp_directory_path().string() + "/psych-conformance-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    ::chmod(pattern.c_str(), 0711);  // removed by main() after the run
    temp_root_made = true;
    return pattern;
  }();
  return root;
}

// g++ 12 at -O2 reports the copies of `process` below as reading an uninitialized
// optional<string> (a false -Wmaybe-uninitialized that comes and goes with how the unity build
// groups this file); the options are fully constructed before each copy.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
const std::vector<backend_under_test>& backends() {
  static const std::vector<backend_under_test> all = [] {
    psych::local_sandbox_options process;
    process.isolation = psych::isolation_level::process;
    process.backend = "linux-process";
    process.run_as_uid = process.run_as_gid = suite_uid;
    process.temp_root = temp_root();
    process.allow_same_uid = ::geteuid() != 0;  // unprivileged CI: the only way to run at all
    psych::local_sandbox_options isolated = process;
    isolated.isolation = psych::isolation_level::isolated;
    isolated.backend = "linux-namespaces";
    psych::container_sandbox_options container;
    if (const char* image = std::getenv("PSYCH_CONFORMANCE_IMAGE"); image && *image) container.image = image;
    container.run_as_uid = container.run_as_gid = suite_uid;
    container.temp_root = temp_root();
    psych::local_sandbox_options container_view = isolated;
    container_view.backend = "container";
    backend_under_test remote{"remote", isolated, std::nullopt};
    remote.remote = true;
    // ISOLATED with a pool (docs/pools.md): every case runs on a sandbox prepared before its
    // request, claimed and narrowed to the case's terms, so what a case observes of a claimed
    // sandbox is checked exactly as of one built on request.
    psych::local_sandbox_options prepared = isolated;
    prepared.pool.size = 1;
#ifdef __APPLE__
    // macOS has one local backend (docs/macos-launcher.md): every case runs against it alone.
    psych::local_sandbox_options macos = process;
    macos.backend = "macos-process";
    return std::vector<backend_under_test>{{"macos-process", macos, std::nullopt}};
#else
    return std::vector<backend_under_test>{{"linux-process", process, std::nullopt},
                                           {"linux-isolated", isolated, std::nullopt},
                                           {"linux-isolated-prepared", prepared, std::nullopt},
                                           {"container", container_view, container},
                                           remote};
#endif
  }();
  return all;
}
#pragma GCC diagnostic pop

backend_under_test with_uid_range(const backend_under_test& backend, std::int64_t first, std::int64_t count) {
  auto ranged = backend;
  const auto draw_from_range = [&](auto& options) {
    options.run_as_uid.reset();
    options.run_as_gid.reset();
    options.run_as_range.first = first;
    options.run_as_range.count = count;
  };
  draw_from_range(ranged.options);
  ranged.options.allow_same_uid = false;
  if (ranged.container) draw_from_range(*ranged.container);
  return ranged;
}

std::vector<std::string> containers_left() {
  // Found once: `ps` is the only question per case.
  static const auto runtime = psych::host::find_container_runtime(std::nullopt);
  if (!runtime) return {};
  auto listed = runtime.value().run({"ps", "--all", "--quiet", "--filter", "label=psych.execution"});
  if (!listed) return {"(" + runtime.value().name + " ps could not be run: " + listed.error().message() + ")"};
  std::vector<std::string> ids;
  std::istringstream lines(listed.value().stdout_text);
  for (std::string id; std::getline(lines, id);)
    if (!id.empty()) ids.push_back(id);
  return ids;
}

namespace {

void check_no_container_left(const backend_under_test& backend) {
  if (!backend.container) return;
  const auto containers = containers_left();
  CHECK_MESSAGE(containers.empty(), "containers left: " << joined(containers));
}

/// A container sandbox shared by every case with the same options: container_sandbox() probes
/// the backend by starting a container, which each case would otherwise pay for again. The
/// backend keeps no state of one execution between runs, so sharing it changes nothing a case
/// can observe but the time.
class shared_sandbox final : public psych::sandbox {
 public:
  explicit shared_sandbox(std::shared_ptr<psych::sandbox> inner) : inner_(std::move(inner)) {}
  psych::backend_offer offer() const override { return inner_->offer(); }
  psych::description describe() override { return inner_->describe(); }
  psych::sandbox_result run(const psych::run_request& request, std::stop_token stop) override {
    return inner_->run(request, std::move(stop));
  }

 private:
  std::shared_ptr<psych::sandbox> inner_;
};

psych::result<std::unique_ptr<psych::sandbox>> shared_container_sandbox(const psych::container_sandbox_options& o) {
  static std::mutex lock;
  static std::map<std::string, std::shared_ptr<psych::sandbox>> built;
  const auto key = fmt::format("{}|{}|{}|{}|{}|{}|{}", o.image, o.run_as_uid.value_or(-1), o.run_as_gid.value_or(-1),
                               o.run_as_range.first, o.run_as_range.count, o.temp_root,
                               psych::protocol::encode_json(o.limit_ceiling));
  std::lock_guard hold(lock);
  auto found = built.find(key);
  if (found == built.end()) {
    auto made = psych::container_sandbox(o);
    if (!made) return made.error();
    found = built.emplace(key, std::shared_ptr<psych::sandbox>(std::move(made).value())).first;
  }
  return std::unique_ptr<psych::sandbox>(std::make_unique<shared_sandbox>(found->second));
}

/// One psych serve per set of backend options, over TLS on an ephemeral loopback port with a
/// throwaway self-signed certificate and token, kept for the whole run (a service probes its
/// backend when it starts, which each case would otherwise pay for again).
struct remote_service {
  std::unique_ptr<psych::sandbox_service> service;
  std::string url;
};

struct remote_services {
  std::mutex lock;
  std::string dir;  ///< the certificate, its key and the token file
  std::string token;
  std::map<std::string, remote_service> by_options;

  psych::result<void> prepare() {
    if (!dir.empty()) return psych::success();
    std::string pattern = std::filesystem::temp_directory_path().string() + "/psych-conformance-tls-XXXXXX";
    if (!::mkdtemp(pattern.data())) return psych::fail_with(psych::error_kind::system_call_failed, "mkdtemp");
    dir = pattern;
    auto made = psych::host::run_command(
        {"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1"},
        {"PATH=/usr/bin:/bin"}, std::chrono::seconds(30));
    if (!made || made.value().exit_code != 0)
      return psych::fail_with(psych::error_kind::sandbox_setup,
                            "openssl could not make a test certificate: " +
                                (made ? made.value().stderr_text : made.error().message()));
    token = "conformance-" + psych::host::random_token();
    std::ofstream(dir + "/tokens") << "conformance " << token << "\n";
    return psych::success();
  }

  ~remote_services() { stop(); }
  void stop() {
    for (auto& [key, entry] : by_options) entry.service->shutdown();
    by_options.clear();
    if (!dir.empty()) std::filesystem::remove_all(dir);
    dir.clear();
  }
};

remote_services& services() {
  static remote_services all;
  return all;
}

psych::result<std::unique_ptr<psych::sandbox>> remote_sandbox_for(const psych::local_sandbox_options& o) {
  auto& all = services();
  std::lock_guard hold(all.lock);
  if (auto prepared = all.prepare(); !prepared) return prepared.error();
  const auto key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}", o.backend.value_or(""), o.run_as_uid.value_or(-1),
                               o.run_as_gid.value_or(-1), o.run_as_range.first, o.run_as_range.count, o.temp_root,
                               psych::protocol::encode_json(o.limit_ceiling), o.allow_same_uid,
                               o.python_bin.value_or(""));
  auto found = all.by_options.find(key);
  if (found == all.by_options.end()) {
    auto inner = psych::local_sandbox(o);
    if (!inner) return inner.error();
    auto service = psych::sandbox_service::start(std::move(inner).value(),
                                                 {.listen_host = "127.0.0.1",
                                                  .port = 0,
                                                  .tls_cert_file = all.dir + "/cert.pem",
                                                  .tls_key_file = all.dir + "/key.pem",
                                                  .token_file = all.dir + "/tokens",
                                                  .max_concurrent = 16,
                                                  // No probe of its own between cases: one running
                                                  // beside a case would be its leftover, and hold a uid.
                                                  .describe_refresh_seconds = 0,
                                                  .access_log = [](std::string_view) {}});
    if (!service) return service.error();
    const auto url = fmt::format("https://127.0.0.1:{}", service.value()->port());
    found = all.by_options.emplace(key, remote_service{std::move(service).value(), url}).first;
  }
  return psych::remote_sandbox({.url = found->second.url,
                                .token = [token = all.token]() -> psych::result<std::string> { return token; },
                                .ca_file = all.dir + "/cert.pem"});
}

}  // namespace

std::uint64_t remote_executions_left() {
  auto& all = services();
  std::lock_guard hold(all.lock);
  std::uint64_t left = 0;
  for (auto& [key, entry] : all.by_options) {
    const auto stats = entry.service->stats();
    left += stats.running + stats.queued;
  }
  return left;
}

void stop_remote_services() {
  auto& all = services();
  std::lock_guard hold(all.lock);
  all.stop();
}

psych::result<std::unique_ptr<psych::sandbox>> make_sandbox(const backend_under_test& backend) {
  if (backend.container) return shared_container_sandbox(*backend.container);
  if (backend.remote) return remote_sandbox_for(backend.options);
  return psych::local_sandbox(backend.options);
}

namespace detail {

bool reported_unavailable(const backend_under_test&) { return false; }

host_census census_before_case(const backend_under_test&) { return {}; }

void check_nothing_left_since(const backend_under_test& backend, const host_census&) {
  if (::geteuid() == 0) CHECK(processes_of(suite_uid).empty());
  check_no_container_left(backend);
  if (backend.remote) CHECK_MESSAGE(remote_executions_left() == 0, "executions left on the service");
  CHECK(abandoned_cgroups().empty());
}

}  // namespace detail

void set_host_variable(const std::string& name, const std::optional<std::string>& value) {
  if (value) {
    ::setenv(name.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name.c_str());
  }
}

bool process_running(std::int64_t pid) { return std::filesystem::exists("/proc/" + std::to_string(pid)); }

void after_the_run() {
  stop_remote_services();
  if (!temp_root_made) return;
  // Every execution emptied it (checked after each case); the root itself is ours to remove.
  std::error_code ec;
  std::filesystem::remove_all(temp_root(), ec);
}

namespace {

// The directories where a program of any uid may create entries, on a conventional host.
// Entries are reported where the uid owns them; a directory somebody else owns is walked
// only when it is itself world-writable (/tmp/.X11-unix, a test's sticky marker directory):
// only there could the uid have put something.
constexpr const char* shared_roots[] = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock"};

void find_owned(const std::filesystem::path& dir, std::int64_t uid, int depth, std::vector<std::string>& found) {
  std::error_code ec;
  namespace fs = std::filesystem;
  for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    if (static_cast<std::int64_t>(st.st_uid) == uid) {
      found.push_back(it->path().string());
    } else if (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) != 0 && depth < 4) {
      find_owned(it->path(), uid, depth + 1, found);
    }
  }
}

struct ipc_object {
  std::string kind;  // shm, msg, sem
  int id = 0;
};

/// System V IPC objects owned by uid, from /proc/sysvipc (columns located by their headers).
std::vector<ipc_object> ipc_objects_of(std::int64_t uid) {
  std::vector<ipc_object> found;
  for (const char* kind : {"shm", "msg", "sem"}) {
    std::ifstream table(std::string("/proc/sysvipc/") + kind);
    std::string header;
    if (!std::getline(table, header)) continue;
    std::vector<std::string> columns;
    std::istringstream names(header);
    for (std::string name; names >> name;) columns.push_back(name);
    const auto column = [&](const std::string& name) {
      return static_cast<std::size_t>(std::find(columns.begin(), columns.end(), name) - columns.begin());
    };
    const std::string id_name = std::string(kind) == "shm" ? "shmid" : std::string(kind) == "msg" ? "msqid" : "semid";
    const auto id_column = column(id_name);
    const auto uid_column = column("uid");
    for (std::string line; std::getline(table, line);) {
      std::vector<std::string> cells;
      std::istringstream words(line);
      for (std::string cell; words >> cell;) cells.push_back(cell);
      if (id_column < cells.size() && uid_column < cells.size() && std::stoll(cells[uid_column]) == uid)
        found.push_back({kind, std::stoi(cells[id_column])});
    }
  }
  return found;
}

}  // namespace

std::vector<std::string> host_leftovers_of(std::int64_t uid) {
  std::vector<std::string> found;
  for (const char* root : shared_roots) find_owned(root, uid, 0, found);
  for (const auto& object : ipc_objects_of(uid))
    found.push_back("System V " + object.kind + " id " + std::to_string(object.id));
  return found;
}

void remove_host_leftovers_of(std::int64_t uid) {
  std::vector<std::string> files;
  for (const char* root : shared_roots) find_owned(root, uid, 0, files);
  for (const auto& file : files) remove_tree_of_any_depth(file);
  for (const auto& object : ipc_objects_of(uid)) {
    if (object.kind == "shm") ::shmctl(object.id, IPC_RMID, nullptr);
    if (object.kind == "msg") ::msgctl(object.id, IPC_RMID, nullptr);
    if (object.kind == "sem") ::semctl(object.id, 0, IPC_RMID);
  }
}

void remove_tree_of_any_depth(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const char* argv[] = {"rm", "-rf", "--", path.c_str(), nullptr};
    ::execv("/bin/rm", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
}

namespace {

template <typename T>
std::vector<T> not_in(std::vector<T> now, const std::vector<T>& before) {
  std::erase_if(now, [&](const T& item) { return std::find(before.begin(), before.end(), item) != before.end(); });
  return now;
}

}  // namespace

std::vector<int> processes_left_by(const backend_under_test& backend) {
  return not_in(processes_of(backend.child_uid), backend.processes_before);
}

std::vector<std::string> host_leftovers_left_by(const backend_under_test& backend) {
  return not_in(host_leftovers_of(backend.child_uid), backend.host_entries_before);
}

namespace {

/// Ends the new processes (by pid) and removes the new entries of what the case left.
void remove_what_was_left(const backend_under_test& backend) {
  for (const int pid : processes_left_by(backend)) ::kill(pid, SIGKILL);
  for (const auto& entry : leftovers_in_temp_root()) remove_tree_of_any_depth(entry);
  if (::geteuid() == 0) {
    remove_host_leftovers_of(backend.child_uid);  // a root worker's: the uid is the case's alone
    return;
  }
  for (const auto& entry : host_leftovers_left_by(backend))
    if (entry.starts_with("/")) remove_tree_of_any_depth(entry);
}

}  // namespace

void for_each_backend_as(std::int64_t uid,
                         const std::function<void(psych::sandbox&, const backend_under_test&)>& body) {
  for (const auto& original : backends()) {
    SUBCASE(original.name.c_str()) {
      backend_under_test backend = original;
      if (::geteuid() == 0) {
        backend.options.run_as_uid = backend.options.run_as_gid = uid;
        backend.options.allow_same_uid = false;
        if (backend.container) backend.container->run_as_uid = backend.container->run_as_gid = uid;
        backend.child_uid = uid;
      } else if (!isolated(backend)) {
        psych::testing::skip_case(
            "an ordinary worker's linux-process child shares the worker's uid with no namespace between them; "
            "this case needs a uid of its own (a root worker)");
        continue;
      } else {
        backend.child_uid = ::geteuid();
        backend.processes_before = processes_of(backend.child_uid);
        backend.host_entries_before = host_leftovers_of(backend.child_uid);
      }
      auto sandbox = sandbox_or_skip(backend);
      if (!sandbox) continue;
      try {
        body(*sandbox, backend);
      } catch (...) {  // a REQUIRE ended the body: still leave nothing for the next case
        sandbox.reset();
        remove_what_was_left(backend);
        throw;
      }
      sandbox.reset();  // a pool's waiting sandboxes go with it, and must leave nothing either

      const auto processes = processes_left_by(backend);
      CHECK_MESSAGE(processes.empty(),
                    processes.size() << " process(es) of uid " << backend.child_uid << " outlived the case");
      const auto temp = leftovers_in_temp_root();
      CHECK_MESSAGE(temp.empty(), "left in the temp root:\n" << joined(temp));
      check_no_container_left(backend);
      if (backend.remote) CHECK_MESSAGE(remote_executions_left() == 0, "executions left on the service");
      const auto host = host_leftovers_left_by(backend);
      CHECK_MESSAGE(host.empty(), "uid " << backend.child_uid << " left on the host:\n" << joined(host));
      remove_what_was_left(backend);
    }
  }
}

}  // namespace conformance
