# Every command's help prints and exits 0, and none says a feature gpulse
# has is missing: `gpulse help rules` once called alert_rule_test "not
# supported yet" after it had been implemented.
source "$(dirname "$0")/lib.sh"

for cmd in status top record diagnose report fleet bench rules query alerts kernels run trace; do
	"$GPULSE" help "$cmd" >"$WORK/$cmd.txt" 2>&1 || fail "gpulse help $cmd: exit $?"
	[ -s "$WORK/$cmd.txt" ] || fail "gpulse help $cmd printed nothing"
	if grep -Eqi 'not supported|not yet|unsupported' "$WORK/$cmd.txt"; then
		fail "gpulse help $cmd: $(grep -Ei 'not supported|not yet|unsupported' "$WORK/$cmd.txt")"
	fi
done
# Every configuration key a help text names (storage.retention, ...) is one
# gpulsed knows: `gpulse help report` once named storage.raw_retention.
"$GPULSED" --help >"$WORK/gpulsed-help.txt" 2>&1 || true
"$GPULSED" --print-config >"$WORK/config.yml" || fail "gpulsed --print-config: exit $?"
python3 - "$WORK/config.yml" "$WORK"/*.txt <<'PY' || fail "a help text names a key gpulsed does not know"
import re, sys
keys, stack = set(), []
for line in open(sys.argv[1]):
    m = re.match(r"^( *)([a-z_][a-z0-9_]*):", line)
    if not m:
        continue
    depth = len(m.group(1)) // 2
    stack = stack[:depth] + [m.group(2)]
    keys.add(".".join(stack))
sections = {k for k in keys if "." not in k}
bad = []
for path in sys.argv[2:]:
    for k in re.findall(r"\b([a-z_]+(?:\.[a-z_]+)+)\b", open(path, errors="replace").read()):
        if k.rsplit(".", 1)[-1] in ("md", "yml", "yaml", "csv", "json", "db", "txt", "html", "sh"):
            continue  # a file name, not a key
        if k.split(".")[0] in sections and k not in keys:
            bad.append(f"{path.rsplit('/', 1)[-1]}: {k}")
assert len(keys) > 50, f"--print-config gave only {len(keys)} keys"
if bad:
    sys.exit("unknown keys: " + ", ".join(sorted(set(bad))))
PY
"$GPULSE" help help >"$WORK/help-help.out" 2>&1 || fail "gpulse help help: exit $?"
grep -q '^Commands:' "$WORK/help-help.out" || fail "gpulse help help: $(cat "$WORK/help-help.out")"
grep -q 'alert_rule_test' "$WORK/rules.txt" || fail "gpulse help rules does not name alert_rule_test"
# gpulse help top lists its keys, and top refuses to run without a terminal.
for k in 'q, F10' 'h, ?, F1' 's, F6' '/ ' 'k, F9' 'g, Tab' '+ / -'; do
	grep -qF -- "  $k" "$WORK/top.txt" || fail "gpulse help top does not list the key \"$k\""
done
rc=0
"$GPULSE" top </dev/null >"$WORK/top-notty.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'needs a terminal' "$WORK/top-notty.txt" ||
	fail "gpulse top without a terminal: exit $rc, $(cat "$WORK/top-notty.txt")"
rc=0
"$GPULSE" top --delay 0.01 >"$WORK/top-delay.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q -- '--delay "0.01"' "$WORK/top-delay.txt" ||
	fail "gpulse top --delay 0.01: exit $rc, $(cat "$WORK/top-delay.txt")"
# The rule tests it names do run: an alert_rule_test that passes.
mkdir -p "$WORK/r"
cat >"$WORK/r/rules.yml" <<'YML'
groups:
  - name: g
    rules:
      - alert: Hot
        expr: temp > 80
YML
cat >"$WORK/r/test.yml" <<'YML'
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'temp{gpu="0"}'
        values: '90x5'
    alert_rule_test:
      - eval_time: 2m
        alertname: Hot
        exp_alerts:
          - exp_labels: {gpu: "0"}
YML
"$GPULSE" rules test "$WORK/r/test.yml" >"$WORK/rt.txt" 2>&1 || fail "alert_rule_test: $(cat "$WORK/rt.txt")"
echo PASS
