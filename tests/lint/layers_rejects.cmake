# cmake/check_layers.cmake can fail: on small made-up trees it accepts a
# sound one and rejects an include upward, a circle, an include of an
# undeclared folder, a header named without its folder, an unused
# declared arrow and an undeclared folder, each with its reason (ctest
# lint/layers_rejects):
#   cmake -DCHECK=<tree>/cmake/check_layers.cmake -DWORK=<scratch dir> -P layers_rejects.cmake
if(NOT CHECK OR NOT WORK)
  message(FATAL_ERROR "layers_rejects: -DCHECK=<check_layers.cmake> -DWORK=<scratch dir> are required")
endif()
set(failures "")
include(${CMAKE_CURRENT_LIST_DIR}/judge.cmake)

# A tree: base (bottom) <- mid <- top, each with a header and a source.
function(make_tree dir)
  file(REMOVE_RECURSE ${dir})
  file(WRITE ${dir}/src/base/base.h "int base(void);\n")
  file(WRITE ${dir}/src/base/base.c "#include \"base/base.h\"\nint base(void) { return 1; }\n")
  file(WRITE ${dir}/src/mid/mid.h "#include \"base/base.h\"\nint mid(void);\n")
  file(WRITE ${dir}/src/mid/mid.c "#include \"mid/mid.h\"\nint mid(void) { return base(); }\n")
  file(WRITE ${dir}/src/top/top.c "#include \"mid/mid.h\"\n#include \"gen.pb-c.h\"\nint top(void) { return mid(); }\n")
  file(WRITE ${dir}/layers.cmake "set(GPULSE_LAYERS base mid top)\n"
    "set(GPULSE_USES_base \"\")\nset(GPULSE_USES_mid base)\nset(GPULSE_USES_top mid)\n")
endfunction()

# Run the check on `dir`; `expect` is a regular expression its error must
# match, or "" when it must pass.
function(expect_check name dir expect)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSRC=${dir}/src -DLAYERS=${dir}/layers.cmake
      -DMODE=print -P ${CHECK}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(ok 0)
  if(out STREQUAL "0 base\n1 mid       base\n2 top       mid\n")
    set(ok 1)
  endif()
  lint_judge("${name}" "${expect}" "${ok}" "${rc}" "${out}" "${err}")
endfunction()

make_tree(${WORK}/sound)
expect_check(sound ${WORK}/sound "")

make_tree(${WORK}/upward)
file(WRITE ${WORK}/upward/src/base/up.c "#include \"mid/mid.h\"\n")
expect_check(upward ${WORK}/upward "src/base/up.c: #include \"mid/mid.h\": upward: mid is on layer 1, base on 0")

make_tree(${WORK}/circle)
file(APPEND ${WORK}/circle/layers.cmake "set(GPULSE_USES_base mid)\n")
file(WRITE ${WORK}/circle/src/base/up.c "#include \"mid/mid.h\"\n")
expect_check(circle ${WORK}/circle "a circle among the folders left after layer 0[^\n]*:\n +base uses mid\n +mid uses base")

make_tree(${WORK}/sideways)
file(WRITE ${WORK}/sideways/src/top/side.c "#include \"base/base.h\"\n")
expect_check(sideways ${WORK}/sideways "src/top/side.c: #include \"base/base.h\": top does not use base")

make_tree(${WORK}/bare)
file(WRITE ${WORK}/bare/src/mid/bare.c "#include \"mid.h\"\n")
expect_check(bare ${WORK}/bare "src/mid/bare.c: #include \"mid.h\": write \"mid/mid.h\"")

make_tree(${WORK}/unused)
file(APPEND ${WORK}/unused/layers.cmake "set(GPULSE_USES_top mid base)\n")
expect_check(unused ${WORK}/unused "top is declared to use base but includes nothing of it")

make_tree(${WORK}/undeclared)
file(WRITE ${WORK}/undeclared/src/extra/extra.c "#include \"base/base.h\"\n")
expect_check(undeclared ${WORK}/undeclared "src/extra/ is not declared")

file(REMOVE_RECURSE ${WORK})
if(failures)
  message(FATAL_ERROR "cmake/check_layers.cmake:${failures}")
endif()
