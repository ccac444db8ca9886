#!/bin/sh
# Runs the consumer built against the installed (and then moved) package, with the build tree's
# launcher out of reach, and no PSYCH_LAUNCHER: the package alone must lead it to its launcher.
#   run_consumer.sh CONSUMER PREFIX BUILD_LAUNCHER
set -eu
consumer=$1 prefix=$2 build_launcher=$3
unset PSYCH_LAUNCHER

# Nothing installed may name the build tree's launcher.
for file in "$prefix"/lib*/libpsych_host.a "$prefix"/lib/*/libpsych_host.a "$prefix"/bin/psych \
            "$prefix"/libexec/psych/psych-remote "$consumer"; do
  [ -e "$file" ] || continue
  if grep -qF "$build_launcher" "$file"; then
    echo "run_consumer: $file names the build tree's launcher $build_launcher" >&2
    exit 1
  fi
done

if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  # A private mount namespace with an empty tmpfs over the build tree's launcher directory.
  exec unshare --mount --propagation private sh -c '
    mount -t tmpfs -o size=64k,mode=0755 psych-hidden "$(dirname "$2")" || exit 1
    [ ! -e "$2" ] || { echo "run_consumer: could not hide $2" >&2; exit 1; }
    echo "run_consumer: the build tree launcher is hidden"
    exec "$1"' sh "$consumer" "$build_launcher"
fi
echo "run_consumer: not root: the build tree's launcher stays reachable; the launcher printed below says which ran"
exec "$consumer"
