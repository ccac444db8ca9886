// A worker for the crash case: runs one program whose only call never returns, in a Run journalled
// at argv[2], and waits to be SIGKILLed mid-call by the test. argv: backend log marker temp_root.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "invoker.hpp"
#include "psych/host/container_sandbox.hpp"
#include "psych/host/run_code.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s BACKEND LOG MARKER TEMP_ROOT\n", argv[0]);
    return 2;
  }
  psych::local_sandbox_options options;
  options.backend = argv[1];
  options.isolation = options.backend == "linux-namespaces" ? psych::isolation_level::isolated
                                                            : psych::isolation_level::process;
  options.run_as_uid = options.run_as_gid = 1'500'100;  // the suite's uid (backends_posix.hpp)
  options.allow_same_uid = ::geteuid() != 0;
  options.temp_root = argv[4];
  auto sandbox = [&] {
    if (options.backend != "container") return psych::local_sandbox(options);
    psych::container_sandbox_options container;
    if (const char* image = std::getenv("PSYCH_CONFORMANCE_IMAGE"); image && *image) container.image = image;
    container.run_as_uid = container.run_as_gid = *options.run_as_uid;
    container.temp_root = options.temp_root;
    options.isolation = psych::isolation_level::isolated;
    return psych::container_sandbox(container);
  }();
  auto log = psych::open_file_run_log(argv[2]);
  if (!sandbox || !log) {
    std::fprintf(stderr, "crash worker: %s\n", (!sandbox ? sandbox.error() : log.error()).message().c_str());
    return 1;
  }
  conformance::recording_invoker invoker;
  invoker.hang_marker = argv[3];
  conformance::listed_catalogue catalogue({{"deaf", "never returns"}, {"echo", ""}});
  auto run = psych::code_run::attempt(
      {.backend = sandbox.value().get(), .catalogue = &catalogue, .invoker = &invoker, .log = log.value().get()});
  if (!run) return 1;
  psych::execution_terms terms;
  terms.isolation = options.isolation;
  terms.limits.wall_seconds = 60.0;
  const auto result = run.value().run({.program = "return await call_tool('deaf', {})", .terms = terms});
  std::fprintf(stderr, "crash worker: the program ended, which it never should: %s\n",
               result.failure ? result.failure->message.c_str() : "ok");
  return 1;
}
