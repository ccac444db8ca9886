// What a hostile program sends the allowlist's proxy before anything reaches the world: the first
// bytes of a CONNECT tunnel, read for the TLS ClientHello's server name (src/host/egress/
// client_hello.hpp), and a host as a CONNECT line or URL names it, read as a host pattern
// (psych/host_pattern.hpp). The first input byte picks which; the rest is the bytes.
//
// Oracle: the scan never reads past its input, and a prefix of a whole ClientHello is never judged
// differently from the whole but by "need more"; a server name is no longer than the input; a pattern
// that parses spells itself back to a pattern equal to it, and a canonical host is its own
// canonical form.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "egress/client_hello.hpp"
#include "input.hpp"
#include "psych/host_pattern.hpp"

namespace {

using psych::host::egress::hello_state;

void scan(std::string_view bytes) {
  const auto whole = psych::host::egress::scan_client_hello(bytes);
  if (whole.server_name) {
    PSYCH_FUZZ_CHECK(whole.state == hello_state::complete);
    PSYCH_FUZZ_CHECK(whole.server_name->size() <= bytes.size());
  }
  if (whole.state != hello_state::complete || bytes.empty()) return;
  // Every prefix of a whole hello is still a prefix: more is needed, never another verdict.
  for (const std::size_t cut : {bytes.size() / 2, bytes.size() - 1}) {
    const auto part = psych::host::egress::scan_client_hello(bytes.substr(0, cut));
    PSYCH_FUZZ_CHECK(part.state == hello_state::need_more || part.state == hello_state::complete);
  }
}

void pattern(std::string_view text) {
  if (const auto parsed = psych::parse_host_pattern(text)) {
    const std::string spelled = psych::to_string(parsed.value());
    const auto again = psych::parse_host_pattern(spelled);
    PSYCH_FUZZ_CHECK(again.has_value());
    PSYCH_FUZZ_CHECK(again.value() == parsed.value());
    PSYCH_FUZZ_CHECK(psych::intersect(parsed.value(), parsed.value()) == parsed.value());
  }
  if (const auto host = psych::canonicalize_host(text)) {
    const auto same = psych::canonicalize_host(host->host);
    PSYCH_FUZZ_CHECK(same.has_value());
    PSYCH_FUZZ_CHECK(same->host == host->host && same->ip_literal == host->ip_literal);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  psych::fuzz::input in{data, size};
  if (in.byte() % 2 == 0) scan(in.rest());
  else pattern(in.rest());
  return 0;
}
