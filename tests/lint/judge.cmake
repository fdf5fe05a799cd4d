# lint_judge(name expect ok rc out err), for the lint checks' own tests
# (layers_rejects.cmake, file_length_rejects.cmake): judge one run of a
# check. `expect` is a regular expression its error must match, or ""
# when it must pass, and then `ok` (1 or 0) says whether its output was
# right too.
# A macro, so that from the caller's function it appends to `failures` in
# the scope that called that function.
macro(lint_judge name expect ok rc out err)
  if("${expect}" STREQUAL "")
    if(NOT "${rc}" STREQUAL "0" OR NOT "${ok}" STREQUAL "1")
      set(failures "${failures}\n  ${name}: a sound tree was refused (${rc}):\n${out}${err}" PARENT_SCOPE)
    endif()
  elseif("${rc}" STREQUAL "0")
    set(failures "${failures}\n  ${name}: accepted; it must fail with /${expect}/" PARENT_SCOPE)
  elseif(NOT "${err}" MATCHES "${expect}")
    set(failures "${failures}\n  ${name}: failed, but not with /${expect}/:\n${err}" PARENT_SCOPE)
  endif()
endmacro()
