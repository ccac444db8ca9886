# How psych-launch-linux is linked. Every execution execs the launcher, and loading shared
# libraries was most of what that cost (~0.7 of ~1.3 ms exec-to-exit: libstdc++, libgcc_s, libm,
# fmt, libseccomp). So fmt is used header-only and libstdc++/libgcc are linked in; where static
# glibc and libseccomp are installed the launcher is a static PIE, which needs no dynamic loader
# at all (a further ~0.2 ms) and keeps ASLR.
option(PSYCH_LAUNCHER_STATIC "Link psych-launch-linux as a static PIE where static glibc and libseccomp exist" ON)

function(psych_link_launcher target)
  target_link_libraries(${target} PRIVATE fmt::fmt-header-only)
  if(PSYCH_LAUNCHER_STATIC)
    find_library(PSYCH_SECCOMP_ARCHIVE NAMES libseccomp.a HINTS ${LIBSECCOMP_LIBRARY_DIRS})
    if(PSYCH_SECCOMP_ARCHIVE)
      include(CheckCXXSourceCompiles)
      set(CMAKE_REQUIRED_LINK_OPTIONS -static-pie)
      set(CMAKE_REQUIRED_FLAGS -fPIE)
      set(CMAKE_REQUIRED_INCLUDES ${LIBSECCOMP_INCLUDE_DIRS})
      set(CMAKE_REQUIRED_LIBRARIES ${PSYCH_SECCOMP_ARCHIVE})
      check_cxx_source_compiles("#include <seccomp.h>\nint main() { seccomp_release(seccomp_init(0)); }"
                                PSYCH_CAN_LINK_STATIC_PIE)
    endif()
  endif()
  if(PSYCH_LAUNCHER_STATIC AND PSYCH_CAN_LINK_STATIC_PIE)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_include_directories(${target} SYSTEM PRIVATE ${LIBSECCOMP_INCLUDE_DIRS})
    target_link_libraries(${target} PRIVATE ${PSYCH_SECCOMP_ARCHIVE})
    # Alone: with -static-libstdc++ or -static-libgcc beside it, GCC 12 quietly links libc dynamically.
    target_link_options(${target} PRIVATE -static-pie)
  else()
    if(PSYCH_LAUNCHER_STATIC)
      message(STATUS "psych-launch-linux: no static glibc and libseccomp for a static PIE; linking those two dynamically")
    endif()
    target_link_libraries(${target} PRIVATE PkgConfig::LIBSECCOMP)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
