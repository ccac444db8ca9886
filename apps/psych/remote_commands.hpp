#pragma once
// The commands that need TLS and HTTP (OpenSSL, Beast): psych serve, psych mcp --listen, and run
// or describe with --remote (cli::needs_remote). Loading OpenSSL costs every process that links it
// several milliseconds before main(), so psych, which users run for local work, has none of this
// code: its definition of run_remote (remote_handoff_posix.cpp) execs psych-remote, built from the
// same sources with remote_commands.cpp, installed beside the launcher. psych.exe's
// (remote_handoff_windows.cpp) refuses by name: there is no psych-remote for Windows. docs/cli.md.
#include "cli.hpp"

namespace psych::cli {

/// Runs a command that needs_remote. psych-remote runs it here; psych execs psych-remote with the
/// same argv (so the same parse, output and exit status) and returns only when that fails
/// (psych.exe: at once, with usage_error).
int run_remote(const command& parsed, char** argv);

}  // namespace psych::cli
