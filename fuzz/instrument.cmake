# Included by the top-level CMakeLists when PSYCH_FUZZ is on, before any target exists: every
# psych target (psych_host included) is compiled with the fuzzer's coverage hooks and with
# AddressSanitizer + UndefinedBehaviorSanitizer, so a bug deep in the host is caught where it
# happens. libFuzzer's main is linked only into the targets of fuzz/ (fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "PSYCH_FUZZ needs clang (libFuzzer): configure a separate build dir with "
                      "-DCMAKE_CXX_COMPILER=clang++ (fuzz/run-fuzzers does)")
endif()
# clang 14 fails on a C++20 coroutine compiled with the fuzzer's instrumentation ("Cannot represent
# a difference across sections"). Sources that use coroutines are found by content (so the list
# follows the code as it moves between files) and compiled without any sanitizer by
# fuzz/CMakeLists.txt; no target fuzzes them.
file(GLOB_RECURSE psych_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cpp ${PROJECT_SOURCE_DIR}/apps/*.cpp)
set(psych_coroutine_sources "")
foreach(source IN LISTS psych_sources)
  file(STRINGS ${source} coroutine_lines REGEX "co_await|co_return|co_yield")
  if(coroutine_lines)
    list(APPEND psych_coroutine_sources ${source})
  endif()
endforeach()
# Every undefined-behaviour finding aborts: a report that lets the run continue is a finding
# libFuzzer never saves.
# The coverage ignorelist takes those sources out of coverage too (fuzz/CMakeLists.txt drops
# their sanitizers as well, which is what clang needs).
set(ignored "")
foreach(source IN LISTS psych_coroutine_sources)
  file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${source})
  string(APPEND ignored "src:*/${relative}\n")
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/fuzz-coverage-ignorelist.txt "${ignored}")
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fsanitize-coverage-ignorelist=${PROJECT_BINARY_DIR}/fuzz-coverage-ignorelist.txt
                    -fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/ubsan-ignorelist.txt
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
