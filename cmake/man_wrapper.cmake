# Writes OUT: a shell script that runs `GPULSE CMD "$@"`, so help2man can
# read one subcommand's --help under the name gpulse-CMD (cmake/deploy.cmake).
file(WRITE ${OUT} "#!/bin/sh\nexec '${GPULSE}' '${CMD}' \"$@\"\n")
file(CHMOD ${OUT} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
  WORLD_READ WORLD_EXECUTE)
