// The worker test_run_log.cpp SIGKILLs at random points: one Attempt of a Run whose file log is
// argv[1], running a real program in the local sandbox over and over (sequential calls and
// gathered ones) until it is killed. Its one tool writes the call's id to argv[2] (O_APPEND, one
// write) when it is invoked, so the test can tell which calls really ran. With --resume-only it
// opens the Attempt (which marks the calls an earlier one left in flight UNKNOWN) and exits;
// otherwise it writes one byte to descriptor 3, if open, when its tool first runs.
//
// run_log_crash_worker LOG MARKERS TEMP_ROOT [--resume-only]
// Exit status: killed, or 0 after --resume-only; 2 when no sandbox can be made here (the test
// skips); 1 for anything else, with the reason on stderr.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <variant>

#include "psych/host/run_code.hpp"
#include "psych/host/run_log.hpp"
#include "psych/host/sandbox.hpp"

namespace {

/// The catalogue of one tool, which leaves a marker before it answers.
class marking_tool final : public psych::tool_catalogue, public psych::tool_invoker {
 public:
  explicit marking_tool(int markers) : markers_{markers} {}
  std::vector<psych::binding> offered_now() override { return {{"mark", "leaves a marker"}}; }
  psych::call_permission permit(const psych::tool_call&) override { return psych::call_permission::allow(); }
  void invoke(const psych::tool_call& call, std::stop_token, std::function<void(psych::tool_outcome)> done) override {
    const std::string line = std::string(call.call_id) + "\n";
    if (::write(markers_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      std::perror("run_log_crash_worker: write marker");
      ::_exit(1);
    }
    if (!said_ready_) {  // to the test, on descriptor 3 when it gave one: the calls have begun
      said_ready_ = true;
      const char ready = 'r';
      if (::write(3, &ready, 1) != 1 && errno != EBADF) ::_exit(1);
    }
    done(psych::tool_outcome::value("1"));
  }

 private:
  int markers_;
  bool said_ready_ = false;
};

int fail(const std::string& why) {
  std::fprintf(stderr, "run_log_crash_worker: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return fail("usage: run_log_crash_worker LOG MARKERS TEMP_ROOT [--resume-only]");
  const bool resume_only = argc > 4 && std::string(argv[4]) == "--resume-only";
  auto log = psych::open_file_run_log(argv[1]);
  if (!log) return fail(log.error().message());
  const int markers = ::open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (markers < 0) return fail("cannot open the markers file");
  marking_tool tool{markers};

  psych::local_sandbox_options options;
  options.backend = "linux-process";  // the quickest to start: what is under test is the host's log
  options.temp_root = argv[3];
  auto made = psych::local_sandbox(options);
  if (!made) {
    std::fprintf(stderr, "run_log_crash_worker: no sandbox here: %s\n", made.error().message().c_str());
    return 2;
  }
  auto& sandbox = *made.value();
  const auto offer = sandbox.offer();
  const auto terms = psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {});
  if (!std::holds_alternative<psych::execution_terms>(terms)) return fail("the sandbox offers no terms");

  auto attempt = psych::code_run::attempt({.backend = &sandbox,
                                           .catalogue = &tool,
                                           .invoker = &tool,
                                           .log = log.value().get(),
                                           .budget = {.max_calls = 1u << 30, .max_run_calls = 1u << 30}});
  if (!attempt) return fail(attempt.error().message());
  if (resume_only) return 0;
  const std::string program =
      "import asyncio\n"
      "for _ in range(20):\n"
      "    for _ in range(3):\n"
      "        await call_tool('mark', {})\n"
      "    await asyncio.gather(*(call_tool('mark', {}) for _ in range(20)))\n"
      "return 1";
  for (;;) {
    const auto result = attempt.value().run({.program = program, .terms = std::get<psych::execution_terms>(terms)});
    if (!result.ok()) return fail(result.failure ? result.failure->message : "the program failed");
  }
}
