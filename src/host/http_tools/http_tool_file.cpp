// The JSON file of HTTP tools (parse_http_tools in psych/host/http_tools.hpp; docs/http-tools.md,
// "The JSON file"). Decoded strictly: a misspelt member must not silently drop a safety setting.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/host/http_tools.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"

namespace psych::http_tool_file {

/// Where the credential comes from: exactly one of a command and an environment variable. Never
/// the secret itself, which a file of declarations would spread to every copy of it.
struct credential_entry {
  std::string header = "Authorization";
  std::string prefix = "Bearer ";
  std::optional<std::string> command;
  std::optional<std::string> env;
};

struct tool_entry {
  std::string name;
  std::string description;
  std::string method = "GET";
  std::string url;
  std::optional<json_text> input_schema;
  std::vector<std::string> query;
  http_body_mapping body = http_body_mapping::none;
  std::optional<credential_entry> credential;
  std::optional<bool> destructive;
  std::optional<double> timeout_seconds;
  std::optional<std::uint64_t> max_response_bytes;
  std::optional<std::string> ca_file;
  bool allow_insecure_http = false;
  static constexpr std::array<std::string_view, 2> required_members{"name", "url"};
};

struct file {
  std::vector<tool_entry> tools;
  static constexpr std::array<std::string_view, 1> required_members{"tools"};
};

}  // namespace psych::http_tool_file

BOOST_HANA_ADAPT_STRUCT(psych::http_tool_file::credential_entry, header, prefix, command, env);
BOOST_HANA_ADAPT_STRUCT(psych::http_tool_file::tool_entry, name, description, method, url, input_schema, query, body,
                        credential, destructive, timeout_seconds, max_response_bytes, ca_file, allow_insecure_http);
BOOST_HANA_ADAPT_STRUCT(psych::http_tool_file::file, tools);

namespace psych {
namespace {

/// A file of declarations is a person's: a megabyte is far beyond any list of tools.
constexpr protocol::json_bounds file_bounds{.max_bytes = 1u << 20, .max_depth = 32};

/// The longest timeout a file may declare: a day, far past any HTTP call, still a finite wait.
constexpr double max_timeout_seconds = 86400;

auto invalid(std::string detail) { return fail_with(error_kind::invalid_argument, std::move(detail)); }

result<http_credential> credential_of(std::string_view tool, http_tool_file::credential_entry entry) {
  if (entry.command.has_value() == entry.env.has_value())
    return invalid(fmt::format("tools '{}': credential: give exactly one of \"command\" and \"env\"", tool));
  if (entry.command && entry.command->empty())
    return invalid(fmt::format("tools '{}': credential.command is empty", tool));
  if (entry.env && entry.env->empty()) return invalid(fmt::format("tools '{}': credential.env is empty", tool));
  return http_credential{.header = std::move(entry.header), .prefix = std::move(entry.prefix),
                         .resolve = entry.command ? command_secret(std::move(*entry.command))
                                                  : environment_secret(std::move(*entry.env))};
}

result<http_tool> tool_of(http_tool_file::tool_entry entry) {
  http_tool tool{.name = std::move(entry.name), .description = std::move(entry.description),
                 .method = std::move(entry.method), .url_template = std::move(entry.url),
                 .query = std::move(entry.query), .body = entry.body, .destructive = entry.destructive,
                 .ca_file = std::move(entry.ca_file), .allow_insecure_http = entry.allow_insecure_http};
  if (entry.input_schema) tool.input_schema_json = std::move(entry.input_schema->text);
  if (entry.credential) {
    PSYCH_TRY(auto credential, credential_of(tool.name, std::move(*entry.credential)));
    tool.credential = std::move(credential);
  }
  if (entry.timeout_seconds) {
    const double seconds = *entry.timeout_seconds;
    if (!(seconds > 0 && seconds <= max_timeout_seconds))
      return invalid(fmt::format("tools '{}': timeout_seconds must be above 0 and at most {}, got {}", tool.name,
                                 max_timeout_seconds, seconds));
    tool.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  }
  if (entry.max_response_bytes) {
    if (*entry.max_response_bytes == 0 || *entry.max_response_bytes > (std::uint64_t{1} << 30))
      return invalid(fmt::format("tools '{}': max_response_bytes must be between 1 and 1 GiB, got {}", tool.name,
                                 *entry.max_response_bytes));
    tool.max_response_bytes = static_cast<std::size_t>(*entry.max_response_bytes);
  }
  return tool;
}

}  // namespace

result<std::vector<http_tool>> parse_http_tools(std::string_view json_text) {
  auto parsed = protocol::decode_json_strict<http_tool_file::file>(json_text, file_bounds);
  if (!parsed) return parsed.error();
  std::vector<http_tool> tools;
  for (auto& entry : parsed.value().tools) {
    PSYCH_TRY(auto tool, tool_of(std::move(entry)));
    tools.push_back(std::move(tool));
  }
  return tools;
}

secret_resolver environment_secret(std::string variable) {
  return [variable = std::move(variable)]() -> result<std::string> {
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr || *value == '\0')
      return fail_with(error_kind::invalid_argument,
                       fmt::format("the credential's environment variable {} is unset or empty", variable));
    return std::string(value);
  };
}

}  // namespace psych
