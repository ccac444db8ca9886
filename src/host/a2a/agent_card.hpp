#pragma once
// What psych reads of an A2A agent card (docs/a2a.md, "The card"): the protocol dialect and the
// JSON-RPC endpoint it names, whether it streams, and its skills. Everything else is ignored.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "psych/result.hpp"

namespace psych::host {

/// The JSON-RPC dialect a peer speaks: method names, part and state spellings.
enum class a2a_dialect {
  v1_0,  ///< SendMessage, GetTask, CancelTask; "TASK_STATE_COMPLETED"; parts {"text": ...}
  v0_3,  ///< message/send, tasks/get, tasks/cancel; "completed"; parts {"kind": "text", ...}
};

struct a2a_skill {
  std::string id;
  std::string name;
  std::string description;
};

struct agent_card {
  a2a_dialect dialect = a2a_dialect::v1_0;
  /// Where JSON-RPC requests go, as the card wrote it (an absolute URL).
  std::string rpc_url;
  bool streaming = false;
  std::vector<a2a_skill> skills;
};

/// Skills past this many, or with an id longer than max_skill_id_bytes, are left out.
inline constexpr std::size_t max_card_skills = 1000;
inline constexpr std::size_t max_skill_id_bytes = 128;

/// Reads a card (1.0: `supportedInterfaces`, the first JSONRPC one of version 1.x or 0.3; 0.3:
/// `url` with `preferredTransport` JSONRPC or an `additionalInterfaces` entry). json_malformed for
/// what is not JSON, invalid_argument for a card with no JSON-RPC interface psych speaks.
result<agent_card> read_agent_card(std::string_view body);

}  // namespace psych::host
