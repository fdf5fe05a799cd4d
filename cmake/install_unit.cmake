# Install-time half of cmake/deploy.cmake: writes gpulsed.service into the
# unit directory with ExecStart at ${CMAKE_INSTALL_PREFIX}/BINDIR/gpulsed.
# CMAKE_INSTALL_PREFIX here is the prefix of this install (--prefix wins),
# and DESTDIR is honoured as install(FILES) does.
if(GPULSE_UNITDIR)
  set(dir "${GPULSE_UNITDIR}")
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(dir "/lib/systemd/system")
else()
  set(dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
file(READ "${GPULSE_UNIT_SRC}" unit)
string(REPLACE "ExecStart=/usr/bin/gpulsed" "ExecStart=${CMAKE_INSTALL_PREFIX}/${GPULSE_BINDIR}/gpulsed"
  unit "${unit}")
set(dest "$ENV{DESTDIR}${dir}")
file(MAKE_DIRECTORY "${dest}")
message(STATUS "Installing: ${dest}/gpulsed.service")
file(WRITE "${dest}/gpulsed.service" "${unit}")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${dest}/gpulsed.service")
