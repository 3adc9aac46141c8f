// Package backend names the lock backends (lock.backend's values) and the
// election's: the one list that stockd's wiring table, its validation,
// the lab's matrix and the tools read. A backend added to stockd's table
// is named here first; a test there holds the two equal.
package backend

// The lock backends.
const (
	Redis     = "redis"     // SET NX PX in Lua (redislock)
	Redisson  = "redisson"  // Redisson's reentrant hash and watchdog (redissonlock)
	Etcd      = "etcd"      // a lease and a revision-ordered key (etcdlock)
	ZooKeeper = "zookeeper" // Curator's ephemeral-sequential nodes (zklock)
	MySQL     = "mysql"     // GET_LOCK on a session (mysqllock)
	MySQLRow  = "mysql-row" // SELECT … FOR UPDATE in a transaction (mysqllock)

	// The articles' failures, linked into lab builds only (-tags lab).
	None          = "none"           // no lock: oversells
	Local         = "local"          // an in-process mutex: oversells across replicas
	SetNX         = "setnx"          // SETNX without an owner
	RedisNoCheck  = "redis-nocheck"  // a release that deletes any holder's key
	RedisCheckDel = "redis-checkdel" // a check, then a delete: not atomic
)

// Product lists the backends a product build has, in the order the tools
// and the lab list them.
func Product() []string { return []string{Redis, Redisson, Etcd, ZooKeeper, MySQL, MySQLRow} }

// LabOnly lists the backends only a lab build has.
func LabOnly() []string { return []string{None, Local, SetNX, RedisNoCheck, RedisCheckDel} }

// Elections lists election.backend's values: none, or a server that
// elects (ZooKeeper and etcd; MySQL does not).
func Elections() []string { return []string{None, Etcd, ZooKeeper} }
