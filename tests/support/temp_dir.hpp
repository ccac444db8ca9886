#pragma once
// A fresh directory under /tmp for one test (or one cluster of services), removed with everything
// in it (remove_all never follows a link) however the test ends. On Windows (the Windows launcher's
// tests, tests/windows_launcher) under the account's own %TEMP%.
#ifndef _WIN32
#include <sys/stat.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>

namespace psych::testing {

class temp_dir {
 public:
  /// `mode` 0711 lets an execution's own uid reach a workspace made inside.
  explicit temp_dir(const std::string& prefix, unsigned mode = 0700) {
#ifdef _WIN32
    (void)mode;  // %TEMP% is the account's own; no other account reads it by default
    // No mkdtemp: a random name, taken only if create_directory made it just now.
    std::random_device random;
    const auto base = std::filesystem::temp_directory_path();
    for (int attempt = 0; attempt < 16 && path_.empty(); ++attempt) {
      auto candidate = base / (prefix + "-" + std::to_string(random()));
      if (std::filesystem::create_directory(candidate)) path_ = std::move(candidate);
    }
    if (path_.empty()) throw std::runtime_error("no fresh directory could be made in " + base.string());
#else
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    path_ = pattern;
    if (::chmod(pattern.c_str(), mode) != 0) throw std::runtime_error("chmod: " + std::string(std::strerror(errno)));
#endif
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace psych::testing
