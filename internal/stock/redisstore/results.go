package redisstore

// results.go: the answers of the sale's scripts (fenced_read.lua,
// fenced_write.lua, peek.lua, sell_atomic.lua), in one table. Their run
// files (lua/run) begin with it as a Lua table R, generated from here
// (resultsPrelude, scripts_test.go), and name every answer from it, so a
// code is defined here and nowhere else.
// sell_atomic.lua's sale answers the stock it left (0 or more), so it
// answers a refusal as its code negated.
const (
	resultOK          int64 = 0
	resultFenced      int64 = 1  // a higher token read since (stale)
	resultMixed       int64 = 2  // the fence belongs to another lock
	resultCollision   int64 = 3  // another lease read under the same token
	resultNotInt      int64 = 4  // the stock key (read) or the lucky key (write) holds a non-integer
	resultLost        int64 = 5  // the stock key is missing: see ErrStoreLost
	resultHalted      int64 = 6  // the sale is halted: see ErrStoreRewound
	resultEpoch       int64 = 7  // the caller's epoch is not the sale's: rewind.go
	resultEarly       int64 = 8  // the sale's window has not started (window.lua)
	resultEnded       int64 = 9  // the sale's window has ended (window.lua)
	resultSkewed      int64 = 10 // the clocks disagree at an edge of the window (window.lua)
	resultSoldOut     int64 = 11 // no unit left (sell_atomic.lua)
	resultLuckyNotInt int64 = 12 // the lucky key holds a non-integer (sell_atomic.lua, which reads both)
	resultReturned    int64 = 13 // a reservation's unit came back since this lease's read (lifecycle.lua)
)

// results names each answer as the scripts do (R.<name>).
var results = []struct {
	lua  string
	code int64
}{
	{"ok", resultOK}, {"fenced", resultFenced}, {"mixed", resultMixed}, {"collision", resultCollision},
	{"not_int", resultNotInt}, {"lost", resultLost}, {"halted", resultHalted}, {"epoch", resultEpoch},
	{"early", resultEarly}, {"ended", resultEnded}, {"skewed", resultSkewed},
	{"sold_out", resultSoldOut}, {"lucky_not_int", resultLuckyNotInt}, {"returned", resultReturned},
}
