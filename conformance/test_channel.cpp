// The channel ending before `done`: no result can arrive any more, so the execution ends at
// once with `channel_closed`, not at the wall clock as a timeout; a signal of the interpreter's
// own still reads as a crash, at every level.
#include <unistd.h>

#include <chrono>

#include "backends_posix.hpp"

using namespace psych;
using conformance::backend_under_test;
using conformance::for_each_backend;

namespace {

using clock = std::chrono::steady_clock;

/// The execution's own processes are gone: none of its uid is left on the host.
void check_nothing_left(const backend_under_test& backend) {
  if (::geteuid() != 0) return;  // without root the child keeps the worker's uid, shared with this very test
  if (conformance::pooled(backend)) return;  // checked once the pool is gone (conformance::pooled)
  REQUIRE(backend.options.run_as_uid.has_value());  // the suite pins its uid, so its leftovers are findable
  const auto uid = *backend.options.run_as_uid;
  const auto left = conformance::processes_of(uid);
  CHECK_MESSAGE(left.empty(), left.size() << " process(es) of uid " << uid << " left");
}

}  // namespace

TEST_CASE("channel: a program that closes its channel and sleeps is ended at once") {
  for_each_backend([](sandbox& sb, const backend_under_test& backend) {
    const auto began = clock::now();
    const auto r = conformance::run(sb, "import os, time\nprint('closing', flush=True)\nos.close(3)\ntime.sleep(30)\n",
                                    {.wall_seconds = 20.0});
    const std::chrono::duration<double> took = clock::now() - began;
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::channel_closed);
    CHECK(r.failure->message.find("channel closed") != std::string::npos);
    CHECK_FALSE(r.limit_hit);
    CHECK_FALSE(r.cancelled);
    CHECK(took.count() < 5.0);
    CHECK(r.duration_seconds < 5.0);
    CHECK(r.stdout_data == "closing\n");  // what it wrote before is kept
    check_nothing_left(backend);
  });
}

TEST_CASE("channel: a program that closes its channel and returns normally ends with channel_closed") {
  for_each_backend([](sandbox& sb, const backend_under_test& backend) {
    const auto began = clock::now();
    const auto r = conformance::run(sb, "import os\nos.close(3)\nreturn 1\n", {.wall_seconds = 20.0});
    const std::chrono::duration<double> took = clock::now() - began;
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::channel_closed);
    CHECK_FALSE(r.value);  // the value it returned had no way to travel
    CHECK_FALSE(r.limit_hit);
    CHECK(took.count() < 5.0);
    check_nothing_left(backend);
  });
}

TEST_CASE("channel: an interpreter killed by a signal of its own is a crash, though its channel closed first") {
  for_each_backend([](sandbox& sb, const backend_under_test& backend) {
    const auto r = conformance::run(sb, "import os, signal\nos.kill(os.getpid(), signal.SIGABRT)\n",
                                    {.wall_seconds = 20.0});
    REQUIRE(r.failure);
    CHECK(r.duration_seconds < 5.0);
    check_nothing_left(backend);
    // At ISOLATED the interpreter's death reaches the host by the sandbox's init, which reports it
    // and then exits; the host waits for that report before it cancels, so init is not killed
    // with the signal still untold.
    CHECK(r.failure->kind == failure_kind::crashed);
    CHECK(r.failure->message.find("killed by SIGABRT") != std::string::npos);
  });
}
