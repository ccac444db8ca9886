// psych serve at scale (docs/deploy.md, "HAProxy"): three replicas and HAProxy in front of them,
// its configuration the shipped deploy/haproxy/psych.cfg, all stood up and ended by the test. Load:
// many executions at once through one remote_sandbox client, each calling a binding whose every
// call is counted, so an execution run twice would show. Faults: a replica killed mid-load, one
// stopped (SIGTERM: it drains), HAProxy itself stopped mid-stream. Back-pressure: twice as many
// executions in flight as the replicas have slots.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cluster.hpp"
#include "load.hpp"
#include "host_leftovers.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "rss.hpp"
#include "skip.hpp"

namespace {

using namespace std::chrono_literals;
using namespace scale_test;
using clock = std::chrono::steady_clock;

/// Which replica ("r1".."r3") ran each execution id to its end (an `ok` POST of its stream in the
/// access log), and how many times; and on which replicas each id's results posts landed.
struct served {
  std::map<std::string, std::vector<std::string>> streams;  ///< id -> replicas whose log has its stream
  std::map<std::string, std::set<std::string>> results;     ///< id -> replicas that got its results
  std::map<std::string, int> per_replica;                   ///< replica -> executions run to their end
  int not_forwarded = 0;  ///< streams whose log line does not name HAProxy's client (X-Forwarded-For)
};

served read_access_logs(cluster& c) {
  served s;
  constexpr std::string_view route = "/v1/executions/";
  for (int i = 0; i < c.replica_count(); ++i) {
    const auto name = c.at(i).name();
    s.per_replica[name] = 0;
    for (const auto& line : c.at(i).access_log()) {
      if (line.method != "POST" || !line.path.starts_with(route)) continue;
      const auto rest = line.path.substr(route.size());
      if (const auto slash = rest.find('/'); slash != std::string::npos) {
        if (rest.substr(slash) == "/results") s.results[rest.substr(0, slash)].insert(name);
        continue;
      }
      s.streams[rest].push_back(name);
      if (line.forwarded_for != "127.0.0.1") ++s.not_forwarded;
      if (line.status == 200 && line.outcome == "ok") ++s.per_replica[name];
    }
  }
  return s;
}

/// Whether a failure says the program never ran: refused by the service (a describe that found it
/// gone, its 503) or by HAProxy (503: no replica it could send to).
bool never_ran(const outcome& o) {
  return o.message.find("did not run") != std::string::npos || o.message.find("nothing was sent") != std::string::npos;
}

double seconds_between(clock::time_point from, clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

long client_peak_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

/// The cluster and its client, or null with the case reported as skipped.
struct stood_up {
  std::unique_ptr<cluster> c;
  std::unique_ptr<psych::sandbox> client;
};
stood_up stand_up(scale_test::cluster_options options = {},
                  std::source_location where = std::source_location::current()) {
  std::string why;
  stood_up s;
  s.c = cluster::start(&why, options);
  if (!s.c) {
    psych::testing::skip_case(why, where);
    return s;
  }
  auto made = psych::remote_sandbox(client_options(*s.c));
  REQUIRE(made);
  s.client = std::move(made).value();
  REQUIRE(s.client->describe().ready);
  return s;
}

/// Nothing of the replicas outlives them: no process of the executions' uids (as root), no cgroup
/// of a launcher that is gone.
void check_nothing_left() {
  if (::geteuid() == 0)
    for (auto uid = cluster::first_uid; uid < cluster::first_uid + cluster::uid_count; ++uid)
      CHECK_MESSAGE(psych::testing::processes_of(uid).empty(), "a process of uid " << uid << " outlived the replicas");
  CHECK(psych::testing::abandoned_cgroups().empty());
}

/// After r2 has gone: waits for HAProxy to mark it down, leaves the load to the other two for
/// `alone`, restarts r2 and waits for it to be marked up, then until `more` executions have been
/// sent since. Empty, or what went wrong.
std::string rejoin(cluster& c, const std::atomic<std::size_t>& sent, std::chrono::seconds alone, std::size_t more,
                   clock::time_point& down_seen, clock::time_point& up_seen) {
  if (!c.wait_for_status("r2", "DOWN", 30s)) return "HAProxy did not mark r2 down within 30 s";
  down_seen = clock::now();
  std::this_thread::sleep_for(alone);
  std::string why;
  if (!c.restart(1, &why)) return why;
  if (!c.wait_for_status("r2", "UP", 30s)) return "HAProxy did not mark r2 up again within 30 s";
  up_seen = clock::now();
  const auto sent_at_up = sent.load();
  while (sent < sent_at_up + more && clock::now() < up_seen + 60s) std::this_thread::sleep_for(20ms);
  return {};
}


}  // namespace

TEST_CASE("scale: 600 executions, 24 at once, through HAProxy to three replicas: each runs once, where its id hashes") {
  const auto begun = clock::now();
  auto s = stand_up();
  if (!s.c) return;
  auto& c = *s.c;
  constexpr std::size_t executions = 600;
  marker side_effects(executions);

  const auto load_begun = clock::now();
  const auto done = run_load(*s.client, side_effects,
                             {.prefix = "scale-" + random_suffix(), .limit = executions, .program = marking_program});
  const double load_seconds = std::chrono::duration<double>(clock::now() - load_begun).count();
  REQUIRE(done.size() == executions);

  int completed = 0;
  for (std::size_t n = 0; n < done.size(); ++n) {
    const auto& o = done[n];
    CHECK_MESSAGE(o.ok, o.id << ": " << o.message);
    CHECK_MESSAGE(o.value == std::to_string(2 * n + 1), o.id << " gave " << o.value);
    CHECK_MESSAGE(side_effects.calls[n] == 1, o.id << "'s binding was called " << side_effects.calls[n] << " times");
    completed += o.ok && o.value == std::to_string(2 * n + 1) ? 1 : 0;
  }

  // Each execution's stream is in exactly one replica's access log, and its results went there too.
  const auto logs = read_access_logs(c);
  for (const auto& o : done) {
    const auto it = logs.streams.find(o.id);
    REQUIRE_MESSAGE(it != logs.streams.end(), o.id << " is in no replica's access log");
    CHECK_MESSAGE(it->second.size() == 1, o.id << " reached " << it->second.size() << " replicas");
    CHECK_MESSAGE(logs.results.at(o.id) == std::set<std::string>{it->second.front()},
                  o.id << "'s results went elsewhere than its stream");
  }
  CHECK_MESSAGE(logs.not_forwarded == 0, logs.not_forwarded << " streams were logged without their client's address");
  std::string split;
  for (const auto& [name, count] : logs.per_replica) {
    split += fmt::format("{}{} {}", split.empty() ? "" : ", ", name, count);
    CHECK_MESSAGE(count >= static_cast<int>(executions / 10), name << " ran only " << count << " executions");
  }

  // Peak memory: this client (24 executions at once) and each replica.
  const long client_kib = client_peak_kib();
  std::string replica_peaks;
  for (int i = 0; i < c.replica_count(); ++i) {
    const long kib = c.at(i).peak_kib();
    replica_peaks += fmt::format("{}{} {:.1f} MiB", i ? ", " : "", c.at(i).name(), static_cast<double>(kib) / 1024.0);
    if (psych::testing::rss_is_meaningful) CHECK_MESSAGE(kib < 256 * 1024, c.at(i).name() << " peaked at " << kib << " KiB");
  }
  if (psych::testing::rss_is_meaningful) CHECK_MESSAGE(client_kib < 256 * 1024, "the client peaked at " << client_kib << " KiB");
  MESSAGE(fmt::format("{} of {} executions completed in {:.1f} s ({:.1f}/s), 24 in flight; split {}; peak memory: "
                      "client {:.1f} MiB, {}; {:.1f} s in all",
                      completed, executions, load_seconds, executions / load_seconds, split, static_cast<double>(client_kib) / 1024.0,
                      replica_peaks, std::chrono::duration<double>(clock::now() - begun).count()));
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}

TEST_CASE("scale: a replica SIGKILLed mid-load costs only its executions, which are never re-sent; it rejoins") {
  auto s = stand_up();
  if (!s.c) return;
  auto& c = *s.c;
  constexpr std::size_t most = 3000;
  marker side_effects(most);
  // The call comes first, so an execution the kill cuts short has spent its side effect already.
  const auto program = [](long n) {
    return fmt::format("import time\nr = await call_tool('mark', {{'n': {}}})\ntime.sleep(0.2)\nr + 1\n", n);
  };

  std::atomic<std::size_t> sent{0};
  std::atomic<bool> keep_going{true};
  clock::time_point killed, down_seen, up_seen;
  long sessions_at_kill = 0;
  std::string controller_trouble;
  std::thread controller([&] {
    const auto fail = [&](std::string why) {
      controller_trouble = std::move(why);
      keep_going = false;
    };
    // Kill r2 while it runs executions: after some load, when HAProxy has streams open to it.
    const auto until = clock::now() + 60s;
    for (;;) {
      const auto states = c.executions_backend();
      const auto it = states.find("r2");
      if (sent >= 72 && it != states.end() && it->second.sessions >= 2) {
        sessions_at_kill = it->second.sessions;
        break;
      }
      if (clock::now() > until) return fail("r2 never had two executions running");
      std::this_thread::sleep_for(5ms);
    }
    if (!c.at(1).process().signal(SIGKILL)) return fail("kill(r2, SIGKILL) failed");
    killed = clock::now();
    c.at(1).process().wait(5s);
    if (auto trouble = rejoin(c, sent, 3s, 120, down_seen, up_seen); !trouble.empty()) return fail(trouble);
    keep_going = false;
  });
  const auto done = run_load(*s.client, side_effects,
                             {.prefix = "kill-" + random_suffix(),
                              .limit = most,
                              .program =
                                  [&](long n) {
                                    ++sent;
                                    return program(n);
                                  },
                              .more = [&] { return keep_going.load(); }});
  controller.join();
  REQUIRE_MESSAGE(controller_trouble.empty(), controller_trouble);

  const auto logs = read_access_logs(c);
  int lost = 0, refused = 0, after_down = 0, on_r2_after_up = 0;
  for (std::size_t n = 0; n < done.size(); ++n) {
    const auto& o = done[n];
    const int calls = side_effects.calls[n];
    CHECK_MESSAGE(calls <= 1, o.id << "'s binding was called " << calls << " times");
    const auto it = logs.streams.find(o.id);
    const auto reached = it == logs.streams.end() ? std::vector<std::string>{} : it->second;
    if (o.ok) {
      CHECK_MESSAGE(o.value == std::to_string(2 * n + 1), o.id << " gave " << o.value);
      CHECK_MESSAGE(reached.size() == 1, o.id << " reached " << reached.size() << " replicas");
      if (o.started > up_seen && reached == std::vector<std::string>{"r2"}) ++on_r2_after_up;
    } else {
      // A failure is the killed replica's: cut off (provider_error), or a describe that found it
      // gone (a refusal: nothing was sent). Either way it ran nowhere else and was not re-sent.
      const bool provider = o.kind == psych::failure_kind::provider_error;
      CHECK_MESSAGE((provider || o.message.find("nothing was sent") != std::string::npos),
                    o.id << ": " << o.message);
      lost += provider ? 1 : 0;
      refused += provider ? 0 : 1;
      CHECK_MESSAGE(o.started < down_seen, o.id << " failed though sent after HAProxy marked r2 down: " << o.message);
      for (const auto& name : reached) CHECK_MESSAGE(name == "r2", o.id << " failed, yet reached " << name);
    }
    if (o.started > down_seen) ++after_down;
  }
  CHECK_MESSAGE(lost >= 1, "the kill cut no execution short");
  CHECK(after_down > 0);
  CHECK_MESSAGE(on_r2_after_up > 0, "r2 took no load after its restart");
  MESSAGE(fmt::format("{} executions; r2 killed with {} streams open, marked down {:.1f} s later, up {:.1f} s after "
                      "its restart; {} ended provider_error, {} were refused before sending; {} sent after it was "
                      "marked down all succeeded; r2 ran {} after it rejoined",
                      done.size(), sessions_at_kill, seconds_between(killed, down_seen),
                      seconds_between(down_seen, up_seen) - 3, lost, refused, after_down,
                      on_r2_after_up));
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}

TEST_CASE("scale: a replica SIGTERMed mid-load drains: what runs there finishes or is cancelled at the deadline, "
          "and each client learns which") {
  constexpr int drain_seconds = 3;
  auto s = stand_up({.drain_seconds = drain_seconds});
  if (!s.c) return;
  auto& c = *s.c;
  constexpr std::size_t most = 2000;
  marker side_effects(most);
  // Every third execution sleeps past the drain deadline; the others end well within it. Each says
  // where it runs first, and calls mark last: a short one that runs when the replica is told to stop
  // makes its call while the replica drains, and must get its answer.
  const auto is_long = [](long n) { return n % 3 == 0; };
  constexpr int long_sleep = 6;
  const auto program = [&](long n) {
    return fmt::format(
        "import os, time\nawait call_tool('begin', {{'n': {0}, 'where': os.getcwd()}})\ntime.sleep({1})\n"
        "r = await call_tool('mark', {{'n': {0}}})\nr + 1\n",
        n, is_long(n) ? long_sleep : 1);
  };

  std::atomic<std::size_t> sent{0};
  std::atomic<bool> keep_going{true};
  clock::time_point stopped, exited, down_seen, up_seen;
  std::optional<int> exit_status;
  std::vector<std::pair<std::size_t, double>> running_at_stop;  // on r2 when it got SIGTERM, and its age then
  std::string controller_trouble;
  std::thread controller([&] {
    const auto fail = [&](std::string why) {
      controller_trouble = std::move(why);
      keep_going = false;
    };
    // SIGTERM r2 while it runs a short execution that has just begun (it will call mark during the
    // drain) and a long one with more than the drain deadline left.
    const auto until = clock::now() + 90s;
    for (;;) {
      running_at_stop.clear();
      bool fresh_short = false, young_long = false;
      const auto now = clock::now();
      for (std::size_t n = 0; n < std::min(sent.load(), most); ++n) {
        const auto b = side_effects.begun_of(n);
        if (b.replica != "r2" || side_effects.calls[n] > 0) continue;
        const double age = seconds_between(b.at, now);
        if (is_long(static_cast<long>(n)) ? age > long_sleep - 0.5 : age > 0.9) continue;  // ending on its own now
        running_at_stop.emplace_back(n, age);
        fresh_short = fresh_short || (!is_long(static_cast<long>(n)) && age < 0.4);
        young_long = young_long || (is_long(static_cast<long>(n)) && age < 2);
      }
      if (fresh_short && young_long) break;
      if (clock::now() > until) return fail("r2 never ran a fresh short and a young long execution at once");
      std::this_thread::sleep_for(20ms);
    }
    if (!c.at(1).process().signal(SIGTERM)) return fail("kill(r2, SIGTERM) failed");
    stopped = clock::now();
    exit_status = c.at(1).process().wait(std::chrono::seconds(drain_seconds + 15));
    exited = clock::now();
    if (auto trouble = rejoin(c, sent, 2s, 72, down_seen, up_seen); !trouble.empty()) return fail(trouble);
    keep_going = false;
  });
  const auto done = run_load(*s.client, side_effects,
                             {.prefix = "drain-" + random_suffix(),
                              .limit = most,
                              // As many as the slots, and a wall clock with room for a wait in
                              // HAProxy's queue (the hash does not spread them evenly).
                              .in_flight = static_cast<int>(cluster::max_concurrent) * c.replica_count(),
                              .program =
                                  [&](long n) {
                                    ++sent;
                                    return program(n);
                                  },
                              .more = [&] { return keep_going.load(); },
                              .wall_seconds = 20});
  controller.join();
  REQUIRE_MESSAGE(controller_trouble.empty(), controller_trouble);
  REQUIRE_MESSAGE(exit_status.has_value(), "r2 did not exit within its drain deadline and 15 s");
  CHECK_MESSAGE(*exit_status == 0, "r2 exited with status " << *exit_status << " after SIGTERM");

  const auto logs = read_access_logs(c);
  int finished = 0, cancelled = 0, refused = 0, on_r2_after_up = 0;
  for (std::size_t n = 0; n < done.size(); ++n) {
    const auto& o = done[n];
    const int calls = side_effects.calls[n];
    const auto it = logs.streams.find(o.id);
    const auto reached = it == logs.streams.end() ? std::vector<std::string>{} : it->second;
    if (o.ok) {
      ++finished;
      CHECK_MESSAGE(o.value == std::to_string(2 * n + 1), o.id << " gave " << o.value);
      CHECK_MESSAGE(calls == 1, o.id << "'s binding was called " << calls << " times");
      CHECK_MESSAGE(reached.size() == 1, o.id << " reached " << reached.size() << " replicas");
      if (o.started > up_seen && reached == std::vector<std::string>{"r2"}) ++on_r2_after_up;
    } else if (o.kind == psych::failure_kind::cancelled) {
      // The drain deadline's: it ran on r2 when r2 was told to stop, and it says it was cancelled.
      ++cancelled;
      CHECK_MESSAGE(reached == std::vector<std::string>{"r2"}, o.id << " was cancelled, yet reached other replicas");
      CHECK_MESSAGE(calls == 0, o.id << " was cancelled after its last call");
      CHECK_MESSAGE(o.started < stopped, o.id << " was cancelled though sent after the SIGTERM");
    } else {
      // Sent to r2 after it stopped taking executions and before HAProxy took it out: refused
      // before it ran, never a provider_error (nothing was cut short by the drain).
      ++refused;
      CHECK_MESSAGE(never_ran(o), o.id << ": " << o.message);
      CHECK_MESSAGE(calls == 0, o.id << " was refused, yet called its binding");
      CHECK_MESSAGE(side_effects.begun_of(n).replica.empty(), o.id << " was refused, yet began");
      // (It may have been sent before: it then waited in HAProxy's queue for a slot of r2.)
      CHECK_MESSAGE(o.ended > stopped, o.id << " was refused before the SIGTERM: " << o.message);
    }
  }
  // What ran on r2 at the SIGTERM: the short ones finished, their calls answered while r2 drained;
  // a long one with more than the drain deadline left was cancelled at the deadline, not later. A
  // long one already near its end (the 6 s sleep had less than the deadline left, give or take a
  // second of this host's timing) may finish within the drain instead; either way, by the deadline.
  int short_at_stop = 0, long_at_stop = 0;
  for (const auto& [n, age] : running_at_stop) {
    REQUIRE(n < done.size());
    const auto& o = done[n];
    if (is_long(static_cast<long>(n))) {
      ++long_at_stop;
      if (age < long_sleep - drain_seconds - 1)
        CHECK_MESSAGE(o.kind == psych::failure_kind::cancelled,
                      o.id << " (long, " << age << " s old on r2 at the SIGTERM): " << (o.ok ? "finished" : o.message));
      else
        CHECK_MESSAGE((o.ok || o.kind == psych::failure_kind::cancelled),
                      o.id << " (long, " << age << " s old on r2 at the SIGTERM): " << o.message);
      CHECK_MESSAGE(seconds_between(stopped, o.ended) < drain_seconds + 3,
                    o.id << " ended " << seconds_between(stopped, o.ended) << " s after the SIGTERM");
    } else {
      ++short_at_stop;
      CHECK_MESSAGE(o.ok, o.id << " (short, on r2 at the SIGTERM): " << o.message);
      CHECK_MESSAGE(side_effects.marked_at_of(n) > stopped, o.id << " made its call before the SIGTERM");
    }
  }
  CHECK(short_at_stop >= 1);
  CHECK(long_at_stop >= 1);
  CHECK_MESSAGE(on_r2_after_up > 0, "r2 took no load after its restart");
  MESSAGE(fmt::format("{} executions; r2 got SIGTERM running {} short and {} long ones, exited {:.1f} s later "
                      "(drain deadline {} s), was marked down {:.1f} s after the SIGTERM; {} finished, {} were "
                      "cancelled by the deadline, {} were refused before running; r2 ran {} after it rejoined",
                      done.size(), short_at_stop, long_at_stop, seconds_between(stopped, exited), drain_seconds,
                      seconds_between(stopped, down_seen), finished, cancelled, refused, on_r2_after_up));
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}

TEST_CASE("scale: HAProxy stopped mid-stream: each client gets provider_error at once, and the replicas cancel "
          "what ran") {
  auto s = stand_up();
  if (!s.c) return;
  auto& c = *s.c;
  // As many executions as the replicas have slots, each with a long sleep inside a long wall clock:
  // a client that waited for its clock would take over 20 s. The hash does not spread them evenly,
  // so some wait in HAProxy's queue for a busy replica: HAProxy is stopped once most have begun.
  const std::size_t executions = cluster::max_concurrent * static_cast<std::size_t>(c.replica_count());
  marker side_effects(executions);
  clock::time_point stopped;
  std::size_t begun = 0;
  std::string controller_trouble;
  std::thread controller([&] {
    const auto until = clock::now() + 60s;
    for (;;) {
      begun = 0;
      for (std::size_t n = 0; n < executions; ++n) begun += side_effects.begun_of(n).replica.empty() ? 0 : 1;
      if (begun >= executions / 2) break;
      if (clock::now() > until) {
        controller_trouble = fmt::format("only {} of {} executions began within 60 s", begun, executions);
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    stopped = clock::now();
    if (!c.haproxy().signal(SIGTERM)) controller_trouble = "kill(haproxy, SIGTERM) failed";
  });
  const auto done = run_load(
      *s.client, side_effects,
      {.prefix = "lb-" + random_suffix(),
       .limit = executions,
       .in_flight = static_cast<int>(executions),
       .program =
           [](long n) {
             return fmt::format(
                 "import os, time\nawait call_tool('begin', {{'n': {0}, 'where': os.getcwd()}})\ntime.sleep(20)\n"
                 "await call_tool('mark', {{'n': {0}}})\n",
                 n);
           },
       .wall_seconds = 25});
  controller.join();
  REQUIRE_MESSAGE(controller_trouble.empty(), controller_trouble);
  const auto haproxy_status = c.haproxy().wait(10s);
  double slowest = 0;
  for (std::size_t n = 0; n < done.size(); ++n) {
    const auto& o = done[n];
    CHECK_MESSAGE(o.kind == psych::failure_kind::provider_error, o.id << ": " << o.message);
    CHECK_MESSAGE(side_effects.calls[n] == 0, o.id << " ran to its end");
    slowest = std::max(slowest, seconds_between(stopped, o.ended));
  }
  CHECK_MESSAGE(slowest < 5, "a client learned of the stop only after " << slowest << " s");
  // Each replica saw its client (HAProxy) go and cancelled the execution: its stream is logged as
  // cancelled, long before the program's 20 s of sleep. (Those still in HAProxy's queue never
  // reached a replica.)
  // (Those that began must be among them; a few more may have started their program and not yet
  // said so.)
  bool all_cancelled = false;
  std::size_t logged = 0, logged_cancelled = 0;
  for (const auto until = clock::now() + 15s; !all_cancelled && clock::now() < until;
       std::this_thread::sleep_for(100ms)) {
    logged = logged_cancelled = 0;
    for (int i = 0; i < c.replica_count(); ++i)
      for (const auto& line : c.at(i).access_log())
        if (line.method == "POST" && line.path.starts_with("/v1/executions/lb-") &&
            line.path.find('/', std::string_view("/v1/executions/").size()) == std::string::npos) {
          ++logged;
          logged_cancelled += line.outcome.starts_with("cancelled") ? 1 : 0;
        }
    all_cancelled = logged >= begun && logged_cancelled == logged;
  }
  CHECK_MESSAGE(all_cancelled, logged_cancelled << " of the " << logged << " executions that reached a replica ("
                                               << begun << " had begun) are logged as cancelled");
  MESSAGE(fmt::format("HAProxy stopped (SIGTERM, exit status {}) with {} executions streaming ({} had reached a "
                      "replica, the others were in its queue): every client had provider_error within {:.2f} s; "
                      "the replicas cancelled {} of the {}",
                      haproxy_status ? std::to_string(*haproxy_status) : "none", executions, logged, slowest,
                      logged_cancelled, logged));
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}

TEST_CASE("scale: at twice the replicas' capacity, executions wait at HAProxy, none is refused or dropped") {
  auto s = stand_up();
  if (!s.c) return;
  auto& c = *s.c;
  const auto capacity = static_cast<int>(cluster::max_concurrent) * c.replica_count();
  // Each program reports when it began (time.time(), this host's clock), holds its slot for a
  // second, and calls mark once.
  const auto program = [](long n) {
    return fmt::format("import time\nbegan = time.time()\nawait call_tool('mark', {{'n': {}}})\ntime.sleep(1)\nbegan\n", n);
  };
  const auto delays_of = [](const std::vector<outcome>& done) {
    std::vector<double> delays;
    for (const auto& o : done)
      if (o.ok) delays.push_back(std::stod(o.value) - o.sent_epoch);
    std::sort(delays.begin(), delays.end());
    return delays;
  };
  const auto at = [](const std::vector<double>& sorted, double q) {
    return sorted.empty() ? 0.0 : sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
  };

  // Unloaded: one at a time, what sending and starting costs without waiting.
  marker quiet(6);
  const auto alone = run_load(*s.client, quiet, {.prefix = "alone-" + random_suffix(), .limit = 6, .in_flight = 1, .program = program});
  const auto alone_delays = delays_of(alone);
  REQUIRE(alone_delays.size() == alone.size());

  constexpr std::size_t executions = 120;
  marker side_effects(executions);
  const auto loaded = run_load(*s.client, side_effects,
                               {.prefix = "twice-" + random_suffix(), .limit = executions, .in_flight = 2 * capacity,
                                .program = program});
  REQUIRE(loaded.size() == executions);
  for (std::size_t n = 0; n < loaded.size(); ++n) {
    CHECK_MESSAGE(loaded[n].ok, loaded[n].id << ": " << loaded[n].message);
    CHECK_MESSAGE(side_effects.calls[n] == 1, loaded[n].id << "'s binding was called " << side_effects.calls[n] << " times");
  }
  // The excess waited in HAProxy's queues, and no replica turned one away as busy.
  long queued_peak = 0;
  for (const auto& [name, state] : c.executions_backend()) queued_peak = std::max(queued_peak, state.queued_peak);
  CHECK_MESSAGE(queued_peak > 0, "no execution ever waited in HAProxy's queue");
  int busy = 0;
  for (int i = 0; i < c.replica_count(); ++i)
    for (const auto& line : c.at(i).access_log()) busy += line.outcome == "busy" ? 1 : 0;
  CHECK_MESSAGE(busy == 0, busy << " executions were refused as busy by a replica");

  const auto delays = delays_of(loaded);
  MESSAGE(fmt::format("{} in flight against {} slots: {} executions all completed; from sending to the program's "
                      "start: median {:.0f} ms, p90 {:.0f} ms, max {:.0f} ms (alone: median {:.0f} ms); the "
                      "longest HAProxy queue of one replica: {}",
                      2 * capacity, capacity, loaded.size(), 1000 * at(delays, 0.5), 1000 * at(delays, 0.9),
                      1000 * at(delays, 1.0), 1000 * at(alone_delays, 0.5), queued_peak));
  // At twice the capacity an execution waits for about one program's slot time (1 s and its
  // start) in the mean; a queue that grew without bound would show in the tail.
  CHECK(at(delays, 0.5) > at(alone_delays, 0.5));
  CHECK(at(delays, 1.0) < 15);
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}
