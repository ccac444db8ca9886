// The A2A codec without a peer (src/host/a2a: agent_card, task_wire): what is read of a card in
// each dialect and what is refused, the requests in each dialect, and every answer a peer can get
// wrong.
#include <doctest/doctest.h>

#include <string>

#include <rapidjson/document.h>

#include "a2a/agent_card.hpp"
#include "a2a/peer_json.hpp"
#include "a2a/task_wire.hpp"

using namespace psych;
using namespace psych::host;

namespace {

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document document;
  REQUIRE(parse_peer_json(text, document).has_value());
  return document;
}

}  // namespace

TEST_SUITE_BEGIN("codec");

TEST_CASE("a 1.0 card: its first JSON-RPC interface of a version psych speaks, its skills") {
  const auto card = read_agent_card(R"({"name":"p","supportedInterfaces":[
      {"url":"http://127.0.0.1:1/grpc","protocolBinding":"GRPC","protocolVersion":"1.0"},
      {"url":"http://127.0.0.1:1/old","protocolBinding":"JSONRPC","protocolVersion":"2.0"},
      {"url":"http://127.0.0.1:1/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
    "capabilities":{"streaming":true},
    "skills":[{"id":"echo","name":"Echo","description":"echoes"},{"id":"echo","name":"again"},{"name":"no id"},
              {"id":"word-count","name":"wc"}]})");
  REQUIRE(card.has_value());
  CHECK(card.value().dialect == a2a_dialect::v1_0);
  CHECK(card.value().rpc_url == "http://127.0.0.1:1/a2a");
  CHECK(card.value().streaming);
  REQUIRE(card.value().skills.size() == 2);  // a repeated id and a missing one are left out
  CHECK(card.value().skills[0].id == "echo");
  CHECK(card.value().skills[0].description == "echoes");
  CHECK(card.value().skills[1].id == "word-count");
}

TEST_CASE("a 0.3 card: url in its preferred transport, or a JSON-RPC additional interface") {
  SUBCASE("preferred") {
    const auto card = read_agent_card(R"({"protocolVersion":"0.3.0","url":"http://h/rpc","skills":[{"id":"a"}]})");
    REQUIRE(card.has_value());
    CHECK(card.value().dialect == a2a_dialect::v0_3);
    CHECK(card.value().rpc_url == "http://h/rpc");
    CHECK_FALSE(card.value().streaming);
  }
  SUBCASE("additional") {
    const auto card = read_agent_card(R"({"protocolVersion":"0.3.0","url":"http://h/grpc","preferredTransport":"GRPC",
        "additionalInterfaces":[{"url":"http://h/json","transport":"JSONRPC"}]})");
    REQUIRE(card.has_value());
    CHECK(card.value().rpc_url == "http://h/json");
  }
}

