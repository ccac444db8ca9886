#!/usr/bin/env bash
# deploy/systemd/psych-serve.service, as shipped: systemd accepts it (systemd-analyze verify, with
# ExecStart pointed at this build's psych), and its CapabilityBoundingSet is exactly what an
# execution needs: with that set psych runs a program at the ISOLATED level with every guarantee
# enforced, and with any one capability of it dropped it does not (the launcher refuses, or a
# guarantee is reported as not enforced). Needs root (setpriv can only drop capabilities a process
# has); not as root the test is skipped (exit 77), which fails in CI.
#   check_systemd_unit.sh UNIT PSYCH_BINARY
set -euo pipefail
unit=$1 psych=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root to run psych under the unit's capability bounding set"
  [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ] && exit 1
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# systemd's own parser, on the file as shipped but for the binary's path.
sed "s|/usr/local/bin/psych|$psych|" "$unit" > "$work/psych-serve.service"
systemd-analyze verify "$work/psych-serve.service"

caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
[ -n "$caps" ] || { echo "FAIL: no CapabilityBoundingSet in $unit"; exit 1; }
printf 'import os\nreturn os.getuid()\n' > "$work/program.py"
# A tree left running under the execution's uid. With a uid per execution (the default) the
# launcher ends it as that uid; with one uid shared by every execution (shared.json: run_as_uid
# in the config file, a deployment the unit must serve too) only CAP_KILL lets it. It prints the
# process's pid: at the PROCESS level a host pid, which the test ends itself if the
# launcher could not (/proc/PID/cmdline checked first, so only that process is ever signalled).
printf 'import subprocess\nprint(subprocess.Popen(["/bin/sleep", "60"], start_new_session=True).pid)\nreturn 1\n' \
  > "$work/leaves_a_process.py"
printf '{"run_as_uid": 1500380, "run_as_gid": 1500380}\n' > "$work/shared.json"
end_leftover() {  # the JSON of a run at the PROCESS level
  local pid
  pid=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"].strip())' < "$1" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  if [ "$( { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null)" = "/bin/sleep 60 " ]; then kill -9 "$pid"; fi
}

# What a run proved: its value, grades and problems (the duration and the like left out).
verdict() {
  python3 -c '
import json, sys
r = json.load(sys.stdin)
print(json.dumps({"value": r["value"], "guarantees": r["guarantees"], "problems": r["problems"],
                  "failure": (r["failure"] or {}).get("message")}, sort_keys=True))'
}
run_with() {  # bounding set ("all": root's own), backend, program[:shared]
  local bounding=-all program=${3%:shared} config=()
  [ "$3" != "$program" ] && config=(--config "$work/shared.json")
  # psych's exit status says how the program ended; the verdict is in its JSON.
  if [ "$1" = all ]; then
    "$psych" run --backend "$2" "${config[@]}" --json "$program" > "$work/result.json" || true
  else
    for cap in $1; do bounding+=",+$(echo "${cap#CAP_}" | tr 'A-Z' 'a-z')"; done
    setpriv --bounding-set="$bounding" --inh-caps=-all -- "$psych" run --backend "$2" "${config[@]}" --json \
      "$program" > "$work/result.json" || true
  fi
  [ "$2" = linux-process ] && end_leftover "$work/result.json"
  verdict < "$work/result.json"
}

# With the unit's set, every run proves what it proves as root with every capability; at the
# ISOLATED level that is every guarantee enforced.
status=0
declare -A full
for backend in linux-namespaces linux-process; do
  for program in program.py leaves_a_process.py leaves_a_process.py:shared; do
    full[$backend $program]=$(run_with all "$backend" "$work/$program")
    got=$(run_with "$caps" "$backend" "$work/$program")
    if [ "$got" != "${full[$backend $program]}" ]; then
      echo "FAIL: $backend $program with the unit's set ($caps): $got; with every capability: ${full[$backend $program]}"
      status=1
    fi
  done
done
isolated=$(run_with "$caps" linux-namespaces "$work/leaves_a_process.py")
if ! echo "$isolated" | python3 -c 'import json,sys; g=json.load(sys.stdin)["guarantees"]; sys.exit(any(v != "enforced" for v in g.values()))'; then
  echo "FAIL: at the ISOLATED level with the unit's set not every guarantee is enforced: $isolated"
  status=1
fi
# Each capability is needed by something: without it, one of those runs proves less.
for dropped in $caps; do
  fewer=$(echo " $caps " | sed "s/ $dropped / /" | xargs)
  needed=no
  for backend in linux-namespaces linux-process; do
    for program in program.py leaves_a_process.py leaves_a_process.py:shared; do
      got=$(run_with "$fewer" "$backend" "$work/$program")
      if [ "$got" != "${full[$backend $program]}" ]; then
        needed=yes
        echo "without $dropped, $backend $program: $got"
        break 2
      fi
    done
  done
  [ "$needed" = yes ] || { echo "FAIL: $dropped is in the unit's bounding set but nothing here needs it"; status=1; }
done
[ "$status" -eq 0 ] && echo "the unit's capability set ($caps) is what an execution needs, and all of it"
exit $status
