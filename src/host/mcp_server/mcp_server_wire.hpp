#pragma once
// The messages psych mcp reads and writes, as the codec's Hana structs (members named as on the
// wire, MCP's camelCase). The envelope (an answer, an error) is json_rpc_wire's, shared with the
// MCP client.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/json_text.hpp"
#include "psych/limits.hpp"

namespace psych::mcp_server_wire {

/// Any message from the client. `jsonrpc` must be "2.0"; a request has an id and a method, a
/// notification a method only, a response (to a request of ours: we send none) an id only.
struct incoming {
  std::optional<std::string> jsonrpc;
  std::optional<json_text> id;
  std::optional<std::string> method;
  std::optional<json_text> params;
};

struct initialize_params {
  std::optional<std::string> protocolVersion;
};

struct request_meta {
  std::optional<json_text> progressToken;
};

struct call_params {
  std::string name;
  std::optional<json_text> arguments;
  std::optional<request_meta> _meta;
  static constexpr std::array<std::string_view, 1> required_members{"name"};
};

struct cancelled_params {
  std::optional<json_text> requestId;
  std::optional<std::string> reason;
};

/// run_code's arguments; decoded strictly, so a misspelt member is named rather than ignored.
struct run_code_arguments {
  std::string program;
  std::optional<code_execution_limits> limits;
  static constexpr std::array<std::string_view, 1> required_members{"program"};
};

/// read_tool_output's arguments, as a program's read_tool_output takes them.
struct read_output_arguments {
  std::string handle;
  std::optional<std::uint64_t> offset;
  std::optional<std::uint64_t> limit;
  std::optional<std::string> pattern;
  static constexpr std::array<std::string_view, 1> required_members{"handle"};
};

struct text_content {
  std::string type{"text"};
  std::string text;
};

/// A tools/call answer: the payload as text for every client, and as structuredContent for those
/// that read it (2025-06-18 on).
struct call_result {
  std::vector<text_content> content;
  json_text structuredContent;
  bool isError = false;
};

struct progress_meta {
  std::string stream;
  std::uint64_t offset = 0;
  std::uint64_t skipped = 0;
};

/// notifications/progress carrying a chunk of live output: `progress` is the bytes of both streams
/// passed so far (shown or skipped), which only grows; `message` the chunk's text.
struct progress_params {
  json_text progressToken;
  std::uint64_t progress = 0;
  std::string message;
  progress_meta _meta;
};

struct log_params {
  std::string level;
  std::string logger{"psych"};
  json_text data;
};

}  // namespace psych::mcp_server_wire

BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::incoming, jsonrpc, id, method, params);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::initialize_params, protocolVersion);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::request_meta, progressToken);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::call_params, name, arguments, _meta);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::cancelled_params, requestId, reason);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::run_code_arguments, program, limits);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::read_output_arguments, handle, offset, limit, pattern);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::text_content, type, text);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::call_result, content, structuredContent, isError);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::progress_meta, stream, offset, skipped);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::progress_params, progressToken, progress, message, _meta);
BOOST_HANA_ADAPT_STRUCT(psych::mcp_server_wire::log_params, level, logger, data);