TEST_CASE("a card that cannot be used is refused by name") {
  CHECK(read_agent_card("not json").error().kind == error_kind::json_malformed);
  CHECK(read_agent_card("[1]").error().kind == error_kind::json_malformed);
  CHECK(read_agent_card(R"({"protocolVersion":"0.2.5","url":"http://h/"})").error().kind == error_kind::invalid_argument);
  CHECK(read_agent_card(R"({"supportedInterfaces":[{"url":"http://h","protocolBinding":"GRPC","protocolVersion":"1.0"}]})")
            .error()
            .kind == error_kind::invalid_argument);
  CHECK(read_agent_card(std::string(100000, '[')).error().kind == error_kind::json_too_deep);
  std::string many = R"({"protocolVersion":"0.3.0","url":"http://h/","skills":[)";
  for (int i = 0; i < 1500; ++i) many += (i ? "," : "") + std::string(R"({"id":"s)") + std::to_string(i) + "\"}";
  many += "]}";
  CHECK(read_agent_card(many).value().skills.size() == max_card_skills);
}

TEST_CASE("the requests, in each dialect") {
  SUBCASE("1.0") {
    const auto send = parsed(send_message_body(a2a_dialect::v1_0, 7, "echo", R"({"text":"hi"})", "m1"));
    CHECK(std::string_view(send["method"].GetString()) == "SendMessage");
    CHECK(send["id"].GetInt64() == 7);
    const auto& message = send["params"]["message"];
    CHECK(std::string_view(message["role"].GetString()) == "ROLE_USER");
    CHECK(std::string_view(message["messageId"].GetString()) == "m1");
    CHECK(std::string_view(message["metadata"]["skill"].GetString()) == "echo");
    CHECK(std::string_view(message["parts"][0]["data"]["text"].GetString()) == "hi");
    CHECK(std::string_view(message["parts"][1]["text"].GetString()).find("echo") != std::string_view::npos);
    CHECK(send["params"]["configuration"]["returnImmediately"].GetBool());
    CHECK(std::string_view(parsed(get_task_body(a2a_dialect::v1_0, 8, "t"))["method"].GetString()) == "GetTask");
    CHECK(parsed(get_task_body(a2a_dialect::v1_0, 8, "t"))["params"]["historyLength"].GetInt() == 0);
    CHECK(std::string_view(parsed(cancel_task_body(a2a_dialect::v1_0, 9, "t"))["method"].GetString()) == "CancelTask");
  }
  SUBCASE("0.3") {
    const auto send = parsed(send_message_body(a2a_dialect::v0_3, 7, "echo", R"({"text":"hi"})", "m1"));
    CHECK(std::string_view(send["method"].GetString()) == "message/send");
    const auto& message = send["params"]["message"];
    CHECK(std::string_view(message["role"].GetString()) == "user");
    CHECK(std::string_view(message["kind"].GetString()) == "message");
    CHECK(std::string_view(message["parts"][0]["kind"].GetString()) == "data");
    CHECK(std::string_view(message["parts"][1]["kind"].GetString()) == "text");
    CHECK_FALSE(send["params"]["configuration"]["blocking"].GetBool());
    CHECK(std::string_view(parsed(get_task_body(a2a_dialect::v0_3, 8, "t"))["method"].GetString()) == "tasks/get");
    CHECK(std::string_view(parsed(cancel_task_body(a2a_dialect::v0_3, 9, "t"))["method"].GetString()) == "tasks/cancel");
  }
}

TEST_CASE("the states, in both spellings") {
  CHECK(task_state_of("TASK_STATE_COMPLETED") == a2a_task_state::completed);
  CHECK(task_state_of("completed") == a2a_task_state::completed);
  CHECK(task_state_of("TASK_STATE_INPUT_REQUIRED") == a2a_task_state::input_required);
  CHECK(task_state_of("input-required") == a2a_task_state::input_required);
  CHECK(task_state_of("auth-required") == a2a_task_state::auth_required);
  CHECK(task_state_of("TASK_STATE_REJECTED") == a2a_task_state::rejected);
  CHECK(task_state_of("TASK_STATE_UNRECOGNIZED") == a2a_task_state::unknown);
  CHECK_FALSE(ends_the_call(a2a_task_state::unknown));
  CHECK_FALSE(ends_the_call(a2a_task_state::working));
  CHECK(ends_the_call(a2a_task_state::auth_required));
  CHECK(ends_the_call(a2a_task_state::canceled));
}

TEST_CASE("a 1.0 task's artifacts become the result: text, data and file parts") {
  const auto answer = read_answer(a2a_dialect::v1_0, R"({"jsonrpc":"2.0","id":3,"result":{"task":{"id":"t1",
      "status":{"state":"TASK_STATE_COMPLETED"},
      "artifacts":[{"artifactId":"a","name":"out","parts":[{"text":"hello"},{"data":{"n":[1,2]}},
        {"url":"https://x/f.pdf","filename":"f.pdf","mediaType":"application/pdf"},{"raw":"aGk=","filename":"r.bin"},
        {"unknown":1}]}]}}})", 3);
  REQUIRE(answer.has_value());
  CHECK(answer.value().is_task);
  CHECK(answer.value().task_id == "t1");
  CHECK(answer.value().state == a2a_task_state::completed);
  CHECK(answer.value().result_json ==
        R"({"task_id":"t1","state":"completed","artifacts":[{"name":"out","parts":[{"text":"hello"},{"data":{"n":[1,2]}},)"
        R"({"file":{"name":"f.pdf","mimeType":"application/pdf","uri":"https://x/f.pdf"}},{"file":{"name":"r.bin","bytes":"aGk="}}]}]})");
}

TEST_CASE("a 0.3 task and message, and a GetTask answer that is the task itself") {
  SUBCASE("0.3 task with a failed status") {
    const auto answer = read_answer(a2a_dialect::v0_3, R"({"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t",
        "status":{"state":"failed","message":{"kind":"message","parts":[{"kind":"text","text":"disk full"}]}},
        "artifacts":[{"parts":[{"kind":"file","file":{"name":"a.txt","mimeType":"text/plain","bytes":"eA=="}}]}]}})", 1);
    REQUIRE(answer.has_value());
    CHECK(answer.value().state == a2a_task_state::failed);
    CHECK(answer.value().status_text == "disk full");
    CHECK(answer.value().result_json ==
          R"({"task_id":"t","state":"failed","artifacts":[{"parts":[{"file":{"name":"a.txt","mimeType":"text/plain","bytes":"eA=="}}]}]})");
  }
  SUBCASE("0.3 message") {
    const auto answer = read_answer(a2a_dialect::v0_3, R"({"jsonrpc":"2.0","id":1,"result":{"kind":"message",
        "messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"},{"kind":"data","data":true}]}})", 1);
    REQUIRE(answer.has_value());
    CHECK_FALSE(answer.value().is_task);
    CHECK(answer.value().result_json == R"({"parts":[{"text":"hi"},{"data":true}]})");
  }
  SUBCASE("1.0 GetTask") {
    const auto answer =
        read_answer(a2a_dialect::v1_0, R"({"jsonrpc":"2.0","id":2,"result":{"id":"t","status":{"state":"TASK_STATE_WORKING"}}})", 2);
    REQUIRE(answer.has_value());
    CHECK(answer.value().state == a2a_task_state::working);
  }
}

