#pragma once
// A pipe a test owns: both ends closed when it goes, unless handed away first.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <utility>

#include <doctest/doctest.h>

struct pipe_pair {
  int read = -1;
  int write = -1;
  pipe_pair() {
    int ends[2];
    REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
    read = ends[0];
    write = ends[1];
  }
  ~pipe_pair() {
    close_write();
    if (read >= 0) ::close(read);
  }
  pipe_pair(const pipe_pair&) = delete;
  pipe_pair& operator=(const pipe_pair&) = delete;
  void close_write() {
    if (write >= 0) ::close(write);
    write = -1;
  }
  int give_read() { return std::exchange(read, -1); }
  int give_write() { return std::exchange(write, -1); }
  /// Everything until end of file (the write end is closed here first).
  std::string drain() {
    close_write();
    std::string all;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(read, buffer, sizeof buffer)) > 0) all.append(buffer, static_cast<std::size_t>(n));
    return all;
  }
};
