# Installs etc/gpulse.yml as /etc/gpulse/gpulse.yml with its commented
# rule_files example replaced by the installed rule pack's path
# (CMAKE_INSTALL_PREFIX as given at install time). Run by install(SCRIPT);
# GPULSE_CONF_SOURCE and GPULSE_CONF_STAGE are set by an install(CODE)
# before it.
file(READ "${GPULSE_CONF_SOURCE}" conf)
set(example "# rule_files:\n#   - rules/gpu.yml\n")
string(FIND "${conf}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${GPULSE_CONF_SOURCE}: the commented rule_files example the installed copy replaces is gone")
endif()
string(REPLACE "${example}"
  "rule_files:\n  - ${CMAKE_INSTALL_PREFIX}/share/gpulse/rules/gpulse.rules.yml\n" conf "${conf}")
get_filename_component(stage_dir "${GPULSE_CONF_STAGE}" DIRECTORY)
file(MAKE_DIRECTORY "${stage_dir}")
file(WRITE "${GPULSE_CONF_STAGE}" "${conf}")
file(INSTALL DESTINATION "/etc/gpulse" TYPE FILE FILES "${GPULSE_CONF_STAGE}")
