package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orchestrator-dev/orchestrator/internal/config"
	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
)

// spendEvery is how long a read of the spend serves /metrics: a scrape
// reads the store at most this often.
const spendEvery = 30 * time.Second

// spendCollector is orchestrator_spend_usd{period} and
// orchestrator_spend_cap_usd{period}: what all runs spent today and this
// month (in limits.timezone), and the caps with today's and this month's
// raises (0: no cap). The spend is read from the store (every process's
// turns), at most every spendEvery.
type spendCollector struct {
	st     *store.Store
	limits config.Limits
	spent  *prometheus.Desc
	cap    *prometheus.Desc

	mu     sync.Mutex
	readAt time.Time
	values map[string][2]float64 // period → spent, cap
}

func newSpendCollector(st *store.Store, limits config.Limits) *spendCollector {
	return &spendCollector{st: st, limits: limits,
		spent: prometheus.NewDesc("orchestrator_spend_usd", "What all runs spent in the period (day or month, in limits.timezone), in US dollars.", []string{"period"}, nil),
		cap:   prometheus.NewDesc("orchestrator_spend_cap_usd", "The spend cap of the period with its raises, in US dollars (0: no cap).", []string{"period"}, nil),
	}
}

func (c *spendCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.spent; ch <- c.cap }

func (c *spendCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil || time.Since(c.readAt) >= spendEvery {
		if v, err := c.read(); err == nil {
			c.values, c.readAt = v, time.Now()
		}
	}
	for period, v := range c.values {
		ch <- prometheus.MustNewConstMetric(c.spent, prometheus.GaugeValue, v[0], period)
		ch <- prometheus.MustNewConstMetric(c.cap, prometheus.GaugeValue, v[1], period)
	}
}

func (c *spendCollector) read() (map[string][2]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now, loc := time.Now(), c.limits.Location()
	out := map[string][2]float64{}
	for period, amount := range map[string]float64{"day": c.limits.CostUSDPerDay, "month": c.limits.CostUSDPerMonth} {
		start, end := runner.PeriodOf(period, now, loc)
		spent, err := c.st.Spend(ctx, store.CapScopeAll, start, end)
		if err != nil {
			return nil, err
		}
		limit := 0.0
		if amount > 0 {
			raised, _, err := c.st.CapRaises(ctx, store.CapScopeAll, period, start)
			if err != nil {
				return nil, err
			}
			limit = amount + raised
		}
		out[period] = [2]float64{spent, limit}
	}
	return out, nil
}
