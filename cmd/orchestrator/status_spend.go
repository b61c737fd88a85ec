package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/orchestrator-dev/orchestrator/internal/runner"
	"github.com/orchestrator-dev/orchestrator/internal/store"
	"github.com/orchestrator-dev/orchestrator/specs"
)

// spendRow is what was spent against one spend cap (issue 27): all runs'
// day and month (limits.cost_usd_per_day, …_per_month; shown without a
// cap too), and each spec's day that has max_cost_usd_per_day.
type spendRow struct {
	Spec      string    `json:"spec,omitempty"` // absent: all runs together
	Period    string    `json:"period"`         // day or month
	Start     time.Time `json:"start"`          // the period's beginning, in limits.timezone
	SpentUSD  float64   `json:"spent_usd"`
	CapUSD    float64   `json:"cap_usd"`    // raises included; 0: no cap
	RaisedUSD float64   `json:"raised_usd"` // what Continue at cap questions added this period
}

// statusSpend reads the spend against each cap: one statement per period
// for the spend, one per cap for its raises (specs, not runs).
func (m *Main) statusSpend(ctx context.Context, st *store.Store, list []specs.Spec, only string, now time.Time) ([]spendRow, error) {
	lim := m.Config.Limits
	loc := lim.Location()
	dayStart, dayEnd := runner.PeriodOf("day", now, loc)
	monthStart, monthEnd := runner.PeriodOf("month", now, loc)
	row := func(scope, period string, start, end time.Time, amount float64) (spendRow, error) {
		r := spendRow{Spec: scope, Period: period, Start: start}
		var err error
		if r.SpentUSD, err = st.Spend(ctx, scope, start, end); err != nil {
			return r, err
		}
		if amount > 0 {
			if r.RaisedUSD, _, err = st.CapRaises(ctx, scope, period, start); err != nil {
				return r, err
			}
			r.CapUSD = amount + r.RaisedUSD
		}
		return r, nil
	}
	out := []spendRow{}
	if only == "" {
		for _, p := range []struct {
			period     string
			start, end time.Time
			amount     float64
		}{{"day", dayStart, dayEnd, lim.CostUSDPerDay}, {"month", monthStart, monthEnd, lim.CostUSDPerMonth}} {
			r, err := row(store.CapScopeAll, p.period, p.start, p.end, p.amount)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	for _, sp := range list {
		if sp.MaxCostUSDPerDay <= 0 || (only != "" && sp.Name != only) {
			continue
		}
		r, err := row(sp.Name, "day", dayStart, dayEnd, sp.MaxCostUSDPerDay)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// printSpend prints the spend against each cap.
func printSpend(out io.Writer, rows []spendRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(out)
	w := newTable(out)
	fmt.Fprintln(w, "SPEND\tPERIOD\tSPENT\tCAP")
	for _, r := range rows {
		who := r.Spec
		if who == "" {
			who = "all runs"
		}
		limit := "none"
		if r.CapUSD > 0 {
			limit = fmt.Sprintf("$%.4f", r.CapUSD)
			if r.RaisedUSD > 0 {
				limit += fmt.Sprintf(" (raised by $%.4f)", r.RaisedUSD)
			}
		}
		what := "today"
		if r.Period == "month" {
			what = "this month"
		}
		fmt.Fprintf(w, "%s\t%s\t$%.4f\t%s\n", who, what, r.SpentUSD, limit)
	}
	w.Flush()
}
