# How psych-launch-linux is linked. Every execution execs the launcher, and loading shared
# libraries was most of what that cost (~0.7 of ~1.3 ms exec-to-exit: libstdc++, libgcc_s, libm,
# fmt, libseccomp). So fmt is used header-only, libseccomp only at build time (the filter is
# embedded as BPF), and libstdc++/libgcc are linked in; where static glibc is installed the
# launcher is a static PIE, which needs no dynamic loader at all (a further ~0.2 ms) and keeps ASLR.
option(PSYCH_LAUNCHER_STATIC "Link psych-launch-linux as a static PIE where static glibc exists" ON)

function(psych_link_launcher target)
  target_link_libraries(${target} PRIVATE fmt::fmt-header-only)
  if(PSYCH_LAUNCHER_STATIC)
    include(CheckCXXSourceCompiles)
    set(CMAKE_REQUIRED_LINK_OPTIONS -static-pie)
    set(CMAKE_REQUIRED_FLAGS -fPIE)
    check_cxx_source_compiles("#include <string>\nint main(int c, char**) { return static_cast<int>(std::to_string(c).size()); }"
                              PSYCH_CAN_LINK_STATIC_PIE)
  endif()
  if(PSYCH_LAUNCHER_STATIC AND PSYCH_CAN_LINK_STATIC_PIE)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    # Alone: with -static-libstdc++ or -static-libgcc beside it, GCC 12 quietly links libc dynamically.
    target_link_options(${target} PRIVATE -static-pie)
  else()
    if(PSYCH_LAUNCHER_STATIC)
      message(STATUS "psych-launch-linux: no static glibc for a static PIE; linking libc dynamically")
    endif()
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
