#!/usr/bin/env bash
# tidy-check: every module of the workspace has the go.mod and go.sum that
# `go mod tidy` writes.
#
# cmd/ontime and bench require github.com/ontime-go/ontime at a released
# version (no replace directive, so that `go install …/cmd/ontime@vX` works);
# go.work points that version at this tree for development. `go mod tidy`
# ignores go.work, so this script serves the tree's modules at that version
# from a local module proxy (GOPROXY=file://…, built by ontime-modproxy) and
# a throwaway module cache, so that the fake version never enters the real
# module cache. The go.sum lines of github.com/ontime-go/ontime itself are
# left out of the comparison: their hash is that of the tree, which changes
# with every commit; the published version's hash comes from the checksum
# database when users install (see docs/releasing.md).
#
# With --write it runs `go mod tidy` in every module instead (make tidy).
set -euo pipefail
write=false
[ "${1:-}" = "--write" ] && write=true
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=$(awk '$1 == "github.com/ontime-go/ontime" { print $2; exit }' cmd/ontime/go.mod)
[ -n "$version" ] || { echo "tidy-check: cmd/ontime/go.mod does not require github.com/ontime-go/ontime"; exit 1; }
modules=$($GO list -m -f '{{.Dir}}')
realcache=$($GO env GOMODCACHE)
upstream=$($GO env GOPROXY)
flags=$($GO env GOFLAGS)
proxy=$(mktemp -d)
modcache=$(mktemp -d)
trap 'chmod -R u+w "$modcache" 2>/dev/null; rm -rf "$proxy" "$modcache"' EXIT
$GO run ./cmd/ontime/internal/modproxy/cmd/ontime-modproxy -repo . -out "$proxy" -version "$version"

export GOWORK=off GOMODCACHE="$modcache" GOFLAGS="$flags -modcacherw"
export GOPROXY="file://$proxy,file://$realcache/cache/download,$upstream"
export GONOSUMDB=github.com/ontime-go/ontime
status=0
for m in $modules; do
	if $write; then
		# The tree's own modules get no go.sum lines: their hash is the
		# tree's, which changes with every commit (see above).
		strip() { if [ -f go.sum ]; then grep -vE '^github\.com/ontime-go/ontime(/kafkadelay|/kafkadelay/kafkadelayprom|/ontimeprom|/ontimeotel)? ' go.sum > go.sum.tmp || true; mv go.sum.tmp go.sum; fi; }
		(cd "$m" && strip && $GO mod tidy && strip) || status=1
		continue
	fi
	set +e
	diff=$(cd "$m" && $GO mod tidy -diff 2>/tmp/tidy-check.err.$$)
	rc=$?
	set -e
	if [ $rc -eq 0 ]; then continue; fi
	if [ -z "$diff" ]; then
		echo "go mod tidy failed in $m:"; cat /tmp/tidy-check.err.$$; status=1; continue
	fi
	rest=$(printf '%s\n' "$diff" | grep -E '^[+-]' | grep -vE '^(\+\+\+|---) ' | grep -vE '^[+-]github\.com/ontime-go/ontime(/kafkadelay|/kafkadelay/kafkadelayprom|/ontimeprom|/ontimeotel)? v' || true)
	if [ -n "$rest" ]; then
		echo "go mod tidy would change $m:"; printf '%s\n' "$diff"; status=1
	fi
done
rm -f /tmp/tidy-check.err.$$
exit $status
