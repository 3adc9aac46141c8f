//go:build lab

package failpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// enable arms name with spec for the rest of t.
func enable(t *testing.T, name, spec string) {
	t.Helper()
	if err := Enable(name, spec); err != nil {
		t.Fatalf("Enable(%q, %q): %v", name, spec, err)
	}
	t.Cleanup(DisableAll)
}

func TestDisabledIsNoop(t *testing.T) {
	DisableAll()
	if err := Eval(t.Context(), "nothing/here"); err != nil {
		t.Fatalf("Eval with nothing enabled = %v, want nil", err)
	}
	enable(t, "other/point", "error")
	if err := Eval(t.Context(), "nothing/here"); err != nil {
		t.Fatalf("Eval of a name not enabled = %v, want nil", err)
	}
}

func TestDisabledAllocatesNothing(t *testing.T) {
	DisableAll()
	ctx := t.Context()
	if n := testing.AllocsPerRun(1000, func() { _ = Eval(ctx, "setnx/afterSetNX") }); n != 0 {
		t.Fatalf("Eval with nothing enabled: %v allocs per call, want 0", n)
	}
	// Another failpoint enabled: a map lookup, still no allocation.
	enable(t, "other/point", "error")
	if n := testing.AllocsPerRun(1000, func() { _ = Eval(ctx, "setnx/afterSetNX") }); n != 0 {
		t.Fatalf("Eval of a name not enabled: %v allocs per call, want 0", n)
	}
}

func TestError(t *testing.T) {
	enable(t, "a/b", "error(boom)")
	err := Eval(t.Context(), "a/b")
	if !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Eval = %v, want ErrInjected with \"boom\"", err)
	}
}

func TestCount(t *testing.T) {
	enable(t, "a/b", "2*error")
	var fired int
	for range 5 {
		if Eval(t.Context(), "a/b") != nil {
			fired++
		}
	}
	if fired != 2 {
		t.Fatalf("2*error fired %d times in 5 evaluations, want 2", fired)
	}
}

func TestSleep(t *testing.T) {
	enable(t, "a/b", "sleep(80ms)")
	start := time.Now()
	if err := Eval(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < 80*time.Millisecond {
		t.Fatalf("sleep(80ms) returned after %v, want >= 80ms", got)
	}

	// The caller's deadline cuts it short.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	enable(t, "a/b", "sleep(1h)")
	if err := Eval(ctx, "a/b"); !errors.Is(err, ErrInjected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sleep past the deadline = %v, want ErrInjected wrapping DeadlineExceeded", err)
	}
}

func TestPauseRelease(t *testing.T) {
	enable(t, "a/b", "pause")
	done := make(chan error, 1)
	go func() { done <- Eval(context.Background(), "a/b") }()

	if err := WaitPaused(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("paused Eval returned %v before Release", err)
	default:
	}
	if !Release("a/b") {
		t.Fatal("Release of an enabled pause = false, want true")
	}
	if err := <-done; err != nil {
		t.Fatalf("released Eval = %v, want nil", err)
	}

	// Still armed: the next evaluation pauses again, and WaitPaused waits
	// for that one rather than reporting the previous.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := WaitPaused(ctx, "a/b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitPaused after Release with nobody paused = %v, want DeadlineExceeded", err)
	}
	go func() { done <- Eval(context.Background(), "a/b") }()
	if err := WaitPaused(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	// Disable lets it go too.
	if !Disable("a/b") {
		t.Fatal("Disable of an enabled failpoint = false, want true")
	}
	if err := <-done; err != nil {
		t.Fatalf("Eval released by Disable = %v, want nil", err)
	}
	if Disable("a/b") {
		t.Fatal("second Disable = true, want false")
	}
}

func TestPauseCancel(t *testing.T) {
	enable(t, "a/b", "pause")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Eval(ctx, "a/b") }()
	if err := WaitPaused(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInjected) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pause = %v, want ErrInjected wrapping Canceled", err)
	}
}

func TestWaitPausedNotAPause(t *testing.T) {
	enable(t, "a/b", "error")
	if err := WaitPaused(t.Context(), "a/b"); err == nil {
		t.Fatal("WaitPaused on an error failpoint = nil, want an error")
	}
	if Release("a/b") {
		t.Fatal("Release on an error failpoint = true, want false")
	}
}

