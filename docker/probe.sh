#!/usr/bin/env bash
# Shell-only health probes for the compose services whose images have bash but
# maybe no curl/nc (the official nginx and zookeeper images, and the offline
# Debian stand-in). Mounted read-only at /seckill/probe.sh.
#
#   probe.sh http PORT PATH   GET http://127.0.0.1:PORT/PATH, healthy on HTTP 200
#   probe.sh zk [PORT]        ZooKeeper "srvr": healthy when the server reports a
#                             Mode (standalone, leader or follower), i.e. it is
#                             serving; a member without quorum is unhealthy.
set -euo pipefail

case "${1:-}" in
http)
	exec 3<>"/dev/tcp/127.0.0.1/$2"
	printf 'GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n' "$3" >&3
	IFS= read -r -t 3 status <&3
	[[ "$status" == HTTP/1.?" 200"* ]]
	;;
zk)
	exec 3<>"/dev/tcp/127.0.0.1/${2:-2181}"
	printf 'srvr' >&3
	while IFS= read -r -t 3 line <&3; do
		[[ "$line" == Mode:* ]] && exit 0
	done
	exit 1
	;;
*)
	echo "usage: probe.sh http PORT PATH | probe.sh zk [PORT]" >&2
	exit 2
	;;
esac
