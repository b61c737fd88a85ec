#!/usr/bin/env bash
# image-test builds the Dockerfile at the repository's root and runs the
# image: `orchestrator version` (it must name the commit) and `orchestrator
# rehearse` on an example spec (the real CLI of the image against the
# built-in scripted model, offline).
#
# Base images are not pulled: the bases are made here from Debian's own
# packages (mmdebstrap), imported with podman and passed as build arguments;
# buildah builds and runs (chroot isolation: no user namespaces, cgroups or
# rlimits needed). The Debian root file system and the bases are cached and
# made again only when missing.
#
# usage: image-test.sh GO CLAUDE_VERSION CACHE_DIR
set -euo pipefail

go=$1 claude_version=$2 cache=$3
suite=${IMAGE_TEST_SUITE:-bookworm}
image=localhost/orchestrator:image-test
base=localhost/orchestrator-debian-base:$suite
spec=/usr/share/orchestrator/examples/add-login-page.md

cd "$(dirname "$0")/../.."
start=$SECONDS
step() { echo "image-test: $* ($((SECONDS - start)) s)"; }

missing=()
for tool in mmdebstrap podman buildah; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
	echo "image-test: installing ${missing[*]}: building and running the image needs them"
	command -v apt-get >/dev/null || { echo "image-test: ${missing[*]} missing and apt-get is not here: install mmdebstrap, podman and buildah" >&2; exit 1; }
	sudo=
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || { echo "image-test: ${missing[*]} missing; as root run: apt-get install -y mmdebstrap podman buildah" >&2; exit 1; }
		sudo=sudo
	fi
	$sudo apt-get update -q && $sudo apt-get install -y -q mmdebstrap podman buildah ||
		{ echo "image-test: could not install them; run: apt-get install -y mmdebstrap podman buildah" >&2; exit 1; }
fi

# The Debian base: a minimal root file system of Debian's packages.
rootfs=$cache/image/debian-$suite-minbase.tar
if [ ! -s "$rootfs" ]; then
	step "making the Debian $suite root file system (mmdebstrap)"
	mkdir -p "$(dirname "$rootfs")"
	rm -f "$rootfs.tmp"
	mmdebstrap --quiet --variant=minbase --format=tar "$suite" "$rootfs.tmp"
	mv "$rootfs.tmp" "$rootfs"
fi
if ! podman image exists "$base"; then
	step "importing it as $base"
	podman import --quiet "$rootfs" "$base" >/dev/null
	# This machine's own certificate authorities (a TLS-inspecting proxy's,
	# say) go into the base, so the build's HTTPS (the Go module proxy, npm)
	# trusts what this machine trusts: the ca-certificates package the
	# Dockerfile installs adds them to the system store.
	if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
		ctr=$(buildah from --quiet "$base")
		buildah copy --quiet "$ctr" /usr/local/share/ca-certificates /usr/local/share/ca-certificates >/dev/null
		buildah commit --quiet --rm "$ctr" "$base" >/dev/null
	fi
fi

# The Go build base: the Debian base with this machine's Go toolchain.
goversion=$("$go" env GOVERSION)
gobase=localhost/orchestrator-go-base:$goversion-$suite
if ! podman image exists "$gobase"; then
	step "making the Go build base $gobase"
	buildah bud --quiet --force-rm --isolation chroot --layers=false --build-arg BASE="$base" \
		-f "$PWD/deploy/container/go-base.Containerfile" -t "$gobase" "$("$go" env GOROOT)" >/dev/null
fi

old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
commit=$(git rev-parse HEAD)
version=$(git describe --tags --always --dirty 2>/dev/null || echo "$commit")
step "building the image ($version, CLI $claude_version)"
buildah bud --quiet --force-rm --isolation chroot --layers --format docker \
	--build-arg BUILD_BASE="$gobase" --build-arg BASE="$base" \
	--build-arg VERSION="$version" --build-arg COMMIT="$commit" \
	--build-arg DATE="$(git log -1 --format=%cI)" \
	--build-arg CLAUDE_VERSION="$claude_version" \
	-t "$image" . >/dev/null

if [ -n "$old" ] && [ "$old" != "$(podman image inspect --format '{{.Id}}' "$image")" ]; then
	podman rmi "$old" >/dev/null 2>&1 || true # the previous run's image, untagged now
fi

ctr=$(buildah from --quiet "$image")
trap 'buildah rm "$ctr" >/dev/null' EXIT
run() { buildah run --isolation chroot "$ctr" -- "$@"; }

step "orchestrator version"
out=$(run orchestrator version)
echo "$out"
case $out in
*"$commit"* | *"${commit:0:12}"* | *"${commit:0:7}"*) ;;
*) echo "image-test: \`orchestrator version\` in the image does not name the commit $commit" >&2; exit 1 ;;
esac
uid=$(run id -u)
[ "$uid" != 0 ] || { echo "image-test: the image runs as root" >&2; exit 1; }
out=$(run claude --version)
case $out in
"$claude_version"*) ;;
*) echo "image-test: the image's claude --version says \"$out\", want $claude_version" >&2; exit 1 ;;
esac

step "orchestrator rehearse $spec (answering 2)"
echo 2 | run orchestrator rehearse "$spec"
# serve until the image's own HEALTHCHECK command passes, then SIGTERM:
# serve stops cleanly and exits 0. Chroot isolation
# shares this machine's network, so serve listens on a free port (the
# probe's 8080 replaced by it) and is killed whatever happens.
step "orchestrator serve until its HEALTHCHECK passes, then SIGTERM"
hc=$(buildah inspect --type image --format '{{index .Docker.Config.Healthcheck.Test 1}}' "$image")
[[ $hc == *127.0.0.1:8080/healthz* ]] || { echo "image-test: the image's HEALTHCHECK does not probe 127.0.0.1:8080/healthz: $hc" >&2; exit 1; }
port=
for p in $(seq 18080 18180); do
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "image-test: no free port in 18080-18180 for serve" >&2; exit 1; }
buildah run --isolation chroot --env HC="${hc//8080/$port}" --env PORT="$port" "$ctr" -- sh -c '
	cfg=$(mktemp) && printf "serve:\n  listen: 127.0.0.1:%s\n" "$PORT" >"$cfg"
	if sh -c "$HC" 2>/dev/null; then echo "something already answers on port $PORT"; exit 1; fi
	orchestrator serve --config "$cfg" >/tmp/serve.log 2>&1 &
	pid=$!
	trap "kill -KILL $pid 2>/dev/null" EXIT
	i=0
	while [ $i -lt 120 ]; do
		kill -0 $pid 2>/dev/null || { echo "serve exited before it was healthy:"; cat /tmp/serve.log; exit 1; }
		if sh -c "$HC" 2>/dev/null; then
			kill -TERM $pid
			wait $pid
			rc=$?
			[ $rc = 0 ] && exit 0
			echo "serve exited $rc after SIGTERM, want 0:"; cat /tmp/serve.log; exit 1
		fi
		i=$((i + 1))
		sleep 1
	done
	echo "the health check did not pass in 120 s:"; cat /tmp/serve.log; exit 1' ||
	{ echo "image-test: serve and its health check failed" >&2; exit 1; }
step "passed"
