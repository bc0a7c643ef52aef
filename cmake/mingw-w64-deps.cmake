# Included after project() by cmake/mingw-w64.cmake (CMAKE_PROJECT_INCLUDE). Debian has no
# Windows builds of CLI11, toml++, nlohmann_json and spdlog, but all four can be used header-
# only: spdlog without SPDLOG_COMPILED_LIB, and the fmt it is configured for (Debian's
# tweakme.h sets SPDLOG_FMT_EXTERNAL) with FMT_HEADER_ONLY. Their headers are taken from the
# build host through a directory that holds links to just them, so nothing else of
# /usr/include shadows mingw-w64's own headers; find_package() then finds stub configs
# that add nothing to the targets made here.
set(dsh_cross_headers "${CMAKE_BINARY_DIR}/cross-headers")
set(dsh_cross_configs "${CMAKE_BINARY_DIR}/cross-configs")
file(MAKE_DIRECTORY "${dsh_cross_headers}" "${dsh_cross_configs}")
foreach(dir CLI toml++ nlohmann spdlog fmt)
  if(NOT EXISTS "/usr/include/${dir}")
    message(FATAL_ERROR "dsh-confine cross build: /usr/include/${dir} is missing (bash .ci/setup installs it)")
  endif()
  if(NOT EXISTS "${dsh_cross_headers}/${dir}")
    file(CREATE_LINK "/usr/include/${dir}" "${dsh_cross_headers}/${dir}" SYMBOLIC)
  endif()
endforeach()

foreach(target CLI11::CLI11 tomlplusplus::tomlplusplus nlohmann_json::nlohmann_json spdlog::spdlog)
  if(NOT TARGET ${target})
    add_library(${target} INTERFACE IMPORTED GLOBAL)
    # Imported include directories are system directories: their warnings are not ours.
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dsh_cross_headers}")
  endif()
endforeach()
set_property(TARGET spdlog::spdlog APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)

foreach(package CLI11 spdlog tomlplusplus nlohmann_json)
  file(WRITE "${dsh_cross_configs}/${package}Config.cmake"
       "# A stub: ${package}'s target is made by cmake/mingw-w64-deps.cmake.\n")
  set(${package}_DIR "${dsh_cross_configs}" CACHE PATH "stub config for the mingw-w64 cross build" FORCE)
endforeach()

# The test suite needs a GoogleTest built for Windows (.ci/cross-windows builds one from
# Debian's sources and passes GTest_DIR); without one, a cross build makes the binary only.
# The man page is a Debian-package matter: not part of a Windows build.
if(NOT DEFINED GTest_DIR)
  set(DSH_BUILD_TESTS OFF CACHE BOOL "Build the test suite")
endif()
set(DSH_MAN_PAGE OFF CACHE BOOL "Generate and install the dsh-confine(1) man page")
# gtest_discover_tests() would run each test binary right after linking it, which a Linux host
# cannot do with a .exe: discovery waits for ctest (under an emulator, e.g. wine) instead.
set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST CACHE STRING "When gtest_discover_tests() lists the tests")
