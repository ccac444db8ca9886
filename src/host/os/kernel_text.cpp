#include "os/kernel_text.hpp"

#include <fstream>
#include <iterator>

namespace psych::host {

std::optional<std::string> read_kernel_text(const std::filesystem::path& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace psych::host
