# Turns the Python bootstrap into a C++ header at build time:
#   cmake -DINPUT=bootstrap.py -DOUTPUT=psych_bootstrap.hpp -P embed_bootstrap.cmake
# Bytes rather than a raw string literal, so no delimiter can collide with the source.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR size "${digits} / 2")
# The source travels as one execve argument: no NUL can cross, and Linux caps one argument at
# 128 KiB (MAX_ARG_STRLEN).
if(size EQUAL 0)
  message(FATAL_ERROR "${INPUT} is empty")
endif()
if(size GREATER_EQUAL 131072)
  message(FATAL_ERROR "${INPUT} is ${size} bytes; one argument may hold at most 131071")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
if(bytes MATCHES "0x00,")
  message(FATAL_ERROR "${INPUT} holds a NUL byte, which cannot be passed as an argument")
endif()
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "// Generated from launchers/common/bootstrap.py by embed_bootstrap.cmake. Do not edit.
#pragma once
#include <string_view>

namespace psych::launcher {

inline constexpr char bootstrap_bytes[] = {
  ${bytes}};

/// The bootstrap's source, passed to the interpreter as `-c`.
inline constexpr std::string_view bootstrap_source{bootstrap_bytes, sizeof bootstrap_bytes};

}  // namespace psych::launcher
")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
