#pragma once
// A size in bytes as a person writes it on a command line: 300000000, 300M, 300MiB, 300MB, 1.5G.
// K, M, G and T alone are binary multiples, as ulimit, docker and psych's own help have always
// meant them; KiB, MiB, GiB and TiB say so explicitly; KB, MB, GB and TB are decimal (SI). The
// unit's letters may be in either case; a fraction comes to whole bytes rounded down.
#include <cstdint>
#include <string_view>

#include "psych/result.hpp"

namespace psych::cli {

/// The size `text` names, or invalid_limit (zero or negative) or invalid_argument (anything that
/// is not a size; the message lists the forms accepted), naming `option`.
result<std::uint64_t> parse_byte_size(std::string_view option, std::string_view text);

}  // namespace psych::cli
