#pragma once
// Where no descriptors can be handed over (Windows; docs/contract.md, "Channels on Windows"), the
// launcher connects to the host's loopback listener instead, once for control and once for the
// channel, and its first line on each is this frame: the per-launch secret the host gave it, and
// which stream the connection is. The host accepts only a connection that proves the secret within
// its deadline, and one of each stream.
#include <array>
#include <string>
#include <string_view>

#include <boost/hana/adapt_struct.hpp>

#include "psych/names.hpp"

namespace psych::protocol {

enum class attached_stream { control, channel };

struct attach_frame {
  static constexpr std::string_view type = "attach";
  static constexpr std::array<std::string_view, 2> required_members{"secret", "stream"};
  std::string secret;
  attached_stream stream = attached_stream::control;
};

/// The environment variables the host starts a Windows launcher with (its only input besides the
/// frames): the loopback port to connect to, and the secret to prove.
inline constexpr std::string_view host_port_variable = "PSYCH_HOST_PORT";
/// Where the deployment put the execution cgroups' parent (docs/cgroups.md): passed from the host's
/// environment to the launcher's, the one variable of the host's a launcher is given.
inline constexpr std::string_view cgroup_parent_variable = "PSYCH_CGROUP_PARENT";
inline constexpr std::string_view host_secret_variable = "PSYCH_HOST_SECRET";

}  // namespace psych::protocol

namespace psych {
PSYCH_ENUM_NAMES(protocol::attached_stream, "control", "channel");
}

BOOST_HANA_ADAPT_STRUCT(psych::protocol::attach_frame, secret, stream);
