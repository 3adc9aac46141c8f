#!/usr/bin/env bash
# Build the offline stand-in image used by scripts/compose-test.sh on machines
# that cannot pull from a container registry.
#
# One image, seckill/standin-base:bookworm, serves as the redis, etcd,
# zookeeper, mysql (MariaDB), nginx and prometheus stand-in: a minimal Debian bookworm root filesystem
# (debootstrap --variant=minbase) with the Debian packages installed, imported
# with `docker import`. The same docker-compose.yml runs against it because
# every service command in the compose file is explicit (see docs/compose.md).
#
# The image carries a label with the hash of the recipe (suite, package list,
# RECIPE); when an image with a matching label exists, the build is skipped.
# Bump RECIPE when the build steps change. FORCE=1 rebuilds anyway.
#
# Needs: root, debootstrap, a Debian mirror reachable through apt's defaults.
set -euo pipefail

IMAGE=${STANDIN_IMAGE:-seckill/standin-base:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PACKAGES=(
	redis-server redis-tools
	etcd-server etcd-client
	zookeeper default-jre-headless
	nginx-light
	mariadb-server mariadb-client
	prometheus
	ca-certificates
)

RECIPE=1
hash=$(printf '%s\n' "$RECIPE" "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-16)
label=org.seckill.standin.hash

existing=$(docker image inspect --format "{{ index .Config.Labels \"$label\" }}" "$IMAGE" 2>/dev/null || true)
if [[ "$existing" == "$hash" && "${FORCE:-0}" != 1 ]]; then
	echo "stand-in $IMAGE is up to date (hash $hash)"
	exit 0
fi

if [[ $(id -u) != 0 ]]; then
	echo "build-standins: needs root (debootstrap, chroot)" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null; then
	apt-get update -qq && apt-get install -y -qq debootstrap
fi

start=$(date +%s)
work=$(mktemp -d /var/tmp/seckill-standin.XXXXXX)
rootfs=$work/rootfs
unmount_all() {
	# Deepest first; debootstrap and this script both mount proc/sys/devpts.
	local m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v r="$rootfs" 'index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r)
}
cleanup() {
	unmount_all
	rm -rf "$work"
}
trap cleanup EXIT

echo "== debootstrap $SUITE (minbase) into $rootfs"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
	tail -40 "$work/debootstrap.log" >&2
	exit 1
}

cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
# No daemons may start inside the chroot while packages are installed.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod +x "$rootfs/usr/sbin/policy-rc.d"

mount -t proc proc "$rootfs/proc"
mount -t sysfs sys "$rootfs/sys"
mount --bind /dev/pts "$rootfs/dev/pts"

echo "== apt-get install ${PACKAGES[*]}"
chroot "$rootfs" /usr/bin/env DEBIAN_FRONTEND=noninteractive bash -euc "
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends ${PACKAGES[*]} >/dev/null
	apt-get clean
	rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /usr/share/locale/*
"

unmount_all
if grep -q " $rootfs/" /proc/mounts; then
	echo "build-standins: mounts left under $rootfs" >&2
	exit 1
fi
rm -f "$rootfs/usr/sbin/policy-rc.d"
# The services write their data into tmpfs/volumes or /tmp; make /tmp sane.
chmod 1777 "$rootfs/tmp"

echo "== docker import -> $IMAGE"
tar --numeric-owner -C "$rootfs" -c . | docker import \
	--change "LABEL $label=$hash" \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'CMD ["bash"]' \
	- "$IMAGE" >/dev/null

echo "stand-in $IMAGE built in $(($(date +%s) - start))s ($(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
