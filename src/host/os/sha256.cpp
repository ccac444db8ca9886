#include "os/sha256.hpp"

#include <array>

#ifdef _WIN32
#include <windows.h>
#include <bcrypt.h>

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#else
#include <openssl/evp.h>
#endif

namespace psych::host {
namespace {

using digest = std::array<unsigned char, 32>;

#ifdef _WIN32
// Windows' own CNG, so that psych_host on Windows links no OpenSSL (only psych::remote's TLS does).
// One call of BCryptHashData takes a ULONG of input: longer inputs go in pieces.
result<digest> sha256_of(std::string_view bytes) {
  const auto failed = [](const char* call, NTSTATUS status) {
    return fail_with(error_kind::system_call_failed,
                   fmt::format("{}(SHA-256) failed with status 0x{:08x}", call, static_cast<unsigned long>(status)));
  };
  BCRYPT_ALG_HANDLE algorithm = nullptr;
  if (const NTSTATUS status = ::BCryptOpenAlgorithmProvider(&algorithm, BCRYPT_SHA256_ALGORITHM, nullptr, 0); status < 0)
    return failed("BCryptOpenAlgorithmProvider", status);
  const std::unique_ptr<void, void (*)(void*)> algorithm_owner(algorithm, [](void* held) { ::BCryptCloseAlgorithmProvider(held, 0); });
  BCRYPT_HASH_HANDLE hash = nullptr;
  if (const NTSTATUS status = ::BCryptCreateHash(algorithm, &hash, nullptr, 0, nullptr, 0, 0); status < 0)
    return failed("BCryptCreateHash", status);
  const std::unique_ptr<void, void (*)(void*)> hash_owner(hash, [](void* held) { ::BCryptDestroyHash(held); });
  for (std::size_t at = 0; at < bytes.size();) {
    const auto piece = static_cast<ULONG>(std::min<std::size_t>(bytes.size() - at, ULONG{1} << 30));
    auto* input = reinterpret_cast<PUCHAR>(const_cast<char*>(bytes.data() + at));  // read only
    if (const NTSTATUS status = ::BCryptHashData(hash, input, piece, 0); status < 0) return failed("BCryptHashData", status);
    at += piece;
  }
  digest out{};
  if (const NTSTATUS status = ::BCryptFinishHash(hash, out.data(), static_cast<ULONG>(out.size()), 0); status < 0)
    return failed("BCryptFinishHash", status);
  return out;
}
#else
result<digest> sha256_of(std::string_view bytes) {
  digest out{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &length, EVP_sha256(), nullptr) != 1 || length != out.size())
    return fail_with(error_kind::system_call_failed, "EVP_Digest(SHA-256) failed");
  return out;
}
#endif

}  // namespace

result<std::string> sha256_hex(std::string_view bytes) {
  PSYCH_TRY(const auto digest, sha256_of(bytes));
  constexpr std::string_view digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (const unsigned char byte : digest) {
    hex.push_back(digits[byte >> 4]);
    hex.push_back(digits[byte & 0xf]);
  }
  return hex;
}

}  // namespace psych::host
