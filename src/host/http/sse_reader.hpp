#pragma once
// A reader of text/event-stream (the SSE body of an MCP Streamable HTTP response or an A2A
// stream), fed bytes as they arrive: lines end with CRLF, LF or CR; "data" lines join with "\n";
// a blank line dispatches; comments and "retry" are ignored. Bounded: an event (or a line) that
// grows past max_event_bytes is an error as soon as it does, never held whole.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "http/egress.hpp"

namespace psych::host {

struct sse_event {
  std::string event;  ///< "message" when the stream named none
  std::string data;
  std::string id;
};

class sse_reader {
 public:
  explicit sse_reader(std::size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

  /// Feeds the next bytes; each event completed by them goes to `on_event`. too_large for an event
  /// past the bound, malformed for a NUL byte. After an error the reader must not be fed again.
  egress_result<void> feed(std::string_view bytes, const std::function<void(sse_event&&)>& on_event);

 private:
  egress_result<void> take_line(std::string_view line, const std::function<void(sse_event&&)>& on_event);

  std::size_t max_event_bytes_;
  std::string line_;
  std::string event_, data_, id_;
  bool has_data_ = false;
  bool after_cr_ = false;
  bool started_ = false;  ///< past a leading byte-order mark
};

}  // namespace psych::host
