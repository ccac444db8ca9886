#pragma once
// network=allowlist (docs/network.md): the one thing the sandbox's network namespace reaches is
// psych's egress proxy, which runs on the host. The namespace holds only its loopback; init brings
// it up and listens there (127.0.0.1 and, where the namespace has IPv6, ::1, at the launch's
// egress_proxy_port), and the listening sockets go out to the host, which accepts on them: each
// connection the program makes is accepted by the proxy in the host's namespace, and the proxy's
// own connections leave from there. Nothing else is routable inside, so a program that ignores
// the proxy reaches nothing.
#include <cstdint>
#include <vector>

#include "setup_error.hpp"

namespace psych::launcher {

/// In init, inside the new network namespace, as its root (or, in a container, in the launcher,
/// inside the container's): loopback up, then the listeners, sent over `handover` (a Unix socket to
/// the launcher, or in a container straight to the host) and closed here, so that no process of
/// the sandbox holds them. Returns how many were sent.
setup_result<int> open_egress_listeners(std::uint16_t port, int handover);

/// In the launcher: the listeners init sent (already queued on `from_init`), passed on to the host
/// over `to_host` (protocol::egress_handover_fd) in one message, and closed. Returns how many.
setup_result<int> forward_egress_listeners(int from_init, int to_host);

}  // namespace psych::launcher
