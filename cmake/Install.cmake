# What `cmake --install` puts on a system, and the Debian package CPack makes of it: the
# binary, the man page (generated at build time from docs/dsh-confine.1.md), the bash and zsh
# completions and an example config. `cpack -G DEB` in the build directory makes the .deb.
include(GNUInstallDirs)

# The man page and the .deb are for Linux hosts; elsewhere (and in cross builds) they are opt-in.
string(COMPARE EQUAL "${CMAKE_SYSTEM_NAME}" "Linux" dsh_linux)
option(DSH_MAN_PAGE "Generate and install the dsh-confine(1) man page (needs pandoc or help2man)" ${dsh_linux})
set(DSH_PACKAGE_MAINTAINER "dsh-confine maintainers <maintainers@dsh-confine.invalid>"
    CACHE STRING "The Maintainer field of the Debian package")

# Installed stripped: debug information and symbols are most of a RelWithDebInfo binary (38 MB
# here, 2.8 MB stripped), and they serve debugging, where the build tree's own binary keeps
# them. This drops them rather than splitting them into a separate file. -DDSH_INSTALL_STRIP=OFF
# installs the unstripped binary (`cmake --install --strip` strips whatever this says).
option(DSH_INSTALL_STRIP "Strip dsh-confine when installing it" ON)
if(DSH_INSTALL_STRIP)
  install(CODE "set(CMAKE_INSTALL_DO_STRIP 1)")
