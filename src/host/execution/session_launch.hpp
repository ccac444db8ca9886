#pragma once
// A session's launch: the output pipes, control and the channel (socket pairs, or a listener a
// launcher attaches to over loopback), the launcher started with its orders, and its end.
#include <boost/asio/awaitable.hpp>

#include "psych/result.hpp"
#include "execution/session_clock.hpp"
#include "execution/session_state.hpp"

namespace psych::host {

/// The streams, the launcher, and its orders. Every descriptor is owned from the moment the
/// kernel hands it out, so a step that fails leaves nothing open behind it.
result<void> launch(session_state& state);

/// A launcher that attaches over loopback: its control connection, proven, then its orders.
/// The wait ends with the launcher (wait_launcher closes the listener) or at the backstop.
boost::asio::awaitable<bool> attach_then_launch(session_state& state);

/// The channel, which the launcher connects before it starts the child: after `started` it is
/// waiting to be accepted. Then the listener closes: no later connection is ever taken.
boost::asio::awaitable<bool> attach_channel(session_state& state);

/// Until the launcher has exited: then it is reaped, and the clock drains what is left.
boost::asio::awaitable<void> wait_launcher(session_state& state, session_clock& clock);

}  // namespace psych::host
