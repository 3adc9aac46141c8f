package handler

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/buyers.md's "Admin" paragraph states the back-off as the constants here
// make it: the free attempts, the first shut-out and its doubling to the cap.
func TestReadmeAdminBackoff(t *testing.T) {
	b, err := os.ReadFile("../../docs/buyers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(b), "**Admin.**")
	para, _, _ = strings.Cut(para, "\n\n")
	if !ok {
		t.Fatal(`docs/buyers.md: no "**Admin.**" paragraph`)
	}
	para = strings.Join(strings.Fields(para), " ") // line breaks are spaces
	cardinals := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
	ordinals := []string{"", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh"}
	if freeFailures+1 >= len(ordinals) {
		t.Fatalf("freeFailures %d: teach this test the words", freeFailures)
	}
	seconds := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	var steps []string
	for over := 1; ; over++ {
		d := min(firstBackoff<<min(over-1, 16), maxBackoff)
		steps = append(steps, seconds(d))
		if d == maxBackoff {
			break
		}
	}
	for _, want := range []string{
		fmt.Sprintf("first %s wrong tokens free", cardinals[freeFailures]),
		fmt.Sprintf("the %s and each one after it shut the source out", ordinals[freeFailures+1]),
		fmt.Sprintf("for %s s, doubling to %s s (%s s)", seconds(firstBackoff), seconds(maxBackoff), strings.Join(steps, ", ")),
		"`429` with `Retry-After`",
	} {
		if !strings.Contains(para, want) {
			t.Errorf("docs/buyers.md's Admin paragraph does not say %q:\n%s", want, para)
		}
	}
}
