package redisstore

import (
	"fmt"
	"strconv"
	"strings"
)

// parseReceipt reads a receipt's value: "<stock after>" for a single sale,
// "<stock after the batch>:<units sold>" for a combined one.
func parseReceipt(v string) (after int64, units int, err error) {
	a, u, batch := strings.Cut(v, ":")
	if after, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, err
	}
	if !batch {
		return after, 1, nil
	}
	if units, err = strconv.Atoi(u); err != nil || units < 1 {
		return 0, 0, fmt.Errorf("bad units in receipt %q", v)
	}
	return after, units, nil
}
