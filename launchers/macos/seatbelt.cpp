#include "seatbelt.hpp"

#include <sandbox.h>

namespace psych::launcher {

setup_result<void> enter_seatbelt(const std::string& profile) {
  char* error = nullptr;
  // sandbox_init with flags 0 takes the profile's SBPL text (SANDBOX_NAMED would take a name).
  // Apple marks it deprecated without a public replacement; it is what sandbox-exec(1) -p calls.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
  const int rc = ::sandbox_init(profile.c_str(), 0, &error);
  if (rc == 0) return success();
  std::string message = error != nullptr ? error : "no message";
  if (error != nullptr) ::sandbox_free_error(error);
#pragma clang diagnostic pop
  return fail(setup_error{launch_stage::seatbelt, "sandbox_init", 0, "sandbox_init(profile): " + message});
}

}  // namespace psych::launcher
