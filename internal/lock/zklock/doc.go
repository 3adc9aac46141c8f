// Package zklock is the "zookeeper" lock backend: Apache Curator's
// InterProcessMutex recipe on go-zookeeper, borrowing the process's shared
// zksess.Session, with a bounded cohort hand-off inside each process.
//
// # ZooKeeper queue
//
// A process queues a protected ephemeral-sequential node
// Root/<key>/_c_<guid>-lock-<seq>. The lowest sequence holds the lock; every
// other node's owner watches only its predecessor, so a release wakes exactly
// one process (no herd). The create is zksess.Session.CreateProtected: the
// node is tracked by its GUID from the moment the request is sent, and if
// the reply is lost in a disconnect (or the caller gives up first) the
// Session sweeps it on reconnection, so no ghost stays queued behind a
// session that survived the blip. An uncontended acquisition costs two
// requests, as raw zk.Lock's does: the create and one getChildren, which
// tells us we are lowest. A hold that lasts Options.LossWatchDelay (5ms)
// then sets an exists-watch on our node, so that Done closes if it is
// deleted underneath us (an operator; session loss is seen by the session's
// own events). A shorter hold sets none: a watch set at once costs the
// server a notification on our own delete, ~130 µs of ZooKeeper CPU per
// uncontended sale (663 against raw zk.Lock's 531), for a deletion that
// fencing makes harmless anyway.
//
// Design notes follow the package clause.
package zklock

// Design notes.
//
// # Cohort: one node per process, bounded local hand-off
//
// The local half is the cohort package: goroutines of one Locker queue
// locally per key, in FIFO order, behind one "front" goroutine; only the
// front queues a node in ZooKeeper. When a lease is released and another
// local goroutine is waiting, the lock is passed to it in memory, with no
// ZooKeeper request, up to Options.LocalHandoffs times in a row, even if
// other processes are queued; then the node is deleted so the next process
// proceeds, and our next waiter queues a new node behind it. A node is
// passed only while the session that created it is the current one and
// established, and the node was not lost. A front that gives up deletes its
// node; the next local waiter queues a new one.
//
// One node per process rather than per goroutine: under contention a node
// costs two fsynced writes (its create and its delete), and with the cohort
// one node serves up to LocalHandoffs+1 acquisitions, while the next
// process's node is already queued during our batch, so a hand-off between
// processes still costs one delete and one notification.
//
// Fairness trade-off: ZooKeeper's FIFO now orders processes at batch
// granularity (each process gets up to K+1 consecutive acquisitions per turn,
// then goes to the back of the queue); within a process the order is FIFO.
// A goroutine may therefore wait behind up to K+1 holders of each process
// queued ahead of it, instead of behind one holder per queued goroutine.
// LocalHandoffs < 0 turns passing off (a node per acquisition, processes
// alternate acquisition by acquisition).
//
// # Fencing token
//
// A lease's token is pzxid<<16 | n (the cohort's layout): pzxid is the key
// node's "last child change" zxid, read in the getChildren reply that found
// our node lowest, and n counts the passes on that node (0 for the lease
// ZooKeeper granted). The zxid
// is global to the ensemble and only grows; the listing that made an earlier
// holder lowest was read before that holder's node was deleted, and ours
// after (its node had a lower sequence, or the key node was re-created), so
// our pzxid is strictly greater. It also keeps growing when the key node is
// deleted and re-created, unlike the sequence suffix. Reading the czxid of
// our own node instead would cost the extra request an uncontended
// acquisition used to make.
//
// # Session
//
// Session handling follows Curator's connection states, more conservatively:
// a lease's Done closes on expiry (LOST) and also on a mere disconnect
// (SUSPENDED), because while disconnected the holder cannot know whether the
// server still counts its session; guarded writes must not proceed. Curator
// instead lets the holder wait for RECONNECTED; that keeps the lock across a
// short blip but leaves the decision to every caller. Here the caller simply
// acquires again. The node of a lease lost by a disconnect is deleted as soon
// as the session is back, so it does not block the queue. A lost lease also
// gives up its place at the front of the local queue, so local waiters queue
// a fresh node instead of waiting for its Release.
//
// Waiters are not failed by a session loss: the front waits, within its
// ctx, for go-zookeeper's next session (zksess.Session.Await) and queues a
// new node in it, and the waiters behind it keep their local turn. Only a
// request whose deadline passes while there is still no session fails, with
// ErrUnavailable and the deadline.
//
// # Layout
//
// acquire.go is the cohort.Server (create the protected node, wait on the
// predecessor), node.go the cohort.Hold (a lowest node: delete on release,
// loss on session events, orphan deletes), zklock.go the Locker and its
// session subscription. The session, protected creates and their sweep
// are zksess's.
