#include "execution/session_launch.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "os/child_process.hpp"
#include "os/child_streams.hpp"
#include "os/os_handle.hpp"

namespace psych::host {

namespace {

namespace asio = boost::asio;
using asio::awaitable;

/// How long, after `started`, a launcher that attaches over loopback has to have its channel
/// proven. It connected before it created the child, so the connection is already waiting; the
/// patience is the proof's, and one more connection's ahead of it.
constexpr auto channel_attach_patience = attach_listener::proof_patience * 2;

#ifdef _WIN32
struct launcher_sockets {};
result<launcher_sockets> socket_pairs(session_state&, launcher_fds&) {
  return fail_with(error_kind::launcher_unavailable,
                   "on Windows a launcher attaches over loopback: its starter must say attaches_over_loopback()");
}
#else
/// The launcher's ends of control and the channel, its fds 3 and 4.
struct launcher_sockets {
  unique_fd control, channel;
};
/// Unix socket pairs for control and the channel: the host's ends to the session's streams, the
/// launcher's into `fds`.
result<launcher_sockets> socket_pairs(session_state& s, launcher_fds& fds) {
  PSYCH_TRY(auto control, unix_socket_pair());
  PSYCH_TRY(auto channel, unix_socket_pair());
  const asio::generic::stream_protocol unix_stream(AF_UNIX, 0);
  PSYCH_TRY(adopt(s.control, control.first, unix_stream));
  PSYCH_TRY(adopt(s.channel, channel.first, unix_stream));
  fds.control = control.second.get();
  fds.channel = channel.second.get();
  return launcher_sockets{std::move(control.second), std::move(channel.second)};
}
#endif

/// A launcher that cannot be given its orders: made sure of, then reaped.
void end_launcher(session_state& s) {
  s.kill_launcher();
  reap_launcher(s.launcher);
}

/// What the launcher is told. The environment it names is what grading expects the child to see.
protocol::launch_frame launch_frame(session_state& s) {
  const auto& plan = *s.plan;
  protocol::launch_frame frame;
  frame.token = s.token;
  frame.isolation = plan.attempt;
  frame.limits = plan.terms.limits;
  frame.network = plan.terms.network;
  frame.environment = s.environment;
  frame.interpreter = plan.interpreter;
  frame.workspace = s.dirs.workspace;
  frame.tmp_dir = s.dirs.tmp;
  frame.canary = s.dirs.canary;
  frame.probe = s.probe.ports();
  frame.run_as = s.starter.sets_identity() ? std::nullopt : plan.run_as;
  frame.allow_same_uid = plan.allow_same_uid || s.starter.sets_identity();
  frame.prepared = s.claim != nullptr;
  if (plan.terms.network == network_access::allowlist) frame.egress_proxy_port = sandbox_proxy_port;
  s.starter.adapt_launch(frame);
  s.launched_environment_keys.clear();
  for (const auto& entry : frame.environment) s.launched_environment_keys.push_back(entry.first);
  return frame;
}

}  // namespace

session_state::session_state(const session_plan& planned, const execution_dirs& directories)
    : plan(&planned), hand_over(planned.hand_over), claim(planned.claim), dirs(directories),
      own_launcher(planned.launcher_path), starter(planned.starter ? *planned.starter : own_launcher), control(io),
      channel(io), stdout_pipe(io), stderr_pipe(io), pidfd(io), control_out(control), channel_out(channel), probe(io),
      listener(io), loopback(starter.attaches_over_loopback()), out(planned.terms.output.max_bytes),
      err(planned.terms.output.max_bytes), environment(planned.environment) {
  // The two variables that name this execution's own directories.
  environment["HOME"] = dirs.workspace;
  environment["TMPDIR"] = dirs.tmp;
  // And, for an allowlist, where the one thing its network reaches is.
  // A variable of the same name from the caller's allowlist is replaced: the program's requests
  // must go to the proxy, never to a proxy of the host's.
  if (planned.terms.network == network_access::allowlist)
    for (auto& [name, value] : proxy_environment()) environment[name] = std::move(value);
}

void session_state::kill_launcher() {
  child_process::signal_held(launcher.pid, launcher.pidfd, ending::kill);
  starter.kill(launcher);
}

result<void> launch(session_state& s) {
  s.probe.open();
  PSYCH_TRY(auto out, output_pipe());
  PSYCH_TRY(auto err, output_pipe());
  PSYCH_TRY(adopt(s.stdout_pipe, out.first));
  PSYCH_TRY(adopt(s.stderr_pipe, err.first));
  s.token = random_token();
  launcher_fds fds{.stdout_write = out.second.get(), .stderr_write = err.second.get()};
  launcher_sockets sockets;  // none for a launcher that attaches over loopback
  if (s.loopback) {
    PSYCH_TRY(s.listener.open());
    fds.attach = loopback_attach_address{s.listener.port(), s.listener.secret()};
  } else {
    PSYCH_TRY(sockets, socket_pairs(s, fds));
  }
  PSYCH_TRY(s.egress.prepare(s.plan->terms, fds));
  PSYCH_TRY(s.launcher, s.starter.start(fds, s.dirs));
  // The launcher's ends are the launcher's now: holding them here would hide its end of file.
  sockets = {};
  s.egress.release_launcher_end();
  out.second.reset();
  err.second.reset();
  unique_os_handle pidfd{s.launcher.pidfd};
  if (auto adopted = adopt(s.pidfd, pidfd); !adopted) {
    end_launcher(s);
    return adopted;
  }
  // One that attaches over loopback gets its orders once its control is proven: attach_then_launch().
  if (s.loopback) return success();
  const auto frame = protocol::encode_frame(launch_frame(s));
  boost::system::error_code ec;
  asio::write(s.control, asio::buffer(frame), ec);
  if (ec) {
    end_launcher(s);
    return fail_with(error_kind::launcher_unavailable,
                     "the launcher ended before it read its orders (writing the launch frame: " + ec.message() + ")");
  }
  return success();
}

awaitable<bool> attach_then_launch(session_state& s) {
  auto control = co_await s.listener.accept(protocol::attached_stream::control);
  if (!control) {
    s.launch_failure = "the launcher never attached: " + control.error().message();
    co_return false;
  }
  s.control = std::move(control).value();
  s.control_out.send(launch_frame(s));
  if (s.cancelled) s.send_cancel(protocol::cancel_reason::cancelled);  // asked for while there was no control to say it on
  co_return true;
}

awaitable<bool> attach_channel(session_state& s) {
  asio::steady_timer patience(s.io, channel_attach_patience);
  patience.async_wait([&s](boost::system::error_code ec) {
    if (!ec) s.listener.close();
  });
  auto channel = co_await s.listener.accept(protocol::attached_stream::channel);
  patience.cancel();
  s.listener.close();
  if (!channel) {
    s.note_violation("the launcher reported a start without attaching the channel: " + channel.error().message());
    co_return false;
  }
  s.channel = std::move(channel).value();
  co_return true;
}

awaitable<void> wait_launcher(session_state& s, session_clock& clock) {
  boost::system::error_code ec;
  co_await async_wait_exit(s.pidfd, asio::redirect_error(asio::use_awaitable, ec));
  s.launcher_status = reap_launcher(s.launcher);
  s.starter.reaped(s.launcher_status);
  s.launcher_reaped = true;
  s.listener.close();  // a launcher that has ended attaches nothing more
  clock.launcher_ended();
}

}  // namespace psych::host
