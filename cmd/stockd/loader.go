package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/viper"

	"seckill/internal/stock"
)

// loader converts viper values to typed ones and collects one error per bad
// key, each naming the key, so a broken config is reported in full at once.
type loader struct {
	v    *viper.Viper
	errs []error
}

func (l *loader) fail(key string, err error) {
	l.errs = append(l.errs, fmt.Errorf("config: %s: %w", key, err))
}

func (l *loader) str(key string) string { return strings.TrimSpace(cast.ToString(l.v.Get(key))) }

func (l *loader) int(key string) int {
	n, err := cast.ToIntE(l.v.Get(key))
	if err != nil {
		l.fail(key, fmt.Errorf("not an integer: %q", cast.ToString(l.v.Get(key))))
	}
	return n
}

func (l *loader) bool(key string) bool {
	raw := l.v.Get(key)
	if s, ok := raw.(string); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			l.fail(key, fmt.Errorf("not a boolean: %q", s))
		}
		return b
	}
	b, err := cast.ToBoolE(raw)
	if err != nil {
		l.fail(key, fmt.Errorf("not a boolean: %v", raw))
	}
	return b
}

// duration insists on a unit: YAML "10" would otherwise become 10ns.
func (l *loader) duration(key string) time.Duration {
	raw := l.v.Get(key)
	if d, ok := raw.(time.Duration); ok {
		return d
	}
	s := strings.TrimSpace(cast.ToString(raw))
	d, err := time.ParseDuration(s)
	if err != nil {
		l.fail(key, fmt.Errorf("not a duration (want e.g. \"10s\", \"250ms\"): %q", s))
	}
	return d
}

func (l *loader) delay(key string) stock.Delay {
	s := strings.TrimSpace(cast.ToString(l.v.Get(key)))
	d, err := stock.ParseDelay(s)
	if err != nil {
		l.fail(key, fmt.Errorf("want \"5ms\" or a range \"2ms-10ms\": %w", err))
	}
	return d
}

// list accepts a YAML list or a comma-separated string (the env form);
// viper's own string-to-slice splits on spaces, not commas.
func (l *loader) list(key string) []string {
	var items []string
	switch raw := l.v.Get(key).(type) {
	case string:
		items = strings.Split(raw, ",")
	default:
		items = cast.ToStringSlice(raw)
	}
	out := items[:0:0]
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
