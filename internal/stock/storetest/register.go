// Package storetest holds what the stock packages' tests share.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"seckill/internal/stock"
)

// MemRegister is a stock.Register in memory, for the witness's tests:
// its merge rules are tested on it; package witness tests the real
// registers (etcd, MySQL).
type MemRegister struct {
	mu   sync.Mutex
	val  []byte // nil: nothing stored
	down bool
	// Gate, when set, holds every Put until it is closed (or the Put's
	// context ends).
	Gate    atomic.Pointer[chan struct{}]
	Puts    atomic.Int64
	Refused atomic.Int64
	// AfterGet, when set, runs once a Get has read its value and before
	// it returns it: what another goroutine does while a read is out.
	AfterGet atomic.Pointer[func()]
}

func (m *MemRegister) Name() string { return "memory" }

func (m *MemRegister) Get(ctx context.Context) ([]byte, error) {
	m.mu.Lock()
	if m.down {
		m.mu.Unlock()
		return nil, stock.ErrRegisterUnavailable
	}
	v := bytes.Clone(m.val)
	m.mu.Unlock()
	if f := m.AfterGet.Swap(nil); f != nil {
		(*f)()
	}
	return v, nil
}

func (m *MemRegister) Put(ctx context.Context, v, expect []byte) (bool, error) {
	if g := m.Gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", stock.ErrRegisterUnavailable, ctx.Err())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return false, stock.ErrRegisterUnavailable
	}
	m.Puts.Add(1)
	if (expect == nil) != (m.val == nil) || !bytes.Equal(expect, m.val) {
		m.Refused.Add(1)
		return false, nil
	}
	m.val = append([]byte{}, v...)
	return true, nil
}

// Set stores v as a restore or a wipe would (nil: nothing stored), and
// returns what was there.
func (m *MemRegister) Set(v []byte) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.val
	m.val = bytes.Clone(v)
	return old
}

// SetDown makes every call fail as a register that does not answer
// (down), or answer again.
func (m *MemRegister) SetDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

// Value is what is stored (nil: nothing).
func (m *MemRegister) Value() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.val)
}
