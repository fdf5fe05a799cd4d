# No source file of src/ over MAX lines (1,200) without a written reason at
# its top: a line holding "Why one file:" in its first HEAD (30) lines,
# saying why it stays one file rather than being split by concern (issue
# 35). Run by ctest (lint/file_length; lint/file_length_rejects checks that
# it can fail):
#   cmake -DSRC=<source tree>/src -P cmake/check_file_length.cmake
if(NOT SRC)
  message(FATAL_ERROR "check_file_length: -DSRC=<the src folder> is required")
endif()
if(NOT MAX)
  set(MAX 1200)
endif()
if(NOT HEAD)
  set(HEAD 30)
endif()
set(MARKER "Why one file:")
get_filename_component(SRC ${SRC} ABSOLUTE)
file(GLOB_RECURSE files ${SRC}/*.c ${SRC}/*.h ${SRC}/*.cu)
list(SORT files)
set(bad "")
foreach(f ${files})
  file(READ ${f} text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines n)          # lines as wc -l counts them
  if(n LESS_EQUAL MAX)
    continue()
  endif()
  file(STRINGS ${f} head LIMIT_COUNT ${HEAD})
  string(FIND "${head}" "${MARKER}" at)
  if(at EQUAL -1)
    file(RELATIVE_PATH rel ${SRC} ${f})
    string(APPEND bad "\n  src/${rel}: ${n} lines")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "source files over ${MAX} lines without \"${MARKER}\" in their first "
    "${HEAD} lines: split each by concern, or say at its top why it stays one file:${bad}")
endif()