endif()
install(TARGETS dsh-confine RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# --- the man page ---------------------------------------------------------------------------
# pandoc renders the hand-written page; without it, help2man builds a page from --help of the
# built binary (less complete, but never out of date with the options). -DDSH_PANDOC=OFF
# forces the fallback.
if(DSH_MAN_PAGE)
  find_program(DSH_PANDOC pandoc)
  find_program(DSH_HELP2MAN help2man)
  find_program(DSH_GZIP gzip)
  set(man_page ${CMAKE_BINARY_DIR}/dsh-confine.1)
  set(man_source ${PROJECT_SOURCE_DIR}/docs/dsh-confine.1.md)
  if(DSH_PANDOC)
    add_custom_command(OUTPUT ${man_page}
      COMMAND ${DSH_PANDOC} --standalone --from markdown --to man
              --metadata "footer=dsh-confine ${PROJECT_VERSION}" --output ${man_page} ${man_source}
      DEPENDS ${man_source}
      COMMENT "Generating dsh-confine.1 from docs/dsh-confine.1.md (pandoc)"
      VERBATIM)
  elseif(DSH_HELP2MAN AND NOT CMAKE_CROSSCOMPILING)  # help2man runs the built binary
    message(STATUS "dsh-confine: no pandoc; the man page comes from help2man and --help")
    add_custom_command(OUTPUT ${man_page}
      COMMAND ${DSH_HELP2MAN} --no-info --no-discard-stderr --section=1
              "--name=run an untrusted command under a file-effect policy" --output=${man_page}
              $<TARGET_FILE:dsh-confine>
      DEPENDS dsh-confine
      COMMENT "Generating dsh-confine.1 from --help (help2man)"
      VERBATIM)
  else()
    message(FATAL_ERROR
      "dsh-confine: the man page needs pandoc (or help2man, in a native build), and neither was found.\n"
      "Install one (Debian: apt-get install pandoc), or configure with -DDSH_MAN_PAGE=OFF.")
  endif()
  # Debian installs man pages compressed; -n keeps the name and time out, for reproducible bytes.
  if(DSH_GZIP)
    add_custom_command(OUTPUT ${man_page}.gz
      COMMAND ${DSH_GZIP} -9 -n -k -f ${man_page}
      DEPENDS ${man_page}
      VERBATIM)
    set(installed_man_page ${man_page}.gz)
  else()
    set(installed_man_page ${man_page})
  endif()
  add_custom_target(dsh-confine-man ALL DEPENDS ${man_page} ${installed_man_page})
  install(FILES ${installed_man_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

# --- completions and the example config ------------------------------------------------------
# --backend offers the backends this build has, as platform/<os>/platform_<os>.cpp's
# make_backend knows them: the others fail on this system, in classify too.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(DSH_BACKENDS "bwrap landlock")
elseif(APPLE)
  set(DSH_BACKENDS "seatbelt")
elseif(WIN32)
  set(DSH_BACKENDS "restricted-token")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cli/completions/dsh-confine.bash.in
               ${CMAKE_BINARY_DIR}/completions/dsh-confine @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cli/completions/_dsh-confine.in
               ${CMAKE_BINARY_DIR}/completions/_dsh-confine @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/completions/dsh-confine
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${CMAKE_BINARY_DIR}/completions/_dsh-confine
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${PROJECT_SOURCE_DIR}/docs/config.example.toml DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- the package: a .deb on Linux ------------------------------------------------------------
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(CPACK_GENERATOR DEB)
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
elseif(WIN32)
  set(CPACK_GENERATOR ZIP)
else()
  set(CPACK_GENERATOR TGZ)
endif()
set(CPACK_PACKAGE_NAME dsh-confine)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run an untrusted command under a file-effect policy")
# Lines of at most 80 columns: each becomes a line of the Description field (lintian).
set(CPACK_PACKAGE_DESCRIPTION
  "dsh-confine runs a command (an agent's tool call, a build script, a CI job)
with the host readable and only the workspace writable (or nothing writable),
says how completely that policy is enforced on this host, and tells a sandbox
refusal apart from a blocked file effect and an ordinary failure. On Linux it
confines with bubblewrap or, without user namespaces, with Landlock; a
confined mode never falls back to running unconfined.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Debian revision 1 of upstream 0.1.0 (0.1.0-1): dsh-confine is not software made for Debian
# alone, so this is not a native package, and its changelog is changelog.Debian.gz (Debian
# policy 12.7; lintian checks the name against the version).
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DSH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: computed by dpkg-shlibdeps (dpkg-dev) from the libraries the binary links. The
# static PIE links none, so it depends on nothing and needs no dpkg-shlibdeps to package.
if(DSH_STATIC_PIE)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
# bubblewrap gives `full` enforcement; without it the Landlock backend (the binary itself) works.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS bubblewrap)
# The bash completion is a plain `complete -F`; bash-completion loads it on demand, and
# completes PROGRAM's own arguments.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS bash-completion)

# What only the .deb holds: Debian's copyright file and changelog, and lintian overrides. They
# are staged in the build tree and copied in by CPack, not installed: `cmake --install` into
# /usr/local or ~/.local has no use for them.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(deb_stage ${CMAKE_BINARY_DIR}/deb-extra)
  set(deb_doc ${deb_stage}/usr/share/doc/dsh-confine)
  file(MAKE_DIRECTORY ${deb_doc})
  configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${deb_doc}/copyright COPYONLY)
  # gzip -n: no name or time in the header, for reproducible bytes (and lintian).
  find_program(DSH_GZIP gzip REQUIRED)
  set(deb_changelog ${PROJECT_SOURCE_DIR}/packaging/debian/changelog)
  add_custom_command(OUTPUT ${deb_doc}/changelog.Debian.gz
    COMMAND ${DSH_GZIP} -9 -n -c ${deb_changelog} > ${deb_doc}/changelog.Debian.gz
    DEPENDS ${deb_changelog}
    COMMENT "Compressing the Debian changelog"
    VERBATIM)
  add_custom_target(dsh-confine-deb-docs ALL DEPENDS ${deb_doc}/changelog.Debian.gz)
  # Each override says why it does not apply; the static PIE's only holds for that link.
  set(overrides_sources ${PROJECT_SOURCE_DIR}/packaging/debian/lintian-overrides)
  if(DSH_STATIC_PIE)
    list(APPEND overrides_sources ${PROJECT_SOURCE_DIR}/packaging/debian/lintian-overrides.static-pie)
  endif()
  set(overrides "")
  foreach(source IN LISTS overrides_sources)
    file(READ ${source} text)
    string(APPEND overrides "${text}")
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${overrides_sources})
  file(CONFIGURE OUTPUT ${deb_stage}/usr/share/lintian/overrides/dsh-confine CONTENT "${overrides}" @ONLY)
  set(CPACK_INSTALLED_DIRECTORIES "${deb_stage};.")
endif()
include(CPack)
