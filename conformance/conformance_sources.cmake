# The conformance suite's sources, by where they build (paths relative to this directory).
#   portable  the cases whose programs and checks every platform has, and the backends' shared part:
#             conformance_tests on Linux and macOS, psych-windows-conformance-tests.exe on Windows
#   posix     the POSIX backends (uids, /proc, containers, remote) and the cases that need them
set(psych_conformance_dir ${CMAKE_CURRENT_LIST_DIR})
set(psych_conformance_portable_sources
    main.cpp backends_common.cpp test_contract.cpp test_bindings.cpp test_output.cpp test_runtime.cpp test_limits.cpp
    test_live_output.cpp)
set(psych_conformance_posix_sources
    backends_posix.cpp test_lying_launcher.cpp test_limits_posix.cpp test_containment.cpp test_cli.cpp test_hostile.cpp
    test_setup.cpp test_unix_sockets.cpp test_identity.cpp test_neighbours.cpp test_channel.cpp test_container.cpp
    test_serve.cpp test_prepared.cpp test_sources.cpp test_egress_allowlist.cpp)
set(psych_conformance_windows_sources backends_windows.cpp test_limits_windows.cpp)
list(TRANSFORM psych_conformance_portable_sources PREPEND ${psych_conformance_dir}/)
list(TRANSFORM psych_conformance_posix_sources PREPEND ${psych_conformance_dir}/)
list(TRANSFORM psych_conformance_windows_sources PREPEND ${psych_conformance_dir}/)
