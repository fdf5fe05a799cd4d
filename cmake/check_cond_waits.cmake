# Every timed wait on a condition variable in src/ goes through struct
# mono_cond (src/common/mono_cond.h): the condition is created on
# CLOCK_MONOTONIC there, the clock every deadline is computed on. A direct
# pthread_cond_timedwait on a condition created elsewhere (by default on
# CLOCK_REALTIME) reads a monotonic deadline as decades ago, and the thread
# waiting on it spins. Run at each build (the check_cond_waits target) and
# by ctest (lint/cond_waits):
#   cmake -DSRC=<source tree>/src -P cmake/check_cond_waits.cmake
if(NOT SRC)
  message(FATAL_ERROR "check_cond_waits: -DSRC=<the src folder> is required")
endif()
get_filename_component(SRC ${SRC} ABSOLUTE)
file(GLOB_RECURSE files ${SRC}/*.c ${SRC}/*.h ${SRC}/*.cu)
set(bad "")
foreach(f ${files})
  file(RELATIVE_PATH rel ${SRC} ${f})
  if(rel STREQUAL "common/mono_cond.c")
    continue()
  endif()
  file(STRINGS ${f} hits REGEX "pthread_cond_(timed|clock)wait[ \t]*\\(|pthread_condattr_setclock[ \t]*\\(")
  foreach(h ${hits})
    string(STRIP "${h}" h)
    string(APPEND bad "\n  src/${rel}: ${h}")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "timed condition waits outside src/common/mono_cond.c "
    "(use struct mono_cond and mono_cond_wait_until, src/common/mono_cond.h):${bad}")
endif()
