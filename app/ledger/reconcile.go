package ledger

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/app/ledger/providerlog"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/estimate"
)

// Report is the outcome of comparing the ledger with an independent record.
type Report struct {
	Checked    int      // ledger rows compared
	Mismatches []string // a row whose tokens, cost or status disagree with the provider's record
	Orphans    []string // a provider record with no ledger row, or a charged row the provider never saw
	// NotChecked names each side that could not be compared and why (Redis
	// unset or unreachable): silence about it would read as agreement.
	NotChecked []string `json:",omitempty"`
}

// OK reports a clean reconciliation: every side compared, nothing mismatched,
// nothing orphaned.
func (r Report) OK() bool {
	return len(r.Mismatches) == 0 && len(r.Orphans) == 0 && len(r.NotChecked) == 0
}

// ReconcileProvider compares ledger rows with a provider's own usage log (the mock provider's),
// joined by the request id the gateway forwards upstream. There is no tolerance:
// every reported token class must match and every cost must be the exact price
// of those tokens.
func ReconcileProvider(rows []proxy.LedgerEntry, records []providerlog.Record, prices estimate.Table) Report {
	byID := make(map[string]proxy.LedgerEntry, len(rows))
	for _, r := range rows {
		byID[r.RequestID] = r
	}
	var rep Report
	seen := map[string]bool{}
	for _, rec := range records {
		id := rec.Headers.Get(proxy.RequestIDHeader)
		if id == "" {
			continue // not sent through a gateway
		}
		seen[id] = true
		row, ok := byID[id]
		if !ok {
			rep.Orphans = append(rep.Orphans, fmt.Sprintf("%s: the provider served it (%s %s) but the ledger has no row", id, rec.Method, rec.Path))
			continue
		}
		rep.Checked++
		if problem := compare(row, rec, prices); problem != "" {
			rep.Mismatches = append(rep.Mismatches, id+": "+problem)
		}
	}
	for _, r := range rows {
		if !seen[r.RequestID] && r.Status != proxy.LedgerReleased && r.Status != proxy.LedgerHeld {
			rep.Orphans = append(rep.Orphans, fmt.Sprintf("%s: charged %d µ$ (%s) but the provider never saw it", r.RequestID, r.CostMicros, r.Status))
		}
	}
	sort.Strings(rep.Mismatches)
	sort.Strings(rep.Orphans)
	return rep
}

// compare checks one row against the provider's record of the same request.
func compare(row proxy.LedgerEntry, rec providerlog.Record, prices estimate.Table) string {
	switch {
	case row.Status == proxy.LedgerHeld:
		return "still held"
	case rec.UsageReported && !rec.Disconnected:
		if row.Status != proxy.LedgerSettled {
			return fmt.Sprintf("the provider reported usage but the row is %s", row.Status)
		}
	case rec.Status >= 400:
		if row.Status != proxy.LedgerReleased || row.CostMicros != 0 {
			return fmt.Sprintf("the provider refused it (%d) but the row is %s at %d µ$", rec.Status, row.Status, row.CostMicros)
		}
		return ""
	default:
		// Cut or usage-less: charged the usage seen, or the whole hold.
		if row.Status != proxy.LedgerUncertain || row.CostMicros <= 0 {
			return fmt.Sprintf("the provider reported no final usage but the row is %s at %d µ$", row.Status, row.CostMicros)
		}
		return ""
	}
	want := rec.Usage
	got := row.Usage
	input := got.InputTokens
	if !strings.HasPrefix(rec.Path, "/v1/messages") {
		input += got.CacheReadTokens // OpenAI's prompt tokens include the cached ones
	}
	if input != want.InputTokens || got.OutputTokens != want.OutputTokens || got.CacheReadTokens != want.CacheReadInputTokens ||
		got.CacheWriteTokens != want.CacheCreationInputTokens {
		return fmt.Sprintf("tokens %+v, provider reported %+v", got, want)
	}
	price, err := prices.Lookup(row.Model)
	if err != nil {
		return err.Error()
	}
	if cost := proxy.CostOf(price, got); row.CostMicros != cost {
		return fmt.Sprintf("cost %d µ$, the price of the reported tokens is %d µ$", row.CostMicros, cost)
	}
	return ""
}
