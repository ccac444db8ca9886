#include "load.hpp"

#include <thread>

#include <fmt/format.h>

namespace scale_test {
namespace {

/// The replica an execution's working directory names: the cluster's children/<replica>/...
std::string replica_of(std::string_view where) {
  constexpr std::string_view under = "/children/";
  const auto at = where.find(under);
  if (at == std::string_view::npos) return "?";
  const auto rest = where.substr(at + under.size());
  return std::string(rest.substr(0, rest.find('/')));
}

}  // namespace

marker::marker(std::size_t executions) : calls(executions), begun(executions), marked_at(executions) {
  tools = psych::function_tools::create(
              {psych::typed_tool<mark_args>("mark", "counts that execution n ran",
                                            [this](const mark_args& a, std::stop_token) { return mark(a); }),
               psych::typed_tool<begin_args>("begin", "records where execution n runs",
                                             [this](const begin_args& a, std::stop_token) { return begin(a); })},
              8)
              .value();
}

psych::tool_answer<long> marker::mark(const mark_args& a) {
  if (a.n >= 0 && static_cast<std::size_t>(a.n) < calls.size()) {
    std::lock_guard lock(mutex);
    marked_at[static_cast<std::size_t>(a.n)] = clock::now();
    ++calls[static_cast<std::size_t>(a.n)];
  }
  return 2 * a.n;
}

psych::tool_answer<bool> marker::begin(const begin_args& a) {
  if (a.n < 0 || static_cast<std::size_t>(a.n) >= begun.size()) return false;
  std::lock_guard lock(mutex);
  begun[static_cast<std::size_t>(a.n)] = {replica_of(a.where), clock::now()};
  return true;
}

std::string marking_program(long n) { return fmt::format("r = await call_tool('mark', {{'n': {}}})\nr + 1\n", n); }

std::vector<outcome> run_load(psych::sandbox& client, marker& side_effects, const load& plan) {
  std::vector<outcome> out(plan.limit);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < plan.in_flight; ++t)
    threads.emplace_back([&] {
      for (;;) {
        if (!plan.more()) return;
        const auto n = next.fetch_add(1);
        if (n >= plan.limit) return;
        auto& o = out[n];
        psych::execution_terms terms;
        terms.isolation = psych::isolation_level::process;
        terms.limits.wall_seconds = plan.wall_seconds;
        psych::run_request request{.program = plan.program(static_cast<long>(n)),
                                   .terms = terms,
                                   .bindings = side_effects.tools->offered_now(),
                                   .invoker = side_effects.tools.get()};
        o.id = fmt::format("{}-{}", plan.prefix, n);
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
