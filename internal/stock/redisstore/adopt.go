package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/stock"
)

// ErrNotAdoptable: AdoptWitness refused; nothing was written. The error
// says why, and what to do instead.
var ErrNotAdoptable = errors.New("stock: the witness cannot adopt redis's sale")

// AdoptWitness is the operator's way back from a witness_lost halt
// (witness.go) that keeps the sale: it takes the sale the stock Redis
// holds as the truth, records in the witness its epoch and, per segment,
// its stock now as the least stock answered sold, with who decided, when,
// and the books then (WitnessAdoption, kept in the record), and lifts the
// halt. Redis's stock is at or below every stock it answered, so no unit
// Redis remembers selling is sold again; what it cannot vouch for is a
// sale it lost, which is why a person decides, and why it refuses where
// the witness knows better:
//
//   - Redis holds no sale: nothing to adopt (reset).
//   - The witness records, for Redis's epoch, a stock below Redis's:
//     Redis is the one behind (a rewind); the orders, not Redis, say what
//     was sold (the runbook's reconcile).
//   - The sale is halted for another reason than witness_lost (a rewind,
//     another sale's data): the same.
//   - The durable orders (WithDurableUnits) hold a unit Redis does not
//     count: Redis went back too; the same. A MySQL that does not answer
//     refuses it as well: adoption is the step that trusts Redis.
//
// by names who decides; it is required.
func (s *Store) AdoptWitness(ctx context.Context, by string) (WitnessAdoption, error) {
	if s.wit == nil {
		return WitnessAdoption{}, fmt.Errorf("%w: the sale has no witness (stock.witness none)", ErrNotAdoptable)
	}
	if strings.TrimSpace(by) == "" {
		return WitnessAdoption{}, fmt.Errorf("%w: name who decides (by)", ErrNotAdoptable)
	}
	epoch, err := s.rdb.Get(ctx, s.keys.Epoch).Result()
	if errors.Is(err, redis.Nil) {
		return WitnessAdoption{}, fmt.Errorf("%w: redis holds no sale (no %s): reset one instead", ErrNotAdoptable, s.keys.Epoch)
	}
	if err != nil {
		return WitnessAdoption{}, WrapRedis(ctx, "read epoch", err)
	}
	why, err := s.Halted(ctx)
	if err != nil {
		return WitnessAdoption{}, err
	}
	if why != "" && !strings.HasPrefix(why, stock.ErrWitnessLost.Error()) {
		return WitnessAdoption{}, fmt.Errorf("%w: the sale is halted for another reason (%s): reconcile from the orders (the runbook)", ErrNotAdoptable, why)
	}
	st, stocks, err := s.StatusBySegment(ctx)
	if err != nil {
		return WitnessAdoption{}, err
	}
	if err := s.unitsBehind(ctx, st.Lucky); err != nil {
		return WitnessAdoption{}, err
	}
	s.mark.mu.Lock()
	rising := s.mark.rising
	s.mark.mu.Unlock()
	if rising && len(stocks) == 1 {
		// With reservations the ceilings are of the fresh stock, the
		// stock less the units returned (rewind.go). The sale is halted,
		// and a halted sale returns nothing (lifecycle.lua), so the two
		// reads agree.
		returned, err := s.Returned(ctx)
		if err != nil {
			return WitnessAdoption{}, err
		}
		stocks[0] = max(stocks[0]-returned, 0) // at 0 below it, as a sale's (rewind.go)
	}
	a := WitnessAdoption{ID: newSaleID(), By: by, At: time.Now().UTC(), Epoch: epoch, Stocks: stocks, Lucky: st.Lucky, Why: why}
	_, err = s.wit.update(ctx, true, func(r *witnessRecord) (bool, error) {
		if r.find(epoch) == nil {
			r.begin(epoch, len(stocks))
		}
		for i, c := range r.find(epoch).Ceilings {
			if i < len(stocks) && c >= 0 && c < stocks[i] {
				return false, fmt.Errorf("%w: redis is behind the witness (segment %d: redis stock %d, answered sold down to %d): reconcile from the orders (the runbook)",
					ErrNotAdoptable, i, stocks[i], c)
			}
		}
		r.lower(epoch, stocks)
		r.Adopted = &a
		return true, nil
	})
	if err != nil {
		return WitnessAdoption{}, err
	}
	if why != "" {
		// Only the halt the adoption answers: one written since (a rewind
		// caught meanwhile) stays.
		if err := liftHalt.Run(ctx, s.rdb, []string{s.keys.Halt}, why).Err(); err != nil {
			return a, WrapRedis(ctx, "lift the halt", err)
		}
	}
	// This process learns the adopted record at its next sale, as a new
	// one would.
	s.mark.forget()
	return a, nil
}

// liftHalt deletes the halt key only if it still holds ARGV[1].
var liftHalt = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// unitsBehind refuses an adoption when the durable orders hold a unit of
// Redis's sale beyond lucky, or cannot be read.
func (s *Store) unitsBehind(ctx context.Context, lucky int64) error {
	if s.units == nil || !s.Ledger() {
		return nil
	}
	sale, err := s.saleID(ctx)
	if err != nil || sale == "" {
		return err
	}
	u, err := s.units.HighestUnit(ctx, sale)
	if err != nil {
		return fmt.Errorf("stock: adopt: read the durable orders: %w: %w", stock.ErrUnavailable, err)
	}
	if u > lucky {
		return fmt.Errorf("%w: the durable orders hold unit %d of sale %s, redis counts %d sold: redis went back; reconcile (POST /stock/reconcile)", ErrNotAdoptable, u, sale, lucky)
	}
	return nil
}
