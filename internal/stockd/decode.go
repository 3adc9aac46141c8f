package stockd

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cast"

	"seckill/internal/stock"
)

// Typed keys that need more than mapstructure's conversions.
var (
	durationType = reflect.TypeFor[time.Duration]()
	delayType    = reflect.TypeFor[stock.Delay]()
	listType     = reflect.TypeFor[[]string]()
)

// decodeHook converts a value from YAML, a default or the environment (all
// strings) to the type of its Config field, strictly: a duration needs a
// unit, a boolean must read as one, a list is a YAML list or comma-separated.
// Values of any other target type (the sections) pass through.
func decodeHook(_, to reflect.Type, data any) (any, error) {
	switch to {
	case durationType:
		return toDuration(data)
	case delayType:
		d, err := stock.ParseDelay(strings.TrimSpace(cast.ToString(data)))
		if err != nil {
			return nil, fmt.Errorf("want \"5ms\" or a range \"2ms-10ms\": %w", err)
		}
		return d, nil
	case listType:
		return toList(data), nil
	}
	switch to.Kind() {
	case reflect.String:
		return strings.TrimSpace(cast.ToString(data)), nil
	case reflect.Int:
		n, err := cast.ToIntE(data)
		if err != nil {
			return nil, fmt.Errorf("not an integer: %q", cast.ToString(data))
		}
		return n, nil
	case reflect.Bool:
		if s, ok := data.(string); ok {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("not a boolean: %q", s)
			}
			return b, nil
		}
		b, err := cast.ToBoolE(data)
		if err != nil {
			return nil, fmt.Errorf("not a boolean: %v", data)
		}
		return b, nil
	}
	return data, nil
}

// toDuration insists on a unit: YAML "10" would otherwise become 10ns.
func toDuration(data any) (time.Duration, error) {
	if d, ok := data.(time.Duration); ok {
		return d, nil
	}
	s := strings.TrimSpace(cast.ToString(data))
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (want e.g. \"10s\", \"250ms\"): %q", s)
	}
	return d, nil
}

// toList accepts a YAML list or a comma-separated string (the env form and
// the defaults); blanks are dropped. It never returns nil, so an empty list
// is the same from every source.
func toList(data any) []string {
	var items []string
	if s, ok := data.(string); ok {
		items = strings.Split(s, ",")
	} else {
		items = cast.ToStringSlice(data)
	}
	out := []string{}
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// namedError is mapstructure's DecodeError: an error and the key it is about.
type namedError interface {
	Name() string
	Unwrap() error
}

// keyErrors flattens mapstructure's decoding errors (joined, and nested per
// section) into one per key, "config: lock.ttl: not a duration ...", the form
// Validate uses too.
func keyErrors(err error) []error {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		var out []error
		for _, e := range e.Unwrap() {
			out = append(out, keyErrors(e)...)
		}
		return out
	case namedError:
		inner := e.Unwrap()
		var deeper namedError
		_, joined := inner.(interface{ Unwrap() []error })
		if e.Name() == "" || joined || errors.As(inner, &deeper) {
			return keyErrors(inner)
		}
		return []error{fmt.Errorf("config: %s: %w", e.Name(), inner)}
	}
	if inner := errors.Unwrap(err); inner != nil {
		return keyErrors(inner)
	}
	return []error{fmt.Errorf("config: %w", err)}
}
