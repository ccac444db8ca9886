#pragma once
// The JSON-RPC 2.0 messages of json_rpc_peer, as the codec's Hana structs (members named as on the
// wire). Decoding `incoming` is the first thing done to every line a peer reads.
#include <cstdint>
#include <optional>
#include <string>

#include <boost/hana/adapt_struct.hpp>

#include "psych/json_text.hpp"

namespace psych::json_rpc_wire {

struct error_body {
  std::int64_t code = 0;
  std::string message;
};

/// Any message from the other side: a response (id + result or error), a request (id + method) or
/// a notification (method).
struct incoming {
  std::optional<json_text> id;
  std::optional<std::string> method;
  std::optional<json_text> result;
  std::optional<error_body> error;
};

struct request_out {
  std::string jsonrpc{"2.0"};
  std::int64_t id = 0;
  std::string method;
  json_text params;
};

struct notification_out {
  std::string jsonrpc{"2.0"};
  std::string method;
  json_text params;
};

struct reply_result_out {
  std::string jsonrpc{"2.0"};
  json_text id;
  json_text result;
};

struct reply_error_out {
  std::string jsonrpc{"2.0"};
  json_text id;
  error_body error;
};

struct cancelled_params {
  std::int64_t requestId = 0;
  std::string reason;
};

}  // namespace psych::json_rpc_wire

BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::error_body, code, message);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::incoming, id, method, result, error);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::request_out, jsonrpc, id, method, params);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::notification_out, jsonrpc, method, params);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::reply_result_out, jsonrpc, id, result);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::reply_error_out, jsonrpc, id, error);
BOOST_HANA_ADAPT_STRUCT(psych::json_rpc_wire::cancelled_params, requestId, reason);
