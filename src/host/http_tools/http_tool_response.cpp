// HTTP responses as tool outcomes (http_tool_response.hpp).
#include "http_tools/http_tool_response.hpp"

#include <boost/beast/core/string.hpp>
#include <fmt/format.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "http/base64.hpp"
#include "http/egress.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"
#include "psych/utf8.hpp"

namespace psych::host {
namespace {

/// The deepest JSON value the binding gateway accepts as a result.
constexpr std::size_t result_depth = 64;

/// RapidJSON's Writer writes a number read as a string (kParseNumbersAsStringsFlag) back as a JSON
/// string: {"stock":7} would come out {"stock":"7"}. This one writes it back as the number it was.
class number_keeping_writer : public rapidjson::Writer<rapidjson::StringBuffer> {
 public:
  using Writer::Writer;
  bool RawNumber(const Ch* spelling, rapidjson::SizeType length, bool) {
    return RawValue(spelling, length, rapidjson::kNumberType);
  }
};

/// The JSON text re-written by RapidJSON: every string in its one escaped form, so that a credential
/// spelt with needless escapes ("\u0073ecret") is found by a plain search. Numbers keep their spelling.
std::optional<std::string> canonical_json(std::string_view json) {
  rapidjson::StringBuffer buffer;
  number_keeping_writer writer(buffer);
  rapidjson::Reader reader;
  rapidjson::MemoryStream stream(json.data(), json.size());
  constexpr unsigned flags = rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag |
                             rapidjson::kParseValidateEncodingFlag | rapidjson::kParseStopWhenDoneFlag;
  if (!reader.Parse<flags>(stream, writer)) return std::nullopt;
  return std::string(buffer.GetString(), buffer.GetSize());
}

/// The credential as it appears inside a JSON string written by RapidJSON.
std::string escaped_in_json(std::string_view secret) {
  std::string quoted = protocol::encode_json(std::string(secret));
  return quoted.substr(1, quoted.size() - 2);
}

tool_outcome json_value(unsigned status, std::string_view body, std::string_view secret) {
  const protocol::json_bounds bounds{.max_bytes = body.size() + 1, .max_depth = result_depth};
  // The codec's reason is named, not its message: that quotes the body, which may cut a credential
  // in two where redaction cannot find it.
  if (auto valid = protocol::decode_json<json_text>(body, bounds); !valid)
    return tool_outcome::error(tool_error_kind::tool_failed,
                               fmt::format("HTTP {}: the response says it is JSON but is not ({})", status,
                                           name_of(valid.error().kind)));
  if (secret.empty()) return tool_outcome::value(std::string(body));
  auto canonical = canonical_json(body);
  if (!canonical) return tool_outcome::error(tool_error_kind::tool_failed, "the JSON response could not be re-read");
  std::string redacted = redact(redact(std::move(*canonical), secret), escaped_in_json(secret));
  if (auto still_valid = protocol::decode_json<json_text>(redacted, {.max_bytes = redacted.size() + 1,
                                                                      .max_depth = result_depth});
      !still_valid)
    return tool_outcome::error(tool_error_kind::tool_failed,
                               "the response quotes the credential where it cannot be redacted; it is withheld");
  return tool_outcome::value(std::move(redacted));
}

/// {"status":..,"content_type":..,"text":..} for UTF-8, "base64" in place of "text" for other bytes.
tool_outcome wrapped_value(const http_answer& answer, std::string_view secret) {
  const std::string body = redact(std::string(answer.body), secret);
  const bool is_text = utf8::first_invalid(body) == std::string_view::npos;
  return tool_outcome::value(fmt::format(R"({{"status":{},"content_type":{},"{}":{}}})", answer.status,
                                         protocol::encode_json(redact(std::string(answer.content_type), secret)),
                                         is_text ? "text" : "base64",
                                         protocol::encode_json(is_text ? body : base64_encode(body))));
}

tool_outcome status_error(const http_answer& answer, std::string_view secret) {
  // A refused credential's answer is not quoted at all: the likeliest place for a server to echo it.
  if (answer.status == 401 || answer.status == 403)
    return tool_outcome::error(tool_error_kind::http_error,
                               fmt::format("HTTP {}: the server refused the request's credentials (its answer is "
                                           "not quoted)",
                                           answer.status));
  std::string message = fmt::format("HTTP {}", answer.status);
  if (answer.status >= 300 && answer.status < 400)
    message += fmt::format(": a redirect that is not followed (Location: {})",
                           peer_excerpt(redact(std::string(answer.location), secret), 200));
  else if (!answer.body.empty())
    message += ": " + peer_excerpt(redact(std::string(answer.body), secret), 300);
  return tool_outcome::error(tool_error_kind::http_error, redact(std::move(message), secret));
}

}  // namespace

bool is_json_media_type(std::string_view content_type) {
  std::string_view essence = content_type.substr(0, content_type.find(';'));
  while (!essence.empty() && (essence.back() == ' ' || essence.back() == '\t')) essence.remove_suffix(1);
  constexpr std::string_view suffix = "+json";
  return boost::beast::iequals(essence, "application/json") ||
         (essence.find('/') != std::string_view::npos && essence.size() > suffix.size() &&
          boost::beast::iequals(essence.substr(essence.size() - suffix.size()), suffix));
}

tool_outcome outcome_of_answer(const http_answer& answer, std::string_view secret) {
  if (answer.status < 200 || answer.status > 299) return status_error(answer, secret);
  if (is_json_media_type(answer.content_type) && !answer.body.empty())
    return json_value(answer.status, answer.body, secret);
  return wrapped_value(answer, secret);
}

}  // namespace psych::host
