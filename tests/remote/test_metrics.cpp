// GET /metrics: what an operator scrapes counts exactly what the service did, in valid Prometheus
// text, by closed labels only, and carries nothing a client sent: no token, program, execution id,
// tenant, path or error message.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "service/prometheus_text.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "raw_client.hpp"
#include "support.hpp"

using namespace remote_test;

namespace {

/// One scrape, its syntax CHECKed line by line: the samples by series ("name{labels}" as written),
/// in order, and each family's type.
struct scrape {
  std::vector<std::pair<std::string, double>> samples;
  std::map<std::string, std::string> types;

  /// The series' value, REQUIREd to be there once.
  double operator[](const std::string& series) const {
    const double* found = nullptr;
    for (const auto& [name, value] : samples)
      if (name == series) {
        REQUIRE_MESSAGE(!found, series << " appears twice");
        found = &value;
      }
    REQUIRE_MESSAGE(found, series << " is missing");
    return *found;
  }
  /// The samples of one family whose series start with `prefix`, in order.
  std::vector<std::pair<std::string, double>> starting(const std::string& prefix) const {
    std::vector<std::pair<std::string, double>> out;
    for (const auto& sample : samples)
      if (sample.first.starts_with(prefix)) out.push_back(sample);
    return out;
  }
};

scrape parse_exposition(const std::string& text) {
  static const std::string name = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  static const std::string label = R"([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")";
  static const std::regex help("# HELP (" + name + ") [^\\n]+");
  static const std::regex type("# TYPE (" + name + ") (counter|gauge|histogram)");
  static const std::regex sample("(" + name + ")((?:\\{" + label + "(?:," + label + ")*\\})?) " +
                                 R"(([-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|\+Inf|-Inf|NaN))");
  scrape out;
  CHECK(text.ends_with('\n'));
  std::string family, helped;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      helped = m[1];
    } else if (std::regex_match(line, m, type)) {
      CHECK_MESSAGE(m[1] == helped, "# TYPE without its # HELP first: " << line);
      CHECK_MESSAGE(!out.types.contains(m[1]), "a family typed twice: " << line);
      family = m[1];
      out.types[family] = m[2];
      if (m[2] == "counter") CHECK_MESSAGE(family.ends_with("_total"), "a counter not named _total: " << line);
    } else if (std::regex_match(line, m, sample)) {
      const std::string metric = m[1];
      const bool histogram = out.types[family] == "histogram";
      const bool in_family =
          metric == family ||
          (histogram && (metric == family + "_bucket" || metric == family + "_sum" || metric == family + "_count"));
      CHECK_MESSAGE(in_family, "a sample outside its family's # TYPE: " << line);
      const std::string value = m[3];
      const double number = value == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(value);
      out.samples.emplace_back(metric + std::string(m[2]), number);
    } else {
      FAIL_CHECK("not exposition syntax: \"" << line << "\"");
    }
  }
  return out;
}

/// Buckets cumulative and non-decreasing, the last `+Inf`, equal to `_count`; the count's value.
double check_histogram(const scrape& s, const std::string& family) {
  const auto buckets = s.starting(family + "_bucket{");
  REQUIRE(buckets.size() >= 2);
  for (std::size_t i = 1; i < buckets.size(); ++i)
    CHECK_MESSAGE(buckets[i].second >= buckets[i - 1].second, buckets[i].first << " < " << buckets[i - 1].first);
  CHECK(buckets.back().first == family + "_bucket{le=\"+Inf\"}");
  CHECK(buckets.back().second == s[family + "_count"]);
  return s[family + "_count"];
}

struct metrics_response {
  std::string content_type, body;
};

metrics_response get_metrics(std::uint16_t port, const header_list& headers = {}) {
  std::string why;
  const auto response = raw_request(port, "GET", "/metrics", headers, {}, &why);
  REQUIRE_MESSAGE(response, why);
  REQUIRE_MESSAGE(response->status == 200, response->body);
  return {response->content_type, response->body};
}

}  // namespace