func TestPanic(t *testing.T) {
	enable(t, "a/b", "panic(here)")
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "a/b") || !strings.Contains(s, "here") {
			t.Fatalf("recovered %v, want a panic naming a/b and \"here\"", r)
		}
	}()
	_ = Eval(t.Context(), "a/b")
	t.Fatal("panic action did not panic")
}

func TestExit(t *testing.T) {
	var got []int
	old := exit
	exit = func(code int) { got = append(got, code) }
	t.Cleanup(func() { exit = old })
	enable(t, "a/b", "exit")
	_ = Eval(t.Context(), "a/b")
	enable(t, "a/b", "exit(3)")
	_ = Eval(t.Context(), "a/b")
	if len(got) != 2 || got[0] != 137 || got[1] != 3 {
		t.Fatalf("exit codes = %v, want [137 3]", got)
	}
}

func TestFunc(t *testing.T) {
	type key struct{}
	var seen []string
	EnableFunc("a/b", func(ctx context.Context) error {
		if who, _ := ctx.Value(key{}).(string); who != "" {
			seen = append(seen, who)
		}
		return nil
	})
	t.Cleanup(DisableAll)
	_ = Eval(context.WithValue(t.Context(), key{}, "A"), "a/b")
	_ = Eval(t.Context(), "a/b")
	if len(seen) != 1 || seen[0] != "A" {
		t.Fatalf("func saw %v, want [A]: it must get the caller's ctx", seen)
	}
}

func TestEnableSpec(t *testing.T) {
	t.Cleanup(DisableAll)
	names, err := EnableSpec(" setnx/afterSetNX=exit ; checkdel/beforeDel=1*sleep(300ms);")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "setnx/afterSetNX" || names[1] != "checkdel/beforeDel" {
		t.Fatalf("names = %v", names)
	}
	want := []string{"checkdel/beforeDel=1*sleep(300ms)", "setnx/afterSetNX=exit"}
	if got := Active(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Active() = %v, want %v", got, want)
	}
	// off disarms.
	if _, err := EnableSpec("setnx/afterSetNX=off"); err != nil {
		t.Fatal(err)
	}
	if got := Active(); len(got) != 1 {
		t.Fatalf("Active() after off = %v, want one left", got)
	}
}

func TestEnableSpecAllOrNothing(t *testing.T) {
	DisableAll()
	t.Cleanup(DisableAll)
	for _, bad := range []string{
		"a=sleep",           // no duration
		"a=sleep(-1s)",      // negative
		"a=sleep(5)",        // no unit
		"a=pause(1)",        // argument
		"a=exit(300)",       // out of range
		"a=0*error",         // zero count
		"a=frobnicate",      // unknown
		"a=error(x",         // unbalanced
		"=error",            // no name
		"justaname",         // no action
		"a=error;b=explode", // second entry bad: the first must not be armed
	} {
		if _, err := EnableSpec(bad); err == nil {
			t.Errorf("EnableSpec(%q) = nil error, want one", bad)
		}
		if got := Active(); len(got) != 0 {
			t.Errorf("EnableSpec(%q) armed %v despite the error", bad, got)
			DisableAll()
		}
	}
}

func TestEnableFromEnv(t *testing.T) {
	t.Cleanup(DisableAll)
	t.Setenv(EnvVar, "x/y=error(from env)")
	if _, err := EnableFromEnv(); err != nil {
		t.Fatal(err)
	}
	if err := Eval(t.Context(), "x/y"); err == nil || !strings.Contains(err.Error(), "from env") {
		t.Fatalf("Eval = %v, want the error armed from %s", err, EnvVar)
	}
}

func BenchmarkEvalDisabled(b *testing.B) {
	DisableAll()
	ctx := context.Background()
	for b.Loop() {
		_ = Eval(ctx, "setnx/afterSetNX")
	}
}

func BenchmarkEvalOtherEnabled(b *testing.B) {
	if err := Enable("other/point", "error"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(DisableAll)
	ctx := context.Background()
	for b.Loop() {
		_ = Eval(ctx, "setnx/afterSetNX")
	}
}
