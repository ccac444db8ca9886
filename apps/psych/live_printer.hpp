#pragma once
// `psych run --stream` (the default when standard output is a terminal): the program's output
// printed as it arrives. Readable: stdout to psych's stdout and stderr to psych's stderr, each
// through terminal_text() as the report's previews are, with a UTF-8 sequence split across two
// chunks held back until its rest arrives (so it is not spelled out as bytes). --json: one NDJSON
// `output` event per chunk on stdout, before the result's own line (docs/cli.md).
#include <array>
#include <cstdio>
#include <string>

#include "psych/host/live_output.hpp"

namespace psych::cli {

/// Whether standard output is a terminal (the readable report's default for --stream).
bool standard_output_is_terminal();

class live_printer final : public output_sink {
 public:
  explicit live_printer(bool json) : json_(json) {}
  void on_output(const output_chunk& chunk) override;
  /// Prints what is still held back (a sequence the program never finished), spelled out.
  void finish();

 private:
  void print_text(output_stream stream, std::string_view text);

  bool json_;
  std::array<std::string, 2> held_;  ///< per stream: the start of a UTF-8 sequence waiting for its rest
};

}  // namespace psych::cli
