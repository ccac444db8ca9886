// A downstream program: only the installed headers and psych::host.
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
  // Which launcher ran: the package's, wherever the prefix was moved to.
  std::printf("consumer: %s (isolation %s) launcher %s\n", result.value->text.c_str(),
              result.isolation ? std::string(psych::name_of(*result.isolation)).c_str() : "none",
              sandbox.value()->describe().launcher.c_str());
  return 0;
}
