#pragma once
// A fresh directory under /tmp for one test (or one cluster of services), removed with everything
// in it (remove_all never follows a link) however the test ends.
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace psych::testing {

class temp_dir {
 public:
  /// `mode` 0711 lets an execution's own uid reach a workspace made inside.
  explicit temp_dir(const std::string& prefix, unsigned mode = 0700) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    path_ = pattern;
    if (::chmod(pattern.c_str(), mode) != 0) throw std::runtime_error("chmod: " + std::string(std::strerror(errno)));
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
