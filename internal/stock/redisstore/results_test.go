package redisstore

import (
	"regexp"
	"testing"
)

// Every answer the sale's scripts give is named from the one table
// (results.go): no script writes a code as a number, each name a script
// uses is in the table, each code in the table is used, and no two share
// a code.
func TestScriptsAnswerFromTheResultsTable(t *testing.T) {
	scripts := map[string]string{
		"fenced_read.lua": fencedReadSrc, "fenced_write.lua": fencedWriteSrc,
		"peek.lua": peekSrc, "sell_atomic.lua": sellAtomicSrc,
	}
	bare := regexp.MustCompile(`(?m)(return \{?-?[0-9]|answer\(-?[0-9]|refuse\(-?[0-9]|status = -?[0-9])`)
	named := regexp.MustCompile(`R\.([a-z_]+)`)
	table, codes := map[string]bool{}, map[int64]string{}
	for _, r := range results {
		if other, ok := codes[r.code]; ok {
			t.Errorf("results %s and %s share code %d", r.lua, other, r.code)
		}
		codes[r.code], table[r.lua] = r.lua, true
	}
	used := map[string]bool{}
	for name, src := range scripts {
		if m := bare.FindString(src); m != "" {
			t.Errorf("%s answers a code as a number (%q): name it from R", name, m)
		}
		for _, m := range named.FindAllStringSubmatch(src, -1) {
			if !table[m[1]] {
				t.Errorf("%s names R.%s, which results.go does not define", name, m[1])
			}
			used[m[1]] = true
		}
	}
	for name := range table {
		if !used[name] {
			t.Errorf("result %s is answered by no script", name)
		}
	}
}
