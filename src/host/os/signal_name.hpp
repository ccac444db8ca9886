#pragma once
// A signal's name for messages. The numbers come from launchers' exit reports: a POSIX launcher's
// are its own system's; a Windows launcher reports none.
#include <signal.h>

#include <cctype>
#include <string>

#include <fmt/format.h>

namespace psych::host {

/// "SIGKILL" for 9; "signal 99" for a number this system has no name for (every number, on Windows).
inline std::string signal_name(long long number) {
#if defined(__linux__)
  const char* abbreviation = number > 0 && number < NSIG ? ::sigabbrev_np(static_cast<int>(number)) : nullptr;
  return abbreviation ? fmt::format("SIG{}", abbreviation) : fmt::format("signal {}", number);
#elif defined(_WIN32)
  return fmt::format("signal {}", number);
#else
  // BSD's names are lower case ("kill").
  if (number <= 0 || number >= NSIG) return fmt::format("signal {}", number);
  std::string name = "SIG";
  for (const char* c = ::sys_signame[number]; *c != '\0'; ++c) name.push_back(static_cast<char>(std::toupper(*c)));
  return name;
#endif
}

}  // namespace psych::host
