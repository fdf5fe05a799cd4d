# cmake/check_file_length.cmake can fail: on a made-up tree it accepts
# short files and a long one with its reason at the top, and refuses a
# long one without a reason or with the reason past the first 30 lines
# (ctest lint/file_length_rejects):
#   cmake -DCHECK=<tree>/cmake/check_file_length.cmake -DWORK=<scratch dir> -P file_length_rejects.cmake
if(NOT CHECK OR NOT WORK)
  message(FATAL_ERROR "file_length_rejects: -DCHECK=<check_file_length.cmake> -DWORK=<scratch dir> are required")
endif()
set(failures "")
include(${CMAKE_CURRENT_LIST_DIR}/judge.cmake)

# Write `lines` lines to `path`: `head`, then filler lines.
function(write_file path head lines)
  set(body "${head}")
  string(REGEX MATCHALL "\n" have "${head}")
  list(LENGTH have i)
  while(i LESS lines)
    string(APPEND body "int x${i};\n")
    math(EXPR i "${i} + 1")
  endwhile()
  file(WRITE ${path} "${body}")
endfunction()

function(expect_check name expect)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${WORK}/src -P ${CHECK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  lint_judge("${name}" "${expect}" 1 "${rc}" "${out}" "${err}")
endfunction()

set(reason "/* A file.\n *\n * Why one file: it is one concern. */\n")
file(REMOVE_RECURSE ${WORK})
write_file(${WORK}/src/a/short.c "/* short */\n" 1200)
write_file(${WORK}/src/a/long_ok.c "${reason}" 1500)
expect_check("sound tree (1,200 lines, and a long file with its reason)" "")

write_file(${WORK}/src/b/long.c "/* A file. */\n" 1201)
expect_check("1,201 lines, no reason" "src/b/long.c: 1201 lines")

file(REMOVE ${WORK}/src/b/long.c)
set(late "")
foreach(i RANGE 1 30)
  string(APPEND late "/* line ${i} */\n")
endforeach()
write_file(${WORK}/src/b/late.h "${late}/* Why one file: too late. */\n" 1300)
expect_check("reason on line 31" "src/b/late.h: 1300 lines")

if(failures)
  message(FATAL_ERROR "check_file_length.cmake misjudged:${failures}")
endif()
