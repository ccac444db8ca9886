#pragma once
// The commands that need TLS and HTTP (OpenSSL, Beast): psych serve, and run or describe with
// --remote (cli::needs_remote). Loading OpenSSL costs every process that links it several
// milliseconds before main(), so psych, which users run for local work, has none of this code:
// its definition of run_remote (remote_handoff.cpp) execs psych-remote, built from the same
// sources with remote_commands.cpp, installed beside the launcher. docs/cli.md.
#include "cli.hpp"

namespace psych::cli {

/// Runs a command that needs_remote. psych-remote runs it here; psych execs psych-remote with the
/// same argv (so the same parse, output and exit status) and returns only when that fails.
int run_remote(const command& parsed, char** argv);

}  // namespace psych::cli
