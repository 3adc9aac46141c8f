package stockd

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// envPrefix starts every environment variable that sets a key.
const envPrefix = "STOCKD_"

// configKey is one configuration key: its dotted name and its default in the
// environment's form.
type configKey struct {
	name, def string
}

// keys is every configuration key, in Config's field order, read once from
// its tags.
var keys = keysOf(reflect.TypeFor[Config](), "")

// envKeys maps STOCKD_LOCK_REDIS_ADDR to lock.redis_addr. It is built from
// the keys rather than by replacing "_" with ".", which would be ambiguous:
// key names contain underscores.
var envKeys = func() map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[envName(k.name)] = k.name
	}
	return m
}()

// envName is the environment variable of a key: the prefix, dots as
// underscores, upper case.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// keysOf lists the keys of a Config section. A field with a default tag is a
// key; a struct field without one is a section; anything else is a mistake
// in Config, reported when the binary starts (and by every test).
func keysOf(t reflect.Type, section string) []configKey {
	var out []configKey
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		switch {
		case name == "-":
			continue
		case name == "":
			panic(fmt.Sprintf("config: field %s.%s has no mapstructure tag", t.Name(), f.Name))
		case section != "":
			name = section + "." + name
		}
		if def, ok := f.Tag.Lookup("default"); ok {
			out = append(out, configKey{name: name, def: def})
			continue
		}
		if f.Type.Kind() != reflect.Struct {
			panic(fmt.Sprintf("config: key %s has no default tag", name))
		}
		out = append(out, keysOf(f.Type, name)...)
	}
	return out
}

func knownKey(name string) bool {
	_, ok := envKeys[envName(name)]
	return ok
}

// defaultDuration is the default of the duration key name, from its tag.
// It panics on a name that is not a duration key: a mistake in the code,
// which every test would show.
func defaultDuration(name string) time.Duration {
	for _, k := range keys {
		if k.name == name {
			d, err := time.ParseDuration(k.def)
			if err != nil {
				panic(fmt.Sprintf("config: %s's default %q is not a duration: %v", name, k.def, err))
			}
			return d
		}
	}
	panic("config: no key " + name)
}
