// The bearer token appears nowhere psych writes: results, captured bytes, failures, problems, error
// messages, the service's access log, the run log, and `psych run --remote --json`'s output, across
// a success with a binding call and every way a request can fail. And plaintext is refused where the
// token would cross a network in the clear.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "psych/host/function_tools.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/result_json.hpp"
#include "psych/host/run_log.hpp"
#include "skip.hpp"
#include "support.hpp"

using namespace remote_test;

namespace {

/// Everything psych produced in one scenario, as text to search.
struct collected {
  std::string text;
  std::vector<std::string> scenarios;

  void add(const std::string& what, const psych::sandbox_result& r) {
    scenarios.push_back(what);
    text += "\n== " + what + " ==\n" + psych::host::result_to_json(r);
    text += r.stdout_data;
    text += r.stderr_data;
    if (r.failure) {
      text += r.failure->message;
      text += r.failure->traceback;
    }
    for (const auto& p : r.problems) text += p;
    for (const auto& a : r.attachments) text += a.preview;
  }
  void add(const std::string& what, const psych::description& d) {
    scenarios.push_back(what);
    text += "\n== " + what + " ==\n" + psych::protocol::encode_json(d);
    for (const auto& p : d.problems) text += p;
  }
  void add(const std::string& what, const std::string& words) {
    scenarios.push_back(what);
    text += "\n== " + what + " ==\n" + words;
  }
};

/// A port on 127.0.0.1 that nothing listens on (bound, read, closed).
std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at);
  socklen_t size = sizeof at;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &size);
  ::close(fd);
  return ntohs(at.sin_port);
}

psych::function_tool lookup_tool() {
  psych::function_tool tool;
  tool.name = "lookup";
  tool.description = "an order's total, by SKU";
  tool.input_schema_json = R"({"type":"object","properties":{"sku":{"type":"string"}}})";
  tool.call = [](const psych::json_text& arguments, std::stop_token) -> psych::tool_answer<psych::json_text> {
    if (arguments.text.find("abc") == std::string::npos) return psych::tool_failed("no such order");
    return psych::json_text{R"({"sku":"abc","total":7})"};
  };
  return tool;
}

}  // namespace

