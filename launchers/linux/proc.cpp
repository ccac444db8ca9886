#include "proc.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

setup_result<std::vector<pid_t>> list_processes() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return fail(system_failure(launch_stage::proc, "opendir", errno, "/proc"));
  while (const dirent* entry = ::readdir(proc)) {
    const std::string_view name = entry->d_name;
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc{} || end != name.data() + name.size() || pid <= 0) continue;
    pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

std::optional<std::string_view> read_proc_file(pid_t pid, const char* name, char* buffer,
                                               std::size_t size) {
  char path[64];
  *fmt::format_to_n(path, sizeof path - 1, "/proc/{}/{}", pid, name).out = '\0';
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // A read that fails ends the text where it got to, as the end of the file does.
  const std::size_t used = posix::read_all(fd, buffer, size).done;
  ::close(fd);
  if (used == 0) return std::nullopt;
  return std::string_view(buffer, used);
}

std::optional<process_stat> read_stat(pid_t pid) {
  char buffer[1024];
  const auto text = read_proc_file(pid, "stat", buffer, sizeof buffer);
  if (!text) return std::nullopt;
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  //  utime stime cutime cstime priority nice threads itrealvalue starttime ..."
  // comm may hold spaces and ')', so fields are counted from the last ')'.
  const auto close = text->rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text->substr(close + 1);
  process_stat stat{.pid = pid};
  for (int field = 3; field <= 22 && !rest.empty(); ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const auto space = rest.find(' ');
    const std::string_view value = rest.substr(0, space);
    if (field == 3 && !value.empty()) stat.state = value.front();
    if (field == 4) std::from_chars(value.data(), value.data() + value.size(), stat.ppid);
    if (field == 22) {
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), stat.start_time);
      if (ec != std::errc{}) return std::nullopt;
      return stat;
    }
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space);
  }
  return std::nullopt;
}

}  // namespace psych::launcher
