#pragma once
// A declared tool's URL template, read once, and the request one call's arguments make of it: path
// arguments percent-encoded into their segment (so no argument can change the origin or leave the
// template's path), query arguments encoded, the rest a JSON body or refused. Pure: no I/O.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psych/host/http_tools.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// A URL template split where its arguments go.
struct url_template {
  /// "https://host:port" as written, with no placeholder in it.
  std::string origin_url;
  /// The path: literal text and, between them, placeholder names (`pieces` alternates, literal first).
  std::vector<std::string> pieces;
  /// The template's own query, without its '?'; empty when it has none.
  std::string fixed_query;

  [[nodiscard]] std::vector<std::string> placeholders() const;
  /// The template with every placeholder replaced by `stand_in`: a URL parse_http_url can check.
  [[nodiscard]] std::string with_placeholders_as(std::string_view stand_in) const;
};

/// invalid_argument: no "scheme://", a placeholder in the origin or the query, an empty or unclosed
/// one, a '}' without its '{'. The rest of the URL's form is parse_http_url's to check.
result<url_template> parse_url_template(std::string_view url);

/// What one call sends.
struct mapped_request {
  std::string target;                    ///< path and query
  std::optional<std::string> body_json;  ///< with body mapping json
};

/// Places the arguments (one JSON object). invalid_argument, its detail for the program
/// (malformed_call): not an object, a path argument missing, empty, "." or "..", or not a string,
/// number or boolean, an argument with no place (body mapping none).
result<mapped_request> map_arguments(const url_template& url, const std::vector<std::string>& query,
                                     http_body_mapping body, std::string_view arguments_json);

/// Every byte but the unreserved ones (ALPHA DIGIT - . _ ~) as %XX: '/', '?', '#', '%' included.
std::string percent_encoded(std::string_view text);

}  // namespace psych::host
