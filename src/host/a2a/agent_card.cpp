#include "a2a/agent_card.hpp"

#include <optional>
#include <set>

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "a2a/peer_json.hpp"

namespace psych::host {
namespace {

std::optional<a2a_dialect> dialect_of(std::string_view version) {
  if (version.starts_with("1.")) return a2a_dialect::v1_0;
  if (version == "1") return a2a_dialect::v1_0;
  if (version.starts_with("0.3")) return a2a_dialect::v0_3;
  return std::nullopt;
}

bool is_json_rpc(std::string_view binding) { return binding == "JSONRPC"; }

/// A 1.0 card: the first JSONRPC interface of a version psych speaks.
std::optional<agent_card> interface_of_1_0(const rapidjson::Value& card) {
  const auto interfaces = card.FindMember("supportedInterfaces");
  if (interfaces == card.MemberEnd() || !interfaces->value.IsArray()) return std::nullopt;
  for (const auto& entry : interfaces->value.GetArray()) {
    if (!is_json_rpc(string_member(entry, "protocolBinding"))) continue;
    const auto dialect = dialect_of(string_member(entry, "protocolVersion"));
    const auto url = string_member(entry, "url");
    if (!dialect || url.empty()) continue;
    return agent_card{.dialect = *dialect, .rpc_url = std::string(url)};
  }
  return std::nullopt;
}

/// A 0.3 card: `url` in its preferred transport, or a JSONRPC entry of `additionalInterfaces`.
std::optional<agent_card> interface_of_0_3(const rapidjson::Value& card) {
  if (!dialect_of(string_member(card, "protocolVersion")).has_value()) return std::nullopt;
  const auto dialect = *dialect_of(string_member(card, "protocolVersion"));
  const auto preferred = string_member(card, "preferredTransport");
  const auto url = string_member(card, "url");
  if ((preferred.empty() || is_json_rpc(preferred)) && !url.empty())
    return agent_card{.dialect = dialect, .rpc_url = std::string(url)};
  const auto more = card.FindMember("additionalInterfaces");
  if (more == card.MemberEnd() || !more->value.IsArray()) return std::nullopt;
  for (const auto& entry : more->value.GetArray())
    if (is_json_rpc(string_member(entry, "transport")) && !string_member(entry, "url").empty())
      return agent_card{.dialect = dialect, .rpc_url = std::string(string_member(entry, "url"))};
  return std::nullopt;
}

}  // namespace

result<agent_card> read_agent_card(std::string_view body) {
  rapidjson::Document document;
  PSYCH_TRY(parse_peer_json(body, document));
  if (!document.IsObject()) return fail_with(error_kind::json_malformed, "the agent card is not a JSON object");
  auto card = interface_of_1_0(document);
  if (!card) card = interface_of_0_3(document);
  if (!card)
    return fail_with(error_kind::invalid_argument,
                     "the agent card names no JSON-RPC interface of protocol 1.x or 0.3 (supportedInterfaces, or "
                     "protocolVersion and url)");
  const auto capabilities = document.FindMember("capabilities");
  if (capabilities != document.MemberEnd() && capabilities->value.IsObject()) {
    const auto streaming = capabilities->value.FindMember("streaming");
    card->streaming = streaming != capabilities->value.MemberEnd() && streaming->value.IsTrue();
  }
  const auto skills = document.FindMember("skills");
  if (skills != document.MemberEnd() && skills->value.IsArray()) {
    std::set<std::string_view> seen;
    for (const auto& skill : skills->value.GetArray()) {
      if (card->skills.size() == max_card_skills) break;
      const auto id = string_member(skill, "id");
      if (id.empty() || id.size() > max_skill_id_bytes || !seen.insert(id).second) continue;
      card->skills.push_back({std::string(id), std::string(string_member(skill, "name")),
                              std::string(string_member(skill, "description"))});
    }
  }
  return *std::move(card);
}

}  // namespace psych::host
