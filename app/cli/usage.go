package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/ledger"
	"github.com/tollgate/tollgate/app/ledger/providerlog"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
)

// usageReport is `admin usage`: each request's model, tokens by class, held and
// settled cost, newest first.
func usageReport(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	memberRef := c.flags.String("member", "", "only this member (email or id)")
	since := c.flags.Duration("since", 24*time.Hour, "how far back")
	limit := c.flags.Int("limit", 100, "how many rows")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	if *limit < 1 || *limit > 100000 {
		return usagef("admin usage: --limit must be from 1 to 100000")
	}
	if *since <= 0 {
		return usagef("admin usage: --since must be a positive duration such as 24h, not %s", *since)
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	var memberID *int64
	if *memberRef != "" {
		_, m, err := c.member(ctx, *teamRef, *memberRef)
		if err != nil {
			return err
		}
		memberID = &m.ID
	}
	rows, err := c.st.Ledger(ctx, t.ID, memberID, time.Now().Add(-*since), int32(*limit))
	if err != nil {
		return err
	}
	var held, spent int64
	for _, r := range rows {
		spent = proxy.AddSpend(spent, r.CostMicros)
		if r.Status == proxy.LedgerHeld {
			held = proxy.AddSpend(held, r.HeldMicros)
		}
	}
	return c.print(rows, func(w io.Writer) {
		fmt.Fprintln(w, "TIME\tREQUEST\tMEMBER\tMODEL\tSTATUS\tIN\tCACHE-W\tCACHE-R\tOUT\tHELD $\tCOST $")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.CreatedAt.UTC().Format(time.DateTime), r.RequestID,
				r.MemberID, r.Model, r.Status, r.Usage.InputTokens, r.Usage.CacheWriteTokens, r.Usage.CacheReadTokens,
				r.Usage.OutputTokens, store.FormatDollars(r.HeldMicros), store.FormatDollars(r.CostMicros))
		}
		fmt.Fprintf(w, "%d requests, $%s settled, $%s still held\n", len(rows), store.FormatDollars(spent), store.FormatDollars(held))
	})
}

// reconcile is `admin reconcile`: the ledger against the Redis spend counters
// and against the mock provider's own usage log (with --provider-log). Exits
// non-zero on any difference, and when the Redis counters could not be read
// (REDIS_URL unset or Redis unreachable) unless --skip-redis says not to. Run it
// while the team is idle: a request in flight is held, not yet spent, on both
// sides differently.
func reconcile(ctx context.Context, c *adminCmd, args []string) error {
	teamRef := c.flags.String("team", "", "team name or id")
	source := c.flags.String("provider-log", "", "the provider's usage log: a mockprovider -log JSONL file, or its http://.../_mock/records URL")
	since := c.flags.Duration("since", 24*time.Hour, "how far back")
	skipRedis := c.flags.Bool("skip-redis", false, "do not compare with the Redis spend counters")
	if err := c.parse(args, "team"); err != nil {
		return err
	}
	if *since <= 0 {
		return usagef("admin reconcile: --since must be a positive duration such as 24h, not %s", *since)
	}
	if *skipRedis && *source == "" {
		return usagef("admin reconcile: nothing to compare with: --skip-redis needs --provider-log")
	}
	t, err := c.team(ctx, *teamRef)
	if err != nil {
		return err
	}
	var rep ledger.Report
	if !*skipRedis {
		if rep.Mismatches, rep.NotChecked, err = reconcileCounters(ctx, c, t); err != nil {
			return err
		}
	}
	if *source == "" {
		return c.finish(rep)
	}
	records, err := readProviderLog(ctx, *source)
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-*since)
	rows, err := c.st.Ledger(ctx, t.ID, nil, cutoff, 1_000_000)
	if err != nil {
		return err
	}
	prices, err := c.st.PriceTable(ctx)
	if err != nil {
		return err
	}
	inWindow := records[:0]
	for _, r := range records {
		if !r.Time.Before(cutoff) {
			inWindow = append(inWindow, r)
		}
	}
	provider := ledger.ReconcileProvider(rows, inWindow, prices)
	provider.Mismatches = append(provider.Mismatches, rep.Mismatches...)
	provider.NotChecked = rep.NotChecked
	return c.finish(provider)
}

// finish prints a reconciliation and fails when it found anything or could
// not compare a side.
func (c *adminCmd) finish(rep ledger.Report) error {
	if err := c.print(rep, func(w io.Writer) {
		for _, m := range rep.Mismatches {
			fmt.Fprintln(w, "mismatch:", m)
		}
		for _, o := range rep.Orphans {
			fmt.Fprintln(w, "orphan:", o)
		}
		for _, n := range rep.NotChecked {
			fmt.Fprintln(w, "not checked:", n)
		}
		fmt.Fprintf(w, "%d rows checked, %d mismatches, %d orphans\n", rep.Checked, len(rep.Mismatches), len(rep.Orphans))
	}); err != nil {
		return err
	}
	if len(rep.NotChecked) > 0 {
		return fmt.Errorf("the ledger was not fully reconciled: %s", strings.Join(rep.NotChecked, "; "))
	}
	if !rep.OK() {
		return fmt.Errorf("the ledger does not reconcile: %d mismatches, %d orphans", len(rep.Mismatches), len(rep.Orphans))
	}
	return nil
}

// reconcileCounters compares, for every budget of the team and its members, the
// spend Redis counts in the current period with the ledger's. When it cannot
// read Redis it says why in notChecked instead.
func reconcileCounters(ctx context.Context, c *adminCmd, t store.Team) (problems, notChecked []string, err error) {
	const skip = " (--skip-redis to reconcile without them)"
	r, ok := c.lim.(*limiter.Redis)
	if !ok {
		return nil, []string{"Redis spend counters: REDIS_URL is not set" + skip}, nil
	}
	problems, err = ledger.CompareCounters(ctx, c.st, r, t)
	if unread, ok := errors.AsType[ledger.RedisUnread](err); ok {
		return nil, []string{"Redis spend counters: Redis did not answer: " + unread.Err.Error() + skip}, nil
	}
	return problems, nil, err
}

func readProviderLog(ctx context.Context, source string) ([]providerlog.Record, error) {
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
		if err != nil {
			return nil, fmt.Errorf("--provider-log: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("--provider-log: %w", err)
		}
		defer resp.Body.Close()
		var records []providerlog.Record
		if err := json.NewDecoder(resp.Body).Decode(&records); err != nil {
			return nil, fmt.Errorf("--provider-log %s: not a records list: %w", source, err)
		}
		return records, nil
	}
	f, err := os.Open(source)
	if err != nil {
		return nil, fmt.Errorf("--provider-log: %w", err)
	}
	defer f.Close()
	var records []providerlog.Record
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; s.Scan(); line++ {
		var r providerlog.Record
		if err := json.Unmarshal(s.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("--provider-log %s line %d: %w", source, line, err)
		}
		records = append(records, r)
	}
	return records, s.Err()
}
