#pragma once
// Where a credential comes from: a function called fresh for every request that needs it, so a
// rotated secret is picked up at once. It is the only source of the credential, which never
// appears in a result, a record, a log line, a URL, an error message or an exception. Every
// source that sends one takes it this way: a remote sandbox service, an MCP server over HTTP, an
// A2A peer, an HTTP tool.
#include <functional>
#include <string>

#include "psych/result.hpp"

namespace psych {

using secret_resolver = std::function<result<std::string>()>;

/// A secret_resolver that runs `command` with /bin/sh each time and takes its standard output,
/// without the trailing newline (psych's --token-command). A failure never quotes the output.
secret_resolver command_secret(std::string command);

}  // namespace psych