TEST_CASE("credentials: the token appears nowhere psych writes") {
  std::string why;
  const auto* tls = test_certificate(&why);
  if (!tls) return psych::testing::skip_case(why);
  const auto* other_ca = other_certificate(&why);
  if (!other_ca) return psych::testing::skip_case(why);
  const auto token = fresh_token();
  const auto wrong = fresh_token();
  auto s = start_service({"alice " + token}, *tls, &why);
  if (!s) return psych::testing::skip_case(why);
  temp_dir dir("psych-remote-credentials");
  collected all;

  SUBCASE("in the library's results, errors, logs and run log") {
    // A success, with a binding call journalled in a file run log.
    auto tools = psych::function_tools::create({lookup_tool()});
    REQUIRE(tools);
    auto log = psych::open_file_run_log(dir.file("run.log"));
    REQUIRE(log);
    auto made = psych::remote_sandbox(client_options(s->url(), token, *tls));
    REQUIRE(made);
    all.add("describe, right token", made.value()->describe());
    psych::run_request request{.program = "order = await call_tool('lookup', {'sku': 'abc'})\n"
                                          "print('total', order['total'])\nreturn order",
                               .terms = short_terms(20),
                               .bindings = tools.value()->offered_now(),
                               .invoker = tools.value().get()};
    request.run.log = log.value().get();
    request.run.execution_id = "credentials-1";
    const auto ok = made.value()->run(request);
    CHECK_MESSAGE(ok.ok(), (ok.failure ? ok.failure->message : ""));
    REQUIRE(ok.value);
    CHECK(ok.value->text.find("\"total\":7") != std::string::npos);
    CHECK(ok.stdout_data == "total 7\n");
    CHECK(ok.bindings_spent.calls == 1);
    all.add("a run with a binding call", ok);
    const auto journal = read_file(dir.file("run.log"));
    CHECK(journal.find("lookup") != std::string::npos);  // the call was journalled here, on the client
    all.add("the run log", journal);

    // The wrong token: describe() and run() say 401, never what was sent.
    auto wrong_client = psych::remote_sandbox(client_options(s->url(), wrong, *tls));
    REQUIRE(wrong_client);
    const auto refused = wrong_client.value()->describe();
    CHECK_FALSE(refused.ready);
    all.add("describe, wrong token", refused);
    const auto r401 = wrong_client.value()->run({.program = "6*7", .terms = short_terms(5)});
    REQUIRE(r401.failure);
    CHECK(r401.failure->message.find("401") != std::string::npos);
    all.add("run, wrong token", r401);

    // A service that is down.
    auto down = psych::remote_sandbox(client_options("https://127.0.0.1:" + std::to_string(closed_port()), token, *tls));
    REQUIRE(down);
    const auto rdown = down.value()->run({.program = "6*7", .terms = short_terms(5)});
    REQUIRE(rdown.failure);
    all.add("run, service down", rdown);

    // https with a CA the service's certificate does not chain to.
    auto wrong_ca = psych::remote_sandbox(client_options(s->url(), token, *other_ca));
    REQUIRE(wrong_ca);
    const auto dca = wrong_ca.value()->describe();
    CHECK_FALSE(dca.ready);
    REQUIRE_FALSE(dca.problems.empty());
    CHECK(dca.problems.front().find("TLS") != std::string::npos);
    all.add("describe, wrong CA", dca);
    all.add("run, wrong CA", wrong_ca.value()->run({.program = "6*7", .terms = short_terms(5)}));

    // A 500 from a service that otherwise looks fine.
    {
      fake_service fake("status_500", *tls);
      REQUIRE(fake.started());
      auto to_fake = psych::remote_sandbox(client_options(fake.url(), token, *tls));
      REQUIRE(to_fake);
      const auto r500 = to_fake.value()->run({.program = "6*7", .terms = short_terms(5)});
      REQUIRE(r500.failure);
      CHECK(r500.failure->message.find("500") != std::string::npos);
      all.add("run, HTTP 500", r500);
    }

    // A resolver that returns something that cannot be a bearer token: refused, not quoted.
    auto odd = client_options(s->url(), token, *tls);
    odd.token = [&]() -> psych::result<std::string> { return token + " " + wrong; };
    auto odd_client = psych::remote_sandbox(odd);
    REQUIRE(odd_client);
    all.add("run, unusable token", odd_client.value()->run({.program = "6*7", .terms = short_terms(5)}));

    // Errors of remote_sandbox() itself.
    for (const char* url : {"http://192.0.2.7:8443", "ftp://127.0.0.1", "https://127.0.0.1:8443/path"}) {
      auto refused_url = psych::remote_sandbox(client_options(url, token, *tls));
      REQUIRE_FALSE(refused_url);
      all.add(std::string("remote_sandbox(") + url + ")", refused_url.error().message());
    }

    for (const auto& line : s->log->lines()) all.add("access log", line);
    // The access log names the credential, never the token.
    bool named = false;
    for (const auto& line : s->log->lines()) named = named || line.find("\"client\":\"alice\"") != std::string::npos;
    CHECK(named);
  }

  SUBCASE("in psych run --remote --json and psych describe --remote") {
    write_file(dir.file("token"), token + "\n");
    write_file(dir.file("wrong"), wrong + "\n");
    write_file(dir.file("prog.py"), "print('from the cli')\n6*7\n");
    const std::vector<std::string> common{"--remote", s->url(), "--ca", tls->cert};
    const auto cli = [&](std::vector<std::string> argv) {
      const auto ran = run_process(argv, std::chrono::seconds(60));
      CHECK_FALSE(ran.timed_out);
      return ran;
    };
    std::vector<std::string> ok{PSYCH_CLI, "run", "--json", "--wall-seconds", "20"};
    ok.insert(ok.end(), common.begin(), common.end());
    ok.insert(ok.end(), {"--token-command", "cat " + dir.file("token"), dir.file("prog.py")});
    const auto ran = cli(ok);
    CHECK_MESSAGE(ran.exit_code == 0, ran.output);
    CHECK(ran.output.find("\"value\":42") != std::string::npos);
    CHECK(ran.output.find("from the cli") != std::string::npos);
    all.add("psych run --remote --json", ran.output);

    std::vector<std::string> bad{PSYCH_CLI, "run", "--json"};
    bad.insert(bad.end(), common.begin(), common.end());
    bad.insert(bad.end(), {"--token-command", "cat " + dir.file("wrong"), dir.file("prog.py")});
    const auto refused = cli(bad);
    CHECK(refused.exit_code != 0);
    CHECK(refused.output.find("401") != std::string::npos);
    all.add("psych run --remote --json, wrong token", refused.output);

    std::vector<std::string> describe{PSYCH_CLI, "describe", "--json"};
    describe.insert(describe.end(), common.begin(), common.end());
    describe.insert(describe.end(), {"--token-command", "cat " + dir.file("token")});
    const auto described = cli(describe);
    CHECK_MESSAGE(described.exit_code == 0, described.output);
    all.add("psych describe --remote --json", described.output);

    std::vector<std::string> failing_command{PSYCH_CLI, "run", "--json"};
    failing_command.insert(failing_command.end(), common.begin(), common.end());
    failing_command.insert(failing_command.end(),
                           {"--token-command", "echo " + wrong + "; exit 3", dir.file("prog.py")});
    const auto failed = cli(failing_command);
    CHECK(failed.exit_code != 0);
    all.add("psych run, a token command that fails after printing", failed.output);
    for (const auto& line : s->log->lines()) all.add("access log", line);
  }

  MESSAGE("searched " << all.text.size() << " bytes of " << all.scenarios.size() << " outputs for the tokens");
  CHECK(all.text.size() > 1000);
  CHECK_MESSAGE(all.text.find(token) == std::string::npos, "the token leaked:\n" << all.text);
  CHECK_MESSAGE(all.text.find(wrong) == std::string::npos, "the wrong token leaked:\n" << all.text);
  CHECK(s->service->stats().running == 0);
}

