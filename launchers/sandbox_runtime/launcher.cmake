# What every launcher's build does alike: embed the bootstrap, its parts joined and precompiled by
# the build machine's own interpreter (compile_bootstrap.py) and turned into a header of bytes
# (embed_bootstrap.cmake); and put the executable where the CLI and the library find it, in the
# build tree as installed.
set(PSYCH_BOOTSTRAP_PARTS ${CMAKE_CURRENT_LIST_DIR}/bootstrap CACHE PATH
    "The folder of the Python bootstrap's parts, joined and embedded into the launcher")

# The bootstrap is precompiled with the build machine's own interpreter: the system's first, never
# a version manager's shim (pyenv's is a script that picks a Python from the environment, which
# may not be the one the sandbox runs). The bytecode is only used when the sandbox's interpreter
# has the same magic number; any other one compiles the embedded source at start.
find_program(PSYCH_BUILD_PYTHON NAMES python3 PATHS /usr/bin /usr/local/bin NO_DEFAULT_PATH)
find_program(PSYCH_BUILD_PYTHON NAMES python3)
if(NOT PSYCH_BUILD_PYTHON)
  message(FATAL_ERROR "python3 is needed at build time to precompile the bootstrap into the launcher; "
                      "install it (/usr/bin/python3) or set PSYCH_BUILD_PYTHON to an interpreter")
endif()

# Adds generated/psych_bootstrap.hpp (bootstrap_loader and bootstrap_blob) to `target`, in the
# current binary directory. LOADER: the `-c` argument, bootstrap_loader.py unless named (the Windows
# launcher's reads the handover pipe instead of fd 4). The joined source the blob carries is written
# beside it as generated/bootstrap.py, named by the target's PSYCH_BOOTSTRAP_JOINED property, for
# what runs the bootstrap as source (benchmarks/output_flush.cpp).
function(psych_embed_bootstrap target)
  cmake_parse_arguments(PARSE_ARGV 1 embed "" "LOADER" "")
  set(runtime ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  if(NOT embed_LOADER)
    set(embed_LOADER ${runtime}/bootstrap_loader.py)
  endif()
  # compile_bootstrap.py's ORDER says which parts there are, and refuses a folder that differs.
  file(GLOB parts CONFIGURE_DEPENDS ${PSYCH_BOOTSTRAP_PARTS}/*.py)
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/generated)
  set(blob ${generated}/bootstrap.blob)
  set(joined ${generated}/bootstrap.py)
  set(header ${generated}/psych_bootstrap.hpp)
  add_custom_command(
    OUTPUT ${blob} ${joined}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${generated}
    COMMAND ${PSYCH_BUILD_PYTHON} -I ${runtime}/compile_bootstrap.py ${PSYCH_BOOTSTRAP_PARTS} ${blob} ${joined}
    DEPENDS ${parts} ${runtime}/compile_bootstrap.py ${PSYCH_BUILD_PYTHON}
    COMMENT "Joining and precompiling the bootstrap with ${PSYCH_BUILD_PYTHON}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DLOADER=${embed_LOADER} -DBLOB=${blob} -DOUTPUT=${header}
            -P ${runtime}/embed_bootstrap.cmake
    DEPENDS ${embed_LOADER} ${blob} ${runtime}/embed_bootstrap.cmake
    COMMENT "Embedding the bootstrap into ${target}"
    VERBATIM)
  target_sources(${target} PRIVATE ${header})
  target_include_directories(${target} PRIVATE ${generated})
  set_target_properties(${target} PROPERTIES PSYCH_BOOTSTRAP_JOINED ${joined})
endfunction()

# In the build tree the launcher sits where an install puts it relative to the CLI
# (build/apps/psych finds build/libexec/psych/<launcher> as bin/psych finds
# libexec/psych/<launcher>), so the CLI finds it the same way in both.
function(psych_place_launcher target)
  file(RELATIVE_PATH libexec_from_bin ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBEXECDIR}/psych)
  cmake_path(ABSOLUTE_PATH libexec_from_bin BASE_DIRECTORY ${PROJECT_BINARY_DIR}/apps NORMALIZE
             OUTPUT_VARIABLE build_dir)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${build_dir})
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/psych)
endfunction()
