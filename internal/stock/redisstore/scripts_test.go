package redisstore

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The parts the run scripts (lua/run) are made of.
var (
	//go:embed lua/int.lua
	intSrc string
	//go:embed lua/guard.lua
	guardSrc string
	//go:embed lua/fenced_read.lua
	fencedReadSrc string
	//go:embed lua/fenced_write.lua
	fencedWriteSrc string
	//go:embed lua/sell_atomic.lua
	sellAtomicSrc string
	//go:embed lua/ledger.lua
	ledgerSrc string
	//go:embed lua/peek.lua
	peekSrc string
	//go:embed lua/window.lua
	windowSrc string
	//go:embed lua/salesclock.lua
	salesClockSrc string
	//go:embed lua/lifeclock.lua
	lifeClockSrc string
	//go:embed lua/lifecycle.lua
	lifecycleSrc string
)

// resultsPrelude is the results table in Lua (results.go), one line put
// before the scripts that answer from it.
var resultsPrelude = func() string {
	var b strings.Builder
	b.WriteString("local R = {")
	for i, r := range results {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %d", r.lua, r.code)
	}
	b.WriteString("}\n")
	return b.String()
}()

// ledgerPrelude gives the selling scripts (ledger.lua) the format their
// entries carry, from ledgerFormat: one number, in Go.
var ledgerPrelude = "local ledgerFormat = '" + strconv.Itoa(ledgerFormat) + "'\n"

// part is one piece of a run script: its text and where it comes from.
type part struct{ from, src string }

// runScripts are the run files and their parts, in order.
func runScripts() map[string][]part {
	results := part{"results.go (resultsPrelude)", resultsPrelude}
	life := part{"lifeclock.lua", lifeClockSrc}
	ledger := []part{{"formats.go (ledgerPrelude)", ledgerPrelude}, life, {"ledger.lua", ledgerSrc}}
	out := map[string][]part{"lifecycle": {life, {"lifecycle.lua", lifecycleSrc}}}
	for _, windowed := range []bool{false, true} {
		suffix := ""
		if windowed {
			suffix = "_windowed"
		}
		win := part{"window.lua", "local windowed = " + strconv.FormatBool(windowed) + "\n" + windowSrc}
		in, guard, clock := part{"int.lua", intSrc}, part{"guard.lua", guardSrc}, part{"salesclock.lua", salesClockSrc}
		out["read"+suffix] = []part{results, in, guard, win, {"fenced_read.lua", fencedReadSrc}}
		out["write"+suffix] = append(append([]part{results, in, clock}, ledger...), win, part{"fenced_write.lua", fencedWriteSrc})
		out["atomic"+suffix] = append(append([]part{results, in, guard, clock}, ledger...), win, part{"sell_atomic.lua", sellAtomicSrc})
		out["peek"+suffix] = []part{results, in, guard, win, {"peek.lua", peekSrc}}
	}
	return out
}

// runFile is a run script's text: a first line naming its parts, then
// the parts.
func runFile(parts []part) string {
	var froms []string
	var b strings.Builder
	for _, p := range parts {
		froms = append(froms, p.from)
	}
	fmt.Fprintf(&b, "-- Generated from %s by TestRunScriptsAreTheirParts (make docs): edit those, not this.\n",
		strings.Join(froms, ", "))
	for _, p := range parts {
		b.WriteString(p.src)
	}
	return b.String()
}

// Each script the store sends to sell, or to read to sell, is a file of
// lua/run as it is sent: its parts put together, so a Redis error's line
// number is that file's. A run file that differs from its parts fails
// here; UPDATE_DOCS=1 (make docs) writes them again.
func TestRunScriptsAreTheirParts(t *testing.T) {
	embedded := map[string]string{
		"read": runRead, "write": runWrite, "atomic": runAtomic, "peek": runPeek,
		"read_windowed": runReadWindowed, "write_windowed": runWriteWindowed,
		"atomic_windowed": runAtomicWindowed, "peek_windowed": runPeekWindowed,
		"lifecycle": runLifecycle,
	}
	scripts := runScripts()
	if len(scripts) != len(embedded) {
		t.Fatalf("%d run scripts made, %d embedded", len(scripts), len(embedded))
	}
	for name, parts := range scripts {
		want := runFile(parts)
		path := filepath.Join("lua", "run", name+".lua")
		if os.Getenv("UPDATE_DOCS") != "" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if embedded[name] != want {
			t.Errorf("%s differs from its parts: run make docs", path)
		}
	}
}
