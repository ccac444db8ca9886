# Turns the bootstrap into a C++ header at build time:
#   cmake -DLOADER=bootstrap_loader.py -DBLOB=bootstrap.blob -DOUTPUT=psych_bootstrap.hpp -P embed_bootstrap.cmake
# LOADER is the interpreter's `-c` argument; BLOB is what compile_bootstrap.py made of the bootstrap's
# parts, joined (magic, length, marshalled code, source), which the child reads from fd 4.
# Bytes rather than raw string literals, so no delimiter can collide with the contents.

# "0x41,0x42,..." for a file's bytes, 16 to a line.
function(psych_bytes_of path out_var out_size)
  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  if(size EQUAL 0)
    message(FATAL_ERROR "${path} is empty")
  endif()
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
         "\\1\n  " bytes "${bytes}")
  set(${out_var} "${bytes}" PARENT_SCOPE)
  set(${out_size} "${size}" PARENT_SCOPE)
endfunction()

psych_bytes_of("${LOADER}" loader_bytes loader_size)
# The loader travels as one execve argument: no NUL can cross, and Linux caps one argument at
# 128 KiB (MAX_ARG_STRLEN).
if(loader_size GREATER_EQUAL 131072)
  message(FATAL_ERROR "${LOADER} is ${loader_size} bytes; one argument may hold at most 131071")
endif()
if(loader_bytes MATCHES "0x00,")
  message(FATAL_ERROR "${LOADER} holds a NUL byte, which cannot be passed as an argument")
endif()
psych_bytes_of("${BLOB}" blob_bytes blob_size)
if(blob_size LESS 8)
  message(FATAL_ERROR "${BLOB} is ${blob_size} bytes, shorter than its own header")
endif()

file(WRITE "${OUTPUT}.tmp" "// Generated from launchers/sandbox_runtime/bootstrap_loader.py and bootstrap/*.py by embed_bootstrap.cmake.
// Do not edit.
#pragma once
#include <span>
#include <string_view>

namespace psych::launcher {

inline constexpr char bootstrap_loader_bytes[] = {
  ${loader_bytes}};

/// The interpreter's `-c` argument: loads the bootstrap from fd 4 and runs it.
inline constexpr std::string_view bootstrap_loader{bootstrap_loader_bytes, sizeof bootstrap_loader_bytes};

inline constexpr unsigned char bootstrap_blob_bytes[] = {
  ${blob_bytes}};

/// The bootstrap, precompiled (compile_bootstrap.py): magic, length, marshalled code, source.
inline constexpr std::span<const unsigned char> bootstrap_blob{bootstrap_blob_bytes, sizeof bootstrap_blob_bytes};

}  // namespace psych::launcher
")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
