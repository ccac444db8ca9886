# doctest.own_options: doctest's own options (--list-test-cases, --count, --help, a filter that
# matches nothing) must work on every doctest binary of the build, since a developer reaches for
# them first. Included after every test directory, so that it finds each executable that links
# doctest wherever it was defined.

function(psych_collect_doctest_binaries dir out)
  set(found "")
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(links ${target} LINK_LIBRARIES)
    if(type STREQUAL "EXECUTABLE" AND "doctest::doctest" IN_LIST links)
      list(APPEND found ${target})
    endif()
  endforeach()
  get_property(children DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(child IN LISTS children)
    psych_collect_doctest_binaries(${child} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

psych_collect_doctest_binaries(${PROJECT_SOURCE_DIR} psych_doctest_binaries)
set(psych_doctest_files "")
foreach(target IN LISTS psych_doctest_binaries)
  list(APPEND psych_doctest_files $<TARGET_FILE:${target}>)
endforeach()
add_test(NAME doctest.own_options
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-doctest-options ${psych_doctest_files})
