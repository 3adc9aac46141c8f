#!/usr/bin/env bash
# Start one ZooKeeper server in the foreground from environment variables, on
# the official zookeeper image and on the Debian stand-in alike (their
# entrypoints, config paths and script locations differ; this script is the
# compose services' entrypoint on both). Mounted read-only at /seckill/zk-start.sh.
#
#   ZK_MY_ID     this server's id (default 1)
#   ZK_SERVERS   ensemble, "1=zookeeper:2888:3888,2=zookeeper2:2888:3888,...";
#                empty: a standalone server
#   ZK_DATA_DIR  data directory (default /zk-data, a tmpfs in compose)
#   ZK_TICK_MS   tickTime in ms (default 2000). Sessions are granted at least
#                2 x tickTime, so short session timeouts (compose-test's 3s)
#                need a shorter tick.
set -euo pipefail

id=${ZK_MY_ID:-1}
data=${ZK_DATA_DIR:-/zk-data}
conf_dir=$(mktemp -d /tmp/zk-conf.XXXXXX)
conf=$conf_dir/zoo.cfg

mkdir -p "$data"
echo "$id" >"$data/myid"

cat >"$conf" <<CFG
tickTime=${ZK_TICK_MS:-2000}
initLimit=10
syncLimit=5
dataDir=$data
clientPort=2181
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr,stat,cons,dump
quorumListenOnAllIPs=true
reconfigEnabled=false
CFG
if [[ -n "${ZK_SERVERS:-}" ]]; then
	echo "standaloneEnabled=false" >>"$conf"
	IFS=, read -ra members <<<"$ZK_SERVERS"
	for m in "${members[@]}"; do
		echo "server.${m%%=*}=${m#*=}" >>"$conf"
	done
fi

# Official image: zkServer.sh on PATH. Debian package: /usr/share/zookeeper/bin.
zk=$(command -v zkServer.sh || true)
[[ -n "$zk" ]] || zk=/usr/share/zookeeper/bin/zkServer.sh
export ZOO_LOG_DIR=${ZOO_LOG_DIR:-/tmp}
export ZOO_LOG4J_PROP=${ZOO_LOG4J_PROP:-INFO,CONSOLE}
export ZOOCFGDIR=$conf_dir
echo "zookeeper: id=$id servers=${ZK_SERVERS:-standalone} via $zk"
exec "$zk" start-foreground "$conf"
