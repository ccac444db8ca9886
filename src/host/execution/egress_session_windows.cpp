// network=allowlist on Windows: not offered. A Job Object holds no network of its own, so nothing
// would keep a program on the proxy (docs/network.md); the backends refuse the allowlist before a
// launch, and this refuses it again should one get this far.
#include "execution/egress_session.hpp"


namespace psych::host {

struct egress_session::handover {};

egress_session::egress_session() = default;
egress_session::~egress_session() = default;

result<void> egress_session::prepare(const execution_terms& terms, launcher_fds&) {
  if (terms.network != network_access::allowlist) return success();
  return fail_with(error_kind::sandbox_setup, "network=allowlist is not offered on Windows: a Job Object has no "
                                              "network of its own to hold a program to the proxy");
}

void egress_session::release_launcher_end() {}

result<void> egress_session::serve(const execution_terms&) { return success(); }

void egress_session::program_starts() {}

std::optional<egress_report> egress_session::finish() { return std::nullopt; }

}  // namespace psych::host
