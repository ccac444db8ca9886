# Included by the top-level CMakeLists when PSYCH_FUZZ is on, before any target exists: every
# psych target (psych_host included) is compiled with the fuzzer's coverage hooks and with
# AddressSanitizer + UndefinedBehaviorSanitizer, so a bug deep in the host is caught where it
# happens. libFuzzer's main is linked only into the targets of fuzz/ (fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "PSYCH_FUZZ needs clang (libFuzzer): configure a separate build dir with "
                      "-DCMAKE_CXX_COMPILER=clang++ (fuzz/run-fuzzers does)")
endif()
# clang 14 cannot emit coverage counters for a C++20 coroutine ("Cannot represent a difference
# across sections"), so sources that use coroutines get the sanitizers without coverage. They are
# found by content, so the list follows the code as it moves between files.
file(GLOB_RECURSE psych_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cpp ${PROJECT_SOURCE_DIR}/apps/*.cpp)
set(ignored "")
foreach(source IN LISTS psych_sources)
  file(STRINGS ${source} coroutine_lines REGEX "co_await|co_return|co_yield")
  if(coroutine_lines)  # by path suffix: the compiler may be handed a relative path
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${source})
    string(APPEND ignored "src:*/${relative}\n")
  endif()
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/fuzz-coverage-ignorelist.txt "${ignored}")
# Every undefined-behaviour finding aborts: a report that lets the run continue is a finding
# libFuzzer never saves.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fsanitize-coverage-ignorelist=${PROJECT_BINARY_DIR}/fuzz-coverage-ignorelist.txt
                    -fsanitize-ignorelist=${CMAKE_CURRENT_LIST_DIR}/ubsan-ignorelist.txt
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
