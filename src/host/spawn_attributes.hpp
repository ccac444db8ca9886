#pragma once
// posix_spawn attributes for a child the host starts (the launcher, an MCP server): its own
// process group, so it can be signalled whole and a terminal's ^C reaches the host rather than
// it, with every signal at its default disposition and an empty mask, whatever the host set.
#include <signal.h>
#include <spawn.h>

namespace psych::host {

class own_group_attributes {
 public:
  own_group_attributes() {
    posix_spawnattr_init(&attributes_);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes_, &all);
    posix_spawnattr_setsigmask(&attributes_, &none);
    posix_spawnattr_setpgroup(&attributes_, 0);
    posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  }
  ~own_group_attributes() { posix_spawnattr_destroy(&attributes_); }
  own_group_attributes(const own_group_attributes&) = delete;
  own_group_attributes& operator=(const own_group_attributes&) = delete;
  [[nodiscard]] const posix_spawnattr_t* get() const noexcept { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

}  // namespace psych::host
