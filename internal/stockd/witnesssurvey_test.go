package stockd

import "testing"

func TestSharedHost(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{[]string{"127.0.0.1"}, []string{"localhost"}, true},
		{[]string{"::1"}, []string{""}, true}, // ":6379" is this machine
		{[]string{"etcd-1", "etcd-2"}, []string{"ETCD-2"}, true},
		{[]string{"10.0.0.5"}, []string{"10.0.0.6"}, false},
		{[]string{"etcd"}, nil, false},
	} {
		if got := sharedHost(tc.a, tc.b); got != tc.want {
			t.Errorf("sharedHost(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