TEST_CASE("an answer a peer got wrong is named") {
  const auto fault = [](std::string_view body) { return read_answer(a2a_dialect::v1_0, body, 5).error().fault; };
  CHECK(fault("garbage") == answer_fault::malformed);
  CHECK(fault(R"({"id":5,"result":{}})") == answer_fault::malformed);  // no "jsonrpc"
  CHECK(fault(R"({"jsonrpc":"2.0","id":5,"result":[]})") == answer_fault::malformed);
  CHECK(fault(R"({"jsonrpc":"2.0","id":5,"result":{"task":{"status":{}}}})") == answer_fault::malformed);
  CHECK(fault(R"({"jsonrpc":"2.0","id":5,"result":{"task":{"id":"t"}}})") == answer_fault::malformed);
  CHECK(fault(R"({"jsonrpc":"2.0","id":6,"result":{"task":{"id":"t","status":{}}}})") == answer_fault::wrong_id);
  CHECK(fault(R"({"jsonrpc":"2.0","id":"5","result":{"task":{"id":"t","status":{}}}})") == answer_fault::wrong_id);
  CHECK(fault(R"({"jsonrpc":"2.0","result":{"task":{"id":"t","status":{}}}})") == answer_fault::wrong_id);
  const auto error = read_answer(a2a_dialect::v1_0, R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}})", 5);
  REQUIRE_FALSE(error.has_value());
  CHECK(error.error().fault == answer_fault::rpc_error);
  CHECK(error.error().code == -32700);
  CHECK(error.error().detail == "parse");
  CHECK(fault(std::string(5000, '{')) == answer_fault::malformed);
}

TEST_CASE("a status message is cut to its bound") {
  const std::string text(10000, 'x');
  const auto answer = read_answer(a2a_dialect::v1_0,
                                  R"({"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","status":{"state":"TASK_STATE_FAILED",)"
                                  R"("message":{"parts":[{"text":")" + text + R"("}]}}}}})", 1);
  REQUIRE(answer.has_value());
  CHECK(answer.value().status_text.size() <= max_status_text_bytes + 3);
}
TEST_CASE("a stream's events build the task: updates, appended artifacts, and what is refused") {
  SUBCASE("1.0") {
    task_stream events{a2a_dialect::v1_0, 4, 1 << 20};
    const auto event = [](const std::string& result) { return R"({"jsonrpc":"2.0","id":4,"result":)" + result + "}"; };
    CHECK(events.take(event(R"({"task":{"id":"t","status":{"state":"TASK_STATE_SUBMITTED"}}})")).has_value());
    CHECK(events.task_id() == "t");
    CHECK_FALSE(events.ended());
    CHECK(events.take(event(R"({"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"a","name":"n","parts":[{"text":"one"}]}}})")).has_value());
    CHECK(events.take(event(R"({"artifactUpdate":{"taskId":"t","append":true,"artifact":{"artifactId":"a","parts":[{"text":"two"}]}}})")).has_value());
    CHECK(events.take(event(R"({"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"b","parts":[{"data":1}]}}})")).has_value());
    CHECK(events.take(event(R"({"artifactUpdate":{"taskId":"t","artifact":{"artifactId":"b","parts":[{"data":2}]}}})")).has_value());
    CHECK(events.take(event(R"({"statusUpdate":{"taskId":"u","status":{"state":"TASK_STATE_COMPLETED"}}})")).error().fault ==
          answer_fault::malformed);  // another task's
    CHECK(events.take(event(R"({"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}})")).has_value());
    CHECK(events.ended());
    CHECK(events.answer().result_json ==
          R"({"task_id":"t","state":"completed","artifacts":[{"name":"n","parts":[{"text":"one"},{"text":"two"}]},{"parts":[{"data":2}]}]})");
  }
  SUBCASE("0.3") {
    task_stream events{a2a_dialect::v0_3, 1, 1 << 20};
    CHECK(events.take(R"({"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","status":{"state":"working"}}})").has_value());
    CHECK(events.take(R"({"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t","status":{"state":"auth-required"}}})")
              .has_value());
    CHECK(events.ended());
    CHECK(events.answer().state == a2a_task_state::auth_required);
  }
  SUBCASE("refused") {
    task_stream events{a2a_dialect::v1_0, 4, 64};
    CHECK(events.take(R"({"jsonrpc":"2.0","id":4,"result":{"statusUpdate":{"taskId":"t","status":{}}}})").error().fault ==
          answer_fault::malformed);  // an update before its task
    CHECK(events.take(R"({"jsonrpc":"2.0","id":5,"result":{"task":{"id":"t","status":{}}}})").error().fault == answer_fault::wrong_id);
    CHECK(events.take(R"({"jsonrpc":"2.0","id":4,"result":{"task":{"id":"t","status":{}}}})").has_value());
    const std::string big(100, 'x');
    CHECK(events.take(R"({"jsonrpc":"2.0","id":4,"result":{"artifactUpdate":{"taskId":"t","artifact":{"parts":[{"text":")" + big +
                      R"("}]}}}})")
              .error()
              .fault == answer_fault::too_large);
  }
}

TEST_SUITE_END();
