#include "os/random_hex.hpp"

#ifdef _WIN32
#include <windows.h>
#include <bcrypt.h>
#else
#include <sys/random.h>  // getrandom (Linux), getentropy (macOS)
#include <unistd.h>      // getentropy (glibc)
#endif

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fmt/format.h>

namespace psych::host {

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  for (std::size_t got = 0; got < bytes;) {
#if defined(_WIN32)
    // The system-preferred generator, which needs no algorithm handle; one call takes a ULONG.
    const auto n = static_cast<ULONG>(std::min<std::size_t>(bytes - got, 1u << 20));
    const NTSTATUS status = ::BCryptGenRandom(nullptr, reinterpret_cast<PUCHAR>(raw.data() + got), n,
                                              BCRYPT_USE_SYSTEM_PREFERRED_RNG);
    if (status < 0)
      throw std::system_error(static_cast<int>(status), std::system_category(), "BCryptGenRandom");
    got += n;
#elif defined(__linux__)
    // Without flags it blocks only until the pool is first seeded.
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
#else
    // getentropy() hands out at most 256 bytes a call.
    const std::size_t n = std::min<std::size_t>(bytes - got, 256);
    if (::getentropy(raw.data() + got, n) != 0) throw std::system_error(errno, std::generic_category(), "getentropy");
    got += n;
#endif
  }
  std::string hex;
  hex.reserve(2 * bytes);
  for (const char byte : raw) hex += fmt::format("{:02x}", static_cast<unsigned char>(byte));
  return hex;
}

}  // namespace psych::host
