// text/event-stream, bounded as bytes arrive (sse_reader.hpp).
#include "http/sse_reader.hpp"

#include <fmt/format.h>

namespace psych::host {

egress_result<void> sse_reader::feed(std::string_view bytes, const std::function<void(sse_event&&)>& on_event) {
  if (!started_) {
    // A byte-order mark may open the stream; it can arrive split across feeds.
    constexpr std::string_view bom = "\xEF\xBB\xBF";
    line_.append(bytes);
    if (line_.size() < bom.size() && bom.starts_with(line_)) return boost::outcome_v2::success();
    started_ = true;
    std::string pending = std::move(line_);
    line_.clear();
    std::string_view rest = pending;
    if (rest.starts_with(bom)) rest.remove_prefix(bom.size());
    return feed(rest, on_event);
  }
  while (!bytes.empty()) {
    if (after_cr_ && bytes.front() == '\n') bytes.remove_prefix(1);
    after_cr_ = false;
    const auto end = bytes.find_first_of("\r\n");
    const std::string_view piece = bytes.substr(0, end);
    if (piece.find('\0') != std::string_view::npos)
      return egress_error{egress_error_kind::malformed, "the event stream has a NUL byte", true};
    if (line_.size() + piece.size() + data_.size() + event_.size() > max_event_bytes_)
      return egress_error{egress_error_kind::too_large,
                          fmt::format("an event of the stream passed {} bytes", max_event_bytes_), true};
    line_.append(piece);
    if (end == std::string_view::npos) break;
    after_cr_ = bytes[end] == '\r';
    bytes.remove_prefix(end + 1);
    std::string line = std::move(line_);
    line_.clear();
    if (auto taken = take_line(line, on_event); !taken) return taken;
  }
  return boost::outcome_v2::success();
}

egress_result<void> sse_reader::take_line(std::string_view line, const std::function<void(sse_event&&)>& on_event) {
  if (line.empty()) {
    if (has_data_) {
      if (data_.ends_with('\n')) data_.pop_back();
      on_event(sse_event{event_.empty() ? "message" : std::move(event_), std::move(data_), id_});
    }
    event_.clear();
    data_.clear();
    has_data_ = false;
    return boost::outcome_v2::success();
  }
  if (line.front() == ':') return boost::outcome_v2::success();  // a comment: a keep-alive
  const auto colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (field == "data") {
    data_.append(value).push_back('\n');
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  } else if (field == "id") {
    id_.assign(value);
  }
  return boost::outcome_v2::success();  // "retry" and unknown fields are ignored, as the standard says
}

}  // namespace psych::host