TEST_CASE("metrics: a value, a raise, a wall-clock limit, a busy refusal and an unauthorized request, each counted") {
  const auto token = fresh_token();
  auto s = service_or_skip({"scraped " + token}, [](psych::sandbox_service_options& o) {
    o.max_concurrent = 1;
    o.max_queued = 0;  // so that a second execution is refused busy at once
  });
  if (!s) return;
  const auto started_at = std::chrono::system_clock::now();
  const auto port = s->service->port();
  // Marks planted in everything a client sends: none may come out in the metrics.
  const std::string mark = fresh_token().substr(4);
  const std::string program_mark = "program-" + mark, error_mark = "error-" + mark, id_mark = "id-" + mark,
                    tenant_mark = "tenant-" + mark, path_mark = "path-" + mark, wrong_token = "wrong-" + mark;
  auto options = client_options(*s, token);
  options.wall_clock_slack_seconds = 10;  // the service's clock must be the one that fires
  const auto client = ready_client(options);
  const auto request = [&](const std::string& program, double wall, const std::string& id) {
    psych::run_request r{.program = program, .terms = short_terms(wall), .tenant = tenant_mark};
    r.run.execution_id = id_mark + "-" + id;
    return r;
  };

  const auto answered = client->run(request("'" + program_mark + "'\n6 * 7\n", 20, "value"));
  REQUIRE_MESSAGE(answered.ok(), (answered.failure ? answered.failure->message : ""));
  CHECK(answered.value->text == "42");
  const auto raised = client->run(request("raise ValueError('" + error_mark + "')\n", 20, "raise"));
  REQUIRE(raised.failure);
  CHECK(raised.failure->kind == psych::failure_kind::exception);
  CHECK(raised.failure->message.find(error_mark) != std::string::npos);  // so its absence below means something

  auto limited = std::async(std::launch::async, [&] {
    return client->run(request("import time\ntime.sleep(30)\n", 2, "limit"));
  });
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));
  const header_list authorized{{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
  const auto busy = raw_request(port, "POST", "/v1/executions/" + id_mark + "-busy", authorized,
                                psych::protocol::encode_json(psych::remote::execution_request{
                                    .version = std::string(psych::remote::protocol_version),
                                    .program = program_mark,
                                    .terms = short_terms(20),
                                    .tenant = tenant_mark}));
  REQUIRE(busy);
  CHECK(busy->status == 503);
  const auto timed_out = limited.get();
  REQUIRE(timed_out.failure);
  CHECK(timed_out.failure->kind == psych::failure_kind::timeout);
  CHECK(timed_out.limit_hit == psych::limit_name::wall_seconds);

  const auto unauthorized = raw_request(port, "GET", "/v1/describe", {{"Authorization", "Bearer " + wrong_token}});
  REQUIRE(unauthorized);
  CHECK(unauthorized->status == 401);
  const auto no_route = raw_request(port, "GET", "/v1/" + path_mark, {{"Authorization", "Bearer " + token}});
  REQUIRE(no_route);
  CHECK(no_route->status == 404);
  REQUIRE(eventually([&] { return s->service->stats().running == 0; }, std::chrono::seconds(5)));

  const auto got = get_metrics(port);
  INFO(got.body);
  CHECK(got.content_type == "text/plain; version=0.0.4; charset=utf-8");
  const auto m = parse_exposition(got.body);

  CHECK(m["psych_executions_started_total"] == 3);
  const std::map<std::string, double> finished{{"ok", 1}, {"exception", 1}, {"timeout", 1}};
  CHECK(m.starting("psych_executions_finished_total{").size() == 1 + psych::count_by<psych::failure_kind>::size);
  for (const auto& [series, n] : m.starting("psych_executions_finished_total{")) {
    const auto outcome = series.substr(series.find('"') + 1, series.rfind('"') - series.find('"') - 1);
    CHECK_MESSAGE(n == (finished.contains(outcome) ? finished.at(outcome) : 0), series);
  }
  CHECK(m["psych_executions_cancelled_in_queue_total"] == 0);
  for (const auto& [series, n] : m.starting("psych_limit_hits_total{"))
    CHECK_MESSAGE(n == (series == "psych_limit_hits_total{limit=\"wall_seconds\"}" ? 1 : 0), series);
  CHECK(m.starting("psych_limit_hits_total{").size() == 5);
  const std::map<std::string, double> refused{{"busy", 1}, {"unauthorized", 1}, {"not_found", 1}};
  CHECK(m.starting("psych_requests_refused_total{").size() == psych::count_by<psych::service_refusal>::size);
  for (const auto& [series, n] : m.starting("psych_requests_refused_total{")) {
    const auto reason = series.substr(series.find('"') + 1, series.rfind('"') - series.find('"') - 1);
    CHECK_MESSAGE(n == (refused.contains(reason) ? refused.at(reason) : 0), series);
  }
  CHECK(m["psych_executions_running"] == 0);
  CHECK(m["psych_executions_queued"] == 0);
  CHECK(m["psych_connections_open"] >= 1);  // the scrape's own
  CHECK(m["psych_executions_max_running"] == 1);
  CHECK(m["psych_executions_max_queued"] == 0);
  CHECK(m["psych_connections_max"] == 512);
  const auto epoch = [](auto t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
  CHECK(m["psych_service_start_time_seconds"] <= epoch(started_at) + 1);
  CHECK(m["psych_service_start_time_seconds"] >= epoch(started_at) - 60);

  // One observation per finished execution; the wall-clock one held its slot for 2 s or more.
  CHECK(check_histogram(m, "psych_execution_duration_seconds") == 3);
  CHECK(m["psych_execution_duration_seconds_sum"] >= 2);
  CHECK(m["psych_execution_duration_seconds_bucket{le=\"1\"}"] <= 2);
  CHECK(m["psych_execution_duration_seconds_bucket{le=\"300\"}"] == 3);

  // The metrics and stats() are one count.
  const auto stats = s->service->stats();
  CHECK(stats.executions_started == 3);
  CHECK(stats.executions_finished() == 3);
  CHECK(stats.finished_ok == 1);
  CHECK(stats.durations.count == 3);
  CHECK(stats.refused[psych::service_refusal::busy] == 1);

  for (const auto& secret : {token, program_mark, error_mark, id_mark, tenant_mark, path_mark, wrong_token, mark})
    CHECK_MESSAGE(got.body.find(secret) == std::string::npos, secret << " is in the metrics");
  check_no_children_left();
}

TEST_CASE("metrics: served to GET without a credential, like a health check; counted as nothing else") {
  auto s = service_or_skip({"scraped " + fresh_token()});  // a token no request below presents
  if (!s) return;
  const auto port = s->service->port();
  SUBCASE("no credential, and a wrong one, are both answered") {
    const auto bare = get_metrics(port);
    const auto wrong = get_metrics(port, {{"Authorization", "Bearer " + fresh_token()}});
    CHECK(bare.content_type == psych::prometheus::content_type);
    CHECK(parse_exposition(wrong.body)["psych_requests_refused_total{reason=\"unauthorized\"}"] == 0);
    CHECK(s->service->stats().refused[psych::service_refusal::unauthorized] == 0);
  }
  SUBCASE("another method, or a body, is a bad request") {
    const auto post = raw_request(port, "POST", "/metrics", {});
    REQUIRE(post);
    CHECK(post->status == 405);
    const auto with_body = raw_request(port, "GET", "/metrics", {}, "x");
    REQUIRE(with_body);
    CHECK(with_body->status == 400);
    CHECK(parse_exposition(get_metrics(port).body)["psych_requests_refused_total{reason=\"bad_request\"}"] == 2);
  }
  CHECK(s->service->stats().executions_started == 0);
}

TEST_CASE("metrics: the text writer escapes label values and help, and makes buckets cumulative") {
  psych::prometheus::text_writer out;
  out.family("x_total", psych::prometheus::metric_type::counter, "a \\ and a\nnewline");
  out.sample(std::uint64_t{3}, {{"a", "q\"b\\s\nn"}, {"b", "plain"}});
  out.family("d_seconds", psych::prometheus::metric_type::histogram, "h");
  const std::vector<double> bounds{0.5, 1};
  const std::vector<std::uint64_t> counts{2, 0};
  out.histogram(bounds, counts, 5, 7.25);
  out.family("g", psych::prometheus::metric_type::gauge, "g");
  out.sample(1.5);
  const auto text = std::move(out).take();
  CHECK(text ==
        "# HELP x_total a \\\\ and a\\nnewline\n# TYPE x_total counter\n"
        "x_total{a=\"q\\\"b\\\\s\\nn\",b=\"plain\"} 3\n"
        "# HELP d_seconds h\n# TYPE d_seconds histogram\n"
        "d_seconds_bucket{le=\"0.5\"} 2\nd_seconds_bucket{le=\"1\"} 2\nd_seconds_bucket{le=\"+Inf\"} 5\n"
        "d_seconds_sum 7.25\nd_seconds_count 5\n"
        "# HELP g g\n# TYPE g gauge\ng 1.5\n");
  const auto parsed = parse_exposition(text);
  CHECK(check_histogram(parsed, "d_seconds") == 5);
  CHECK(parsed["x_total{a=\"q\\\"b\\\\s\\nn\",b=\"plain\"}"] == 3);
}
