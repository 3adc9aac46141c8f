#!/usr/bin/env bash
# Start one MySQL-compatible server in the foreground for the `mysql` compose
# service, on the official mysql image and on the Debian stand-in (MariaDB)
# alike: their entrypoints and bootstrap tools differ, so this script is the
# service's entrypoint on both. Mounted read-only at /seckill/mysql-start.sh.
#
#   mysql-start.sh          initialise an empty data dir, then run the server
#   mysql-start.sh health   healthy when the lab's user can query its database
#
#   MYSQL_DATA_DIR  data directory (default /mysql-data, a named volume in compose)
#   MYSQL_DATABASE, MYSQL_USER, MYSQL_PASSWORD   what stockd connects with
#                   (defaults seckill/seckill/seckill: a lab, not a secret)
set -euo pipefail

data=${MYSQL_DATA_DIR:-/mysql-data}
db=${MYSQL_DATABASE:-seckill}
user=${MYSQL_USER:-seckill}
pass=${MYSQL_PASSWORD:-seckill}

if [[ "${1:-}" == health ]]; then
	exec mysql --protocol=tcp -h127.0.0.1 -P3306 -u"$user" -p"$pass" \
		--connect-timeout=2 -e 'SELECT 1' "$db" >/dev/null 2>&1
fi

mariadb=0
mysqld --version 2>/dev/null | grep -qi mariadb && mariadb=1

mkdir -p "$data"
chown -R mysql:mysql "$data"
if [[ ! -d "$data/mysql" ]]; then
	echo "mysql: initialising $data (mariadb=$mariadb)"
	if ((mariadb)); then
		mariadb-install-db --user=mysql --datadir="$data" --skip-test-db \
			--auth-root-authentication-method=normal --skip-name-resolve >/dev/null
	else
		mysqld --initialize-insecure --user=mysql --datadir="$data"
	fi
fi

# Runs at every start, so it must be idempotent. The lock backends create
# their own tables; the user needs only its database.
init=$(mktemp /tmp/mysql-init.XXXXXX.sql)
cat >"$init" <<SQL
CREATE DATABASE IF NOT EXISTS \`$db\`;
CREATE USER IF NOT EXISTS '$user'@'%' IDENTIFIED BY '$pass';
GRANT ALL ON \`$db\`.* TO '$user'@'%';
SQL
chown mysql "$init"

args=(--user=mysql --datadir="$data" --bind-address=0.0.0.0 --port=3306
	--socket=/tmp/mysqld.sock --pid-file=/tmp/mysqld.pid --init-file="$init"
	--skip-name-resolve --innodb-buffer-pool-size=64M --performance-schema=OFF
	--max-connections=500
	# Every commit flushed to disk before it is answered: the witness and
	# the durable orders are what a restarted Redis is checked against.
	--innodb-flush-log-at-trx-commit=1)
if ((mariadb)); then
	args+=(--skip-log-bin)
else
	args+=(--disable-log-bin --mysqlx=OFF)
fi
echo "mysql: starting $(mysqld --version)"
exec mysqld "${args[@]}"
