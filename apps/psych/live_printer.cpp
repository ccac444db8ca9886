#include "live_printer.hpp"

#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/protocol/json.hpp"
#include "psych/terminal_text.hpp"
#include "psych/utf8.hpp"

namespace psych::cli {

namespace {

/// One line of `psych run --json --stream`. `data` is the chunk as text: the JSON writer replaces
/// bytes that are not UTF-8 (offsets still count the program's bytes).
struct output_event {
  std::string event = "output";
  std::string stream;
  std::uint64_t offset = 0;
  std::uint64_t skipped = 0;
  std::string data;
};

std::FILE* file_of(output_stream stream) { return stream == output_stream::stdout_stream ? stdout : stderr; }

}  // namespace

}  // namespace psych::cli

BOOST_HANA_ADAPT_STRUCT(psych::cli::output_event, event, stream, offset, skipped, data);

namespace psych::cli {

bool standard_output_is_terminal() {
#ifdef _WIN32
  return ::_isatty(::_fileno(stdout)) != 0;
#else
  return ::isatty(STDOUT_FILENO) != 0;
#endif
}

void live_printer::on_output(const output_chunk& chunk) {
  if (json_) {
    fmt::print("{}\n", protocol::encode_json(output_event{.stream = std::string(name_of(chunk.stream)),
                                                          .offset = chunk.offset,
                                                          .skipped = chunk.skipped,
                                                          .data = std::string(chunk.data)}));
    std::fflush(stdout);
    return;
  }
  auto& held = held_[static_cast<std::size_t>(chunk.stream)];
  if (chunk.skipped != 0) {
    // What was held back belonged to bytes that are now skipped: it can never be completed.
    print_text(chunk.stream, held);
    held.clear();
    std::fprintf(file_of(chunk.stream), "\n[psych: %llu bytes of %s skipped: this terminal fell behind]\n",
                 static_cast<unsigned long long>(chunk.skipped), std::string(name_of(chunk.stream)).c_str());
  }
  std::string text = std::move(held);
  text.append(chunk.data);
  const std::size_t tail = utf8::incomplete_tail(text);
  held.assign(text, text.size() - tail);
  text.resize(text.size() - tail);
  print_text(chunk.stream, text);
}

void live_printer::finish() {
  for (const auto stream : {output_stream::stdout_stream, output_stream::stderr_stream}) {
    auto& held = held_[static_cast<std::size_t>(stream)];
    print_text(stream, held);
    held.clear();
  }
}

void live_printer::print_text(output_stream stream, std::string_view text) {
  if (text.empty()) return;
  const std::string safe = terminal_text(text);
  std::FILE* to = file_of(stream);
  std::fwrite(safe.data(), 1, safe.size(), to);
  std::fflush(to);
}

}  // namespace psych::cli
