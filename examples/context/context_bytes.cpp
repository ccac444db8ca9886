// One task, done twice by a scripted model (no LLM): total the order amounts in 20 CSV files that
// an MCP filesystem server offers.
//   direct:  one tool call per file, as a model without run_code must; every call and every whole
//            result enters the model's context.
//   program: one run_code call whose program loops over the same server's tool; only the program
//            and the model's payload of its result (run_code_payload) enter the context.
// It prints the bytes each way put into the context, and checks that both found the same total.
//   build/examples/context/context_bytes build/mcp-servers
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "psych/host/mcp.hpp"
#include "scripted_model.hpp"

namespace {

constexpr int file_count = 20;
constexpr int rows_per_file = 40;

/// The orders, and their total in cents, so both ways can be checked against it.
long write_orders(const std::filesystem::path& dir) {
  long total = 0;
  for (int f = 0; f < file_count; ++f) {
    std::ofstream out(dir / fmt::format("orders-{:02}.csv", f));
    out << "order_id,customer,amount_cents\n";
    for (int r = 0; r < rows_per_file; ++r) {
      const long cents = 100 + (f * 7919 + r * 104729) % 90000;
      total += cents;
      out << fmt::format("{}-{},customer-{},{}\n", f, r, (f * 31 + r) % 97, cents);
    }
  }
  return total;
}

/// The total a reader of the CSV text finds (what the scripted model "reads" from each result).
long total_of_csv(const std::string& text) {
  long total = 0;
  std::size_t at = text.find('\n');
  while (at != std::string::npos && at + 1 < text.size()) {
    const auto end = text.find('\n', at + 1);
    const auto line = text.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    if (const auto comma = line.rfind(','); comma != std::string::npos) total += std::stol(line.substr(comma + 1));
    at = end;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string prefix = argc > 1 ? argv[1] : "build/mcp-servers";
  const std::string server = prefix + "/node_modules/.bin/mcp-server-filesystem";
  if (::access(server.c_str(), X_OK) != 0) {
    fmt::print(stderr, "context_bytes: {} is missing; run scripts/install-mcp-servers {}\n", server, prefix);
    return 2;
  }
  char dir_template[] = "/tmp/psych-example-XXXXXX";
  if (!::mkdtemp(dir_template)) return 2;
  const std::filesystem::path dir = dir_template;
  const long expected = write_orders(dir);
  int status = 1;
  {
    auto client = psych::mcp_client::start({.name = "fs", .command = {server, dir.string()}});
    if (!client) {
      fmt::print(stderr, "context_bytes: {}\n", client.error().message());
      std::filesystem::remove_all(dir);
      return 1;
    }
    auto* fs = client.value().get();
    const auto tools = fs->list_tools();
    const bool has_text_tool = tools && std::ranges::any_of(tools.value(), [](const psych::mcp_tool& t) {
      return t.name == "read_text_file";
    });
    const std::string read_tool = has_text_tool ? "read_text_file" : "read_file";

    // ---- direct: a call per file; each call and each whole result enter the context ----
    std::uint64_t direct_bytes = 0;
    long direct_total = 0;
    for (int f = 0; f < file_count; ++f) {
      const auto arguments = fmt::format(R"({{"path":"{}"}})", (dir / fmt::format("orders-{:02}.csv", f)).string());
      const auto call = fmt::format(R"({{"name":"fs__{}","arguments":{}}})", read_tool, arguments);
      const auto answer = fs->call_tool(read_tool, arguments, {});
      if (!answer) {
        fmt::print(stderr, "context_bytes: {}\n", answer.error().message());
        break;
      }
      direct_bytes += call.size() + answer.value().json.size();
      direct_total += total_of_csv(scripted_model::text_of(answer.value().json));
    }

    // ---- program: one run_code call; the program and its result's payload enter the context ----
    std::vector<std::unique_ptr<psych::mcp_client>> clients;
    clients.push_back(std::move(client).value());
    auto source = psych::mcp_binding_source::create(std::move(clients)).value();
    const auto program = fmt::format(R"PY(tool = "fs__{}"
total = files = 0
for n in range({}):
    reply = await call_tool(tool, {{"path": "{}/orders-%02d.csv" % n}})
    for line in reply["content"][0]["text"].splitlines()[1:]:
        total += int(line.rsplit(",", 1)[1])
    files += 1
return {{"files": files, "total_cents": total}}
)PY",
                                     read_tool, file_count, dir.string());
    auto turn = scripted_model::run_program(*source, *source, "fs", program, dir / "run.log");
    if (!turn) {
      fmt::print(stderr, "context_bytes: {}\n", turn.error().message());
      std::filesystem::remove_all(dir);
      return 1;
    }
    const auto& result = turn.value().result;
    const auto& payload = turn.value().payload;
    const std::uint64_t program_bytes = program.size() + payload.size();
    const bool program_ok = result.ok() && result.value &&
                            result.value->text.find(fmt::format("\"total_cents\":{}", expected)) != std::string::npos;

    fmt::print("task: total {} orders in {} files offered by an MCP filesystem server ({}__{})\n",
               file_count * rows_per_file, file_count, "fs", read_tool);
    fmt::print("  direct tool calls:   {:>2} calls, {:>6} bytes into the model's context, total {} ({})\n", file_count,
               direct_bytes, direct_total, direct_total == expected ? "right" : "WRONG");
    fmt::print("  one run_code call:    1 call,  {:>6} bytes into the model's context, {} ({})\n", program_bytes,
               result.value ? result.value->text : result.failure ? result.failure->message : "no value",
               program_ok ? "right" : "WRONG");
    fmt::print("    of which the program {} bytes, the result's payload {} bytes: {}\n", program.size(),
               payload.size(), payload);
    fmt::print("  the program put {:.1f}x fewer bytes into the context (isolation: {})\n",
               static_cast<double>(direct_bytes) / static_cast<double>(program_bytes),
               result.isolation ? psych::name_of(*result.isolation) : "none");
    status = direct_total == expected && program_ok ? 0 : 1;
  }
  std::filesystem::remove_all(dir);
  return status;
}