TEST_CASE("credentials: plaintext is refused where the token would leave the machine") {
  const auto token = fresh_token();
  const auto resolver = [token]() -> psych::result<std::string> { return token; };
  // Nothing is sent by remote_sandbox() itself: these only build a client.
  auto far = psych::remote_sandbox({.url = "http://192.0.2.7:8443", .token = resolver});
  REQUIRE_FALSE(far);
  CHECK(far.error().kind == psych::error_kind::sandbox_setup);
  CHECK(far.error().message().find("plaintext") != std::string::npos);
  CHECK(far.error().message().find(token) == std::string::npos);
  CHECK(psych::remote_sandbox({.url = "http://192.0.2.7:8443", .token = resolver, .allow_insecure_http = true}));
  CHECK(psych::remote_sandbox({.url = "http://127.0.0.1:9", .token = resolver}));
  CHECK(psych::remote_sandbox({.url = "http://127.0.0.53:9", .token = resolver}));
  CHECK(psych::remote_sandbox({.url = "http://localhost:9", .token = resolver}));
  CHECK(psych::remote_sandbox({.url = "http://[::1]:9", .token = resolver}));
  CHECK_FALSE(psych::remote_sandbox({.url = "http://localhost.example:9", .token = resolver}));
  CHECK_FALSE(psych::remote_sandbox({.url = "http://127.0.0.1.example:9", .token = resolver}));

  // The service: plaintext on an address that is not loopback is refused before anything binds.
  temp_dir dir("psych-remote-plain");
  write_file(dir.file("tokens"), "alice " + token + "\n");
  for (const char* host : {"0.0.0.0", "192.0.2.7", "::"}) {
    CAPTURE(host);
    auto backend = local_backend();
    if (!backend) return psych::testing::skip_case("the local linux-process backend cannot be made here");
    psych::sandbox_service_options options;
    options.listen_host = host;
    options.port = 0;
    options.token_file = dir.file("tokens");
    auto refused = psych::sandbox_service::start(std::move(backend), options);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == psych::error_kind::sandbox_setup);
    CHECK(refused.error().message().find("plaintext") != std::string::npos);
  }
  // Plaintext on loopback is allowed (and answers).
  auto backend = local_backend();
  REQUIRE(backend);
  psych::sandbox_service_options options;
  options.port = 0;
  options.token_file = dir.file("tokens");
  options.access_log = [](std::string_view) {};
  auto plain = psych::sandbox_service::start(std::move(backend), options);
  REQUIRE(plain);
  auto client = psych::remote_sandbox({.url = "http://127.0.0.1:" + std::to_string(plain.value()->port()),
                                       .token = resolver});
  REQUIRE(client);
  const auto d = client.value()->describe();
  CHECK(d.ready);
  const auto r = client.value()->run({.program = "6*7", .terms = short_terms(10)});
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  plain.value()->shutdown();
}
