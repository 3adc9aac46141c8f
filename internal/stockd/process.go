package stockd

import (
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
)

// Version is set at build time (-ldflags "-X seckill/internal/stockd.Version=v1.2.3");
// without it the module version from the build info is used.
var Version = ""

// lookupEnv reads one variable from a KEY=VALUE list (the last one wins, as
// in os.Getenv).
func lookupEnv(env []string, key string) string {
	val := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val = v
		}
	}
	return val
}

// NewLogger is the process's logger as cfg.log asks: text or JSON, the
// level, every line tagged with the replica's name.
func NewLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // validated already
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("replica", cfg.Replica)
}

// BuildVersion is Version, or the module version and VCS revision the
// build recorded.
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return strings.TrimSpace(bi.Main.Version + " " + s.Value)
			}
		}
		return bi.Main.Version
	}
	return "unknown"
}
