// psych serve at scale (docs/deploy.md, "HAProxy"): three replicas and HAProxy in front of them,
// its configuration the shipped deploy/haproxy/psych.cfg, all stood up and ended by the test. Load:
// many executions at once through one remote_sandbox client, each calling a binding whose every
// call is counted, so an execution run twice would show. Faults: a replica killed mid-load.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "cluster.hpp"
#include "host_leftovers.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "rss.hpp"
#include "skip.hpp"

struct mark_args {
  long n = 0;
  static constexpr std::array<std::string_view, 1> required_members{"n"};
};
BOOST_HANA_ADAPT_STRUCT(mark_args, n);

namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using scale_test::cluster;

/// The bound tool: `mark(n)` answers 2n and counts its calls per n. A program that ran twice
/// would call it twice.
struct marker {
  explicit marker(std::size_t executions) : calls(executions) {
    tools = psych::function_tools::create(
                {psych::typed_tool<mark_args>("mark", "counts that execution n ran",
                                              [this](const mark_args& a, std::stop_token) -> psych::tool_answer<long> {
                                                if (a.n >= 0 && static_cast<std::size_t>(a.n) < calls.size())
                                                  ++calls[static_cast<std::size_t>(a.n)];
                                                return 2 * a.n;
                                              })},
                8)
                .value();
  }
  std::vector<std::atomic<int>> calls;
  std::unique_ptr<psych::function_tools> tools;
};

/// What one execution came back as, and when it was sent.
struct outcome {
  std::string id;
  bool ran = false;  ///< run() returned
  bool ok = false;
  std::optional<psych::failure_kind> kind;
  std::string value, message;
  clock::time_point started, ended;
};

/// Executions 0, 1, 2, ... through `client`, `in_flight` at a time, until `limit` or until
/// `more()` says no. Execution n runs `program(n)` under the id `prefix-n`.
std::vector<outcome> run_load(psych::sandbox& client, marker& side_effects, const std::string& prefix,
                              std::size_t limit, int in_flight, const std::function<std::string(long)>& program,
                              const std::function<bool()>& more = [] { return true; }) {
  std::vector<outcome> out(limit);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < in_flight; ++t)
    threads.emplace_back([&] {
      for (;;) {
        if (!more()) return;
        const auto n = next.fetch_add(1);
        if (n >= limit) return;
        auto& o = out[n];
        psych::execution_terms terms;
        terms.isolation = psych::isolation_level::process;
        terms.limits.wall_seconds = 10;
        psych::run_request request{.program = program(static_cast<long>(n)),
                                   .terms = terms,
                                   .bindings = side_effects.tools->offered_now(),
                                   .invoker = side_effects.tools.get()};
        o.id = fmt::format("{}-{}", prefix, n);
        request.run.execution_id = o.id;
        o.started = clock::now();
        const auto r = client.run(request);
        o.ended = clock::now();
        o.ran = true;
        o.ok = r.ok();
        if (r.failure) {
          o.kind = r.failure->kind;
          o.message = r.failure->message;
        }
        if (r.value) o.value = r.value->text;
      }
    });
  for (auto& t : threads) t.join();
  std::erase_if(out, [](const outcome& o) { return !o.ran; });
  return out;
}

/// Which replica ("r1".."r3") ran each execution id to its end (an `ok` POST of its stream in the
/// access log), and how many times; and on which replicas each id's results posts landed.
struct served {
  std::map<std::string, std::vector<std::string>> streams;  ///< id -> replicas whose log has its stream
  std::map<std::string, std::set<std::string>> results;     ///< id -> replicas that got its results
  std::map<std::string, int> per_replica;                   ///< replica -> executions run to their end
};

served read_access_logs(cluster& c) {
  served s;
  constexpr std::string_view route = "/v1/executions/";
  for (int i = 0; i < cluster::replicas; ++i) {
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
      if (line.status == 200 && line.outcome == "ok") ++s.per_replica[name];
    }
  }
  return s;
}

psych::remote_sandbox_options client_options(const cluster& c) {
  psych::remote_sandbox_options o;
  o.url = c.url();
  o.token = [token = c.token()]() -> psych::result<std::string> { return token; };
  o.ca_file = c.ca_file();
  o.connect_timeout_seconds = 5;
  o.wall_clock_slack_seconds = 5;
  o.cancel_grace_seconds = 2;
  return o;
}

std::string random_suffix() {
  return fmt::format("{:08x}", static_cast<unsigned>(std::chrono::system_clock::now().time_since_epoch().count()));
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
stood_up stand_up(std::source_location where = std::source_location::current()) {
  std::string why;
  stood_up s;
  s.c = cluster::start(&why);
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

std::string calling(long n) { return fmt::format("r = await call_tool('mark', {{'n': {}}})\nr + 1\n", n); }

}  // namespace

TEST_CASE("scale: 600 executions, 24 at once, through HAProxy to three replicas: each runs once, where its id hashes") {
  const auto begun = clock::now();
  auto s = stand_up();
  if (!s.c) return;
  auto& c = *s.c;
  constexpr std::size_t executions = 600;
  marker side_effects(executions);

  const auto load_begun = clock::now();
  const auto done = run_load(*s.client, side_effects, "scale-" + random_suffix(), executions, 24, calling);
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
  std::string split;
  for (const auto& [name, count] : logs.per_replica) {
    split += fmt::format("{}{} {}", split.empty() ? "" : ", ", name, count);
    CHECK_MESSAGE(count >= static_cast<int>(executions / 10), name << " ran only " << count << " executions");
  }

  // Peak memory: this client (24 executions at once) and each replica.
  const long client_kib = client_peak_kib();
  std::string replica_peaks;
  for (int i = 0; i < cluster::replicas; ++i) {
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

  std::atomic<int> sent{0};
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
    if (!c.wait_for_status("r2", "DOWN", 30s)) return fail("HAProxy did not mark r2 down within 30 s");
    down_seen = clock::now();
    std::this_thread::sleep_for(3s);  // load on the other two alone
    std::string why;
    if (!c.restart(1, &why)) return fail(why);
    if (!c.wait_for_status("r2", "UP", 30s)) return fail("HAProxy did not mark r2 up again within 30 s");
    up_seen = clock::now();
    const auto sent_at_up = sent.load();
    while (sent < sent_at_up + 120 && clock::now() < up_seen + 60s) std::this_thread::sleep_for(20ms);
    keep_going = false;
  });
  const auto done = run_load(*s.client, side_effects, "kill-" + random_suffix(), most, 24, [&](long n) {
    ++sent;
    return program(n);
  }, [&] { return keep_going.load(); });
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
                      done.size(), sessions_at_kill, std::chrono::duration<double>(down_seen - killed).count(),
                      std::chrono::duration<double>(up_seen - down_seen).count() - 3, lost, refused, after_down,
                      on_r2_after_up));
  s.client.reset();
  s.c.reset();
  check_nothing_left();
}
