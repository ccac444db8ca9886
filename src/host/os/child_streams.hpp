#pragma once
// The Asio objects through which the host's event loop waits on a child it started: the read end
// of an output pipe, and the child's exit (a pidfd or kqueue that polls readable; on Windows the
// process handle, which is signalled), and how an owned descriptor or handle becomes one of them.
#include <utility>

#include <boost/system/error_code.hpp>

#ifdef _WIN32
#include <boost/asio/windows/object_handle.hpp>
#include <boost/asio/windows/stream_handle.hpp>
#else
#include <boost/asio/posix/stream_descriptor.hpp>
#endif

#include "os/os_handle.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// Hands an owned descriptor (on Windows a handle) to an Asio object. Should registering it fail,
/// it stays with its owner, who closes it.
template <class Object, class... Protocol>
result<void> adopt(Object& object, unique_os_handle& handle, const Protocol&... protocol) {
  boost::system::error_code ec;
  object.assign(protocol..., handle.get(), ec);
  if (ec) return fail_with(error_kind::system_call_failed, "registering with the event loop: " + ec.message());
  (void)handle.release();
  return success();
}

#ifdef _WIN32
using pipe_stream = boost::asio::windows::stream_handle;
using exit_watch = boost::asio::windows::object_handle;

template <class Token>
auto async_wait_exit(exit_watch& watch, Token&& token) {
  return watch.async_wait(std::forward<Token>(token));
}
#else
using pipe_stream = boost::asio::posix::stream_descriptor;
using exit_watch = boost::asio::posix::stream_descriptor;

template <class Token>
auto async_wait_exit(exit_watch& watch, Token&& token) {
  return watch.async_wait(boost::asio::posix::descriptor_base::wait_read, std::forward<Token>(token));
}
#endif

}  // namespace psych::host
