// A stand-in interpreter for the launcher's tests: it reports what crossed exec
// instead of running the bootstrap. The launcher runs it exactly as it would run
// Python (`<interpreter> -I -S -c <loader> <token> ...`); it writes one line per
// fact to stdout and exits 0.
//
//   fd <n> <readlink target>   every open descriptor but the one listing them
//   seals <mask>               F_GET_SEALS of fd 4
//   blob <ok>                  1 when fd 4 reads, from offset 0, as magic + length + code + source
//   loader <first line>          the first line of the -c argument
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace {

bool blob_is_well_formed(int fd) {
  std::string blob;
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) blob.append(chunk, static_cast<std::size_t>(n));
  if (blob.size() < 8) return false;
  std::uint32_t code = 0;
  for (int i = 3; i >= 0; --i) code = code << 8 | static_cast<unsigned char>(blob[4 + static_cast<std::size_t>(i)]);
  if (blob.size() <= 8 + std::size_t{code}) return false;
  return std::string_view(blob).substr(8 + code).starts_with("# psych bootstrap:");
}

}  // namespace

int main(int argc, char** argv) {
  DIR* fds = ::opendir("/proc/self/fd");
  if (fds == nullptr) return 1;
  const int own = ::dirfd(fds);
  while (const dirent* entry = ::readdir(fds)) {
    if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == own) continue;
    char target[256] = {};
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    std::printf("fd %s %s\n", entry->d_name, n < 0 ? "?" : target);
  }
  ::closedir(fds);
  std::printf("seals %d\n", ::fcntl(4, F_GET_SEALS));
  std::printf("blob %d\n", blob_is_well_formed(4) ? 1 : 0);
  if (argc > 4) {
    const std::string_view loader = argv[4];
    std::printf("loader %.*s\n", static_cast<int>(loader.substr(0, loader.find('\n')).size()), loader.data());
  }
  return 0;
}
