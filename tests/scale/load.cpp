#include "load.hpp"

#include <thread>

#include <fmt/format.h>

namespace scale_test {

std::vector<outcome> run_load(psych::sandbox& client, marker& side_effects, const load& plan) {
  const auto limit = plan.limit;
  const auto& prefix = plan.prefix;
  const auto& program = plan.program;
  const auto& more = plan.more;
  const int in_flight = plan.in_flight;
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
        terms.limits.wall_seconds = plan.wall_seconds;
        psych::run_request request{.program = program(static_cast<long>(n)),
                                   .terms = terms,
                                   .bindings = side_effects.tools->offered_now(),
                                   .invoker = side_effects.tools.get()};
        o.id = fmt::format("{}-{}", prefix, n);
        request.run.execution_id = o.id;
        o.started = clock::now();
        o.sent_epoch = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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

}  // namespace scale_test
