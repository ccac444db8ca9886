// A downstream program: only the installed headers, psych::host and psych::remote.
#include <psych/host/remote_sandbox.hpp>
#include <psych/host/sandbox.hpp>

#include <cstdio>

int main() {
  auto sandbox = psych::local_sandbox({.allow_same_uid = true});
  if (!sandbox) {
    std::printf("consumer: %s\n", sandbox.error().message().c_str());
    return 1;
  }
  const auto offer = sandbox.value()->offer();
  const auto decision = psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {});
  const auto result =
      sandbox.value()->run({.program = "return 6 * 7", .terms = std::get<psych::execution_terms>(decision)});
  if (!result.value) {
    std::printf("consumer: no value (%s)\n", result.failure ? result.failure->message.c_str() : "?");
    return 1;
  }
  // psych::remote links from the package (TLS included); a credential over plaintext to a host that
  // is not loopback is refused before anything is sent (203.0.113.0/24 is TEST-NET-3: nothing).
  const auto remote = psych::remote_sandbox(
      {.url = "http://203.0.113.7:8080", .token = []() -> psych::result<std::string> { return std::string("t"); }});
  if (remote || remote.error().kind != psych::error_kind::sandbox_setup) {
    std::printf("consumer: remote_sandbox accepted a credential over plaintext to a remote host\n");
    return 1;
  }
  // Which launcher ran: the package's, wherever the prefix was moved to.
  std::printf("consumer: %s (isolation %s) launcher %s\n", result.value->text.c_str(),
              result.isolation ? std::string(psych::name_of(*result.isolation)).c_str() : "none",
              sandbox.value()->describe().launcher.c_str());
  return 0;
}
