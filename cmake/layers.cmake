# The layering of src/: one library per folder (gpulse_<folder>), and for
# each folder the folders it may use, which are exactly the libraries it
# links (CMakeLists.txt) and the folders whose headers its files may
# include ("store/tsdb.h"). cmake/check_layers.cmake holds every build to
# it: an include of a folder not listed here, a folder listed but not
# used, a folder of src/ missing here, or a circle fails the build; its
# print mode draws the diagram in docs/DESIGN.md from this table.
#
# A folder may use only folders below it: a new arrow goes here first,
# and must not point up (the check says which circle it would close).
set(GPULSE_LAYERS common nvml wire attrib http collect record store promql
  bench profile remote diagnose anomaly alert rules report export inject
  api daemon cli)

set(GPULSE_USES_common "")
set(GPULSE_USES_nvml common)
set(GPULSE_USES_wire common)
set(GPULSE_USES_attrib common)
set(GPULSE_USES_http common)
set(GPULSE_USES_collect common nvml attrib)
set(GPULSE_USES_record common collect)
set(GPULSE_USES_store common attrib collect)
set(GPULSE_USES_promql common store)
set(GPULSE_USES_bench common nvml)
set(GPULSE_USES_profile common wire attrib store)
set(GPULSE_USES_remote common store)
set(GPULSE_USES_diagnose common collect record store)
set(GPULSE_USES_anomaly common collect store promql)
set(GPULSE_USES_alert common promql)
set(GPULSE_USES_rules common store promql alert)
set(GPULSE_USES_report common store promql diagnose)
set(GPULSE_USES_export common nvml attrib collect diagnose anomaly alert)
set(GPULSE_USES_inject common wire)
set(GPULSE_USES_api common http collect store promql diagnose profile rules export)
set(GPULSE_USES_daemon common nvml wire attrib http collect record store promql
  bench profile remote diagnose anomaly alert rules export api)
set(GPULSE_USES_cli common collect record bench diagnose rules report)
