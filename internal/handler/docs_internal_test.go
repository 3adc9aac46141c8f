package handler

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docs/buyers.md's "Admin" paragraph states the bound as the constants
// here make it: failed tries a minute, and at once.
func TestDocsAdminBound(t *testing.T) {
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
	for _, want := range []string{
		fmt.Sprintf("%d failed admin tries a minute, %d at once", adminPerMinute, adminBurst),
		"`429` with `Retry-After`",
		"`seckill_admin_throttled_total`",
	} {
		if !strings.Contains(para, want) {
			t.Errorf("docs/buyers.md's Admin paragraph does not say %q:\n%s", want, para)
		}
	}
}
