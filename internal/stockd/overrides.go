package stockd

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"seckill/internal/failpoint"
	"seckill/internal/stock"
)

// Edit sets keys of a Config: the typed, compile-checked form in which the
// tools (the local cluster, the lab, the benchmarks, the demo) say how the
// replicas they start differ from stockd's defaults. An edit assigns; it
// must not read the Config it is given (Overrides runs it on two different
// ones to see what it assigns).
type Edit func(*Config)

// Overrides renders the keys the edits assign, in order, as stockd's
// environment: STOCKD_WORK_DELAY=300ms, and SECKILL_FAILPOINTS for
// Lab.Failpoints. A key is rendered when an edit assigns it, even to its
// default, so an overlay can undo a cluster's own setting; a key no edit
// touches is left out, so the cluster's settings stay.
func Overrides(edits ...Edit) map[string]string {
	var zero, other Config
	fill(reflect.ValueOf(&other).Elem())
	for _, e := range edits {
		if e != nil {
			e(&zero)
			e(&other)
		}
	}
	out := map[string]string{}
	walkKeys(reflect.ValueOf(zero), reflect.ValueOf(other), "", func(key string, a, b reflect.Value) {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			out[EnvName(key)] = render(a)
		}
	})
	if zero.Lab.Failpoints != "" && zero.Lab.Failpoints == other.Lab.Failpoints {
		out[failpoint.EnvVar] = zero.Lab.Failpoints
	}
	return out
}

// EnvName is the environment variable of a key: the prefix, dots as
// underscores, upper case ("lock.wait_timeout" is STOCKD_LOCK_WAIT_TIMEOUT).
func EnvName(key string) string { return envName(key) }

// walkKeys calls fn with each key's dotted name and its field in a and b,
// two values of one Config section type.
func walkKeys(a, b reflect.Value, section string, fn func(key string, a, b reflect.Value)) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "-" {
			continue
		}
		if section != "" {
			name = section + "." + name
		}
		if _, ok := f.Tag.Lookup("default"); ok {
			fn(name, a.Field(i), b.Field(i))
			continue
		}
		walkKeys(a.Field(i), b.Field(i), name, fn)
	}
}

// fill sets every key of a Config section to a value that is not the zero
// value, so that an untouched key differs between the zero Config and this
// one, and an assigned key does not.
func fill(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == delayType:
			f.Set(reflect.ValueOf(stock.Delay{Min: time.Nanosecond, Max: time.Nanosecond}))
		case f.Type() == listType:
			f.Set(reflect.ValueOf([]string{"\x00"}))
		case f.Kind() == reflect.Struct:
			fill(f)
		case f.Kind() == reflect.String:
			f.SetString("\x00")
		case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
			f.SetInt(1)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			panic(fmt.Sprintf("config: fill: no value for a %s", f.Type()))
		}
	}
}

// render writes a key's value as the environment gives it (decodeHook
// reads it back).
func render(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String()
	case stock.Delay:
		return x.String()
	case []string:
		return strings.Join(x, ",")
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	}
	panic(fmt.Sprintf("config: render: no form for a %s", v.Type()))
}
