#!/bin/sh
# Build DIR/NAME from LOCK (run by mk/xmc-envs.mk under flock DIR/NAME.build-lock).
#   sh mk/build-env.sh NAME LOCK DIR PY UV "FIND_LINKS"
# Installs exactly the lock (--no-deps --require-hashes) into a fresh venv, then runs the
# method's worker with --check (imports the library, prints versions). Success: writes the
# lock's sha256 to DIR/NAME/.installed (last, atomically). Failure: removes the venv and
# writes DIR/NAME.failed (the lock's sha256, then the last lines of the log); exit 1.
set -u
name=$1 lock=$2 root=$3 py=$4 uv=$5 links=$6
dir=$root/$name
log=$root/$name.build.log
sha=$(sha256sum "$lock" | cut -d' ' -f1)
# another build of the same lock may have finished while this one waited for the lock
if [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$sha" ]; then
  touch "$dir/.installed"
  exit 0
fi
rm -rf "$dir" "$root/$name.failed"
start=$(date +%s)
echo "building $dir from $lock with $([ -n "$uv" ] && echo "uv ($uv)" || echo pip); log: $log" >&2
(
  set -e
  if [ -n "$uv" ]; then
    "$uv" venv --quiet --python "$py" "$dir"
    # shellcheck disable=SC2086
    "$uv" pip install --python "$dir/bin/python" --no-deps --require-hashes $links -r "$lock"
  else
    "$py" -m venv "$dir"
    "$dir/bin/python" -m pip install --no-deps --require-hashes --no-compile --disable-pip-version-check -r "$lock"
  fi
  "$dir/bin/python" -E -s "src/cdgtmll/external/${name}_worker.py" --check
) > "$log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  rm -rf "$dir"
  { echo "$sha"; tail -n 15 "$log"; } > "$root/$name.failed"
  echo "building $dir failed (exit $rc); see $log" >&2
  exit 1
fi
echo "$sha" > "$dir/.installed.tmp" && mv "$dir/.installed.tmp" "$dir/.installed"
echo "built $dir in $(( $(date +%s) - start )) s" >&2
