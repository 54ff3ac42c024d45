package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// UsageRow is one request in the ledger: its tokens by class and its cost.
type UsageRow struct {
	RequestID        string     `json:"request_id"`
	MemberID         int64      `json:"member_id"`
	KeyID            string     `json:"key_id"`
	RouteID          int64      `json:"route_id,omitempty"`
	Model            string     `json:"model"`
	Status           string     `json:"status" enum:"held,settled,uncertain,implausible,released"`
	HTTPStatus       int        `json:"http_status,omitempty"`
	InputTokens      int64      `json:"input_tokens"`
	OutputTokens     int64      `json:"output_tokens"`
	CacheWriteTokens int64      `json:"cache_write_tokens"`
	CacheReadTokens  int64      `json:"cache_read_tokens"`
	ReasoningTokens  int64      `json:"reasoning_tokens"`
	HeldMicros       int64      `json:"held_micros"`
	CostMicros       int64      `json:"cost_micros"`
	CreatedAt        time.Time  `json:"created_at"`
	SettledAt        *time.Time `json:"settled_at,omitempty"`
}

func usageRow(e proxy.LedgerEntry) UsageRow {
	r := UsageRow{RequestID: e.RequestID, MemberID: e.MemberID, KeyID: e.KeyID, RouteID: e.RouteID, Model: e.Model,
		Status: string(e.Status), HTTPStatus: e.HTTPStatus, InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens,
		CacheWriteTokens: e.Usage.CacheWriteTokens, CacheReadTokens: e.Usage.CacheReadTokens,
		ReasoningTokens: e.Usage.ReasoningTokens, HeldMicros: e.HeldMicros, CostMicros: e.CostMicros, CreatedAt: e.CreatedAt}
	if !e.SettledAt.IsZero() {
		r.SettledAt = &e.SettledAt
	}
	return r
}

type usageIn struct {
	MemberID int64     `query:"member_id" doc:"Only this member's requests."`
	Model    string    `query:"model" doc:"Only this model."`
	Status   string    `query:"status" enum:"held,settled,uncertain,implausible,released" doc:"Only rows in this state."`
	Since    time.Time `query:"since" doc:"Only requests at or after this time (RFC 3339)."`
	Until    time.Time `query:"until" doc:"Only requests before this time (RFC 3339)."`
	Cursor   string    `query:"cursor" doc:"next_cursor of the previous page."`
	Limit    int32     `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

type usageOut struct {
	Body struct {
		Rows       []UsageRow `json:"rows"`
		NextCursor string     `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

type auditRow struct {
	ID     int64           `json:"id"`
	Actor  string          `json:"actor" doc:"cli, member:<id>, or token:<id>:<name>."`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	At     time.Time       `json:"at"`
}

type auditOut struct {
	Body struct {
		Entries    []auditRow `json:"entries"`
		NextCursor string     `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last page."`
	}
}

// cursor is an opaque page position: base64 of its JSON.
func encodeCursor(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		p := problem(http.StatusUnprocessableEntity, ProblemValidation, "cursor is not a next_cursor this API returned")
		p.Errors = []ProblemDetail{{Location: "query.cursor", Message: "malformed cursor"}}
		return p
	}
	return nil
}

func (a *API) registerReports(h huma.API) {
	huma.Register(h, operation("listUsage", http.MethodGet, "/usage", AccessRead, 200,
		"Page through the team's ledger, newest first: each request's tokens and cost", 422),
		func(ctx context.Context, in *usageIn) (*usageOut, error) {
			f := store.LedgerFilter{Since: in.Since, Until: in.Until}
			if in.MemberID != 0 {
				f.MemberID = &in.MemberID
			}
			if in.Model != "" {
				f.Model = &in.Model
			}
			if in.Status != "" {
				f.Status = &in.Status
			}
			if in.Cursor != "" {
				f.After = &store.LedgerCursor{}
				if err := decodeCursor(in.Cursor, f.After); err != nil {
					return nil, err
				}
			}
			rows, err := a.st.LedgerPage(ctx, teamOf(ctx), f, in.Limit)
			if err != nil {
				return nil, a.fromStore(err, "usage")
			}
			out := &usageOut{}
			out.Body.Rows = make([]UsageRow, len(rows))
			for i, r := range rows {
				out.Body.Rows[i] = usageRow(r)
			}
			if len(rows) == int(in.Limit) {
				last := rows[len(rows)-1]
				out.Body.NextCursor = encodeCursor(store.LedgerCursor{CreatedAt: last.CreatedAt, RequestID: last.RequestID})
			}
			return out, nil
		})
	huma.Register(h, operation("listAudit", http.MethodGet, "/audit", AccessRead, 200,
		"Page through the team's audit log, newest first", 422),
		func(ctx context.Context, in *struct {
			Cursor string `query:"cursor" doc:"next_cursor of the previous page."`
			Limit  int32  `query:"limit" minimum:"1" maximum:"1000" default:"100"`
		}) (*auditOut, error) {
			var before *int64
			if in.Cursor != "" {
				before = new(int64)
				if err := decodeCursor(in.Cursor, before); err != nil {
					return nil, err
				}
			}
			entries, err := a.st.AuditPage(ctx, teamOf(ctx), before, in.Limit)
			if err != nil {
				return nil, a.fromStore(err, "audit")
			}
			out := &auditOut{}
			out.Body.Entries = make([]auditRow, len(entries))
			for i, e := range entries {
				out.Body.Entries[i] = auditRow{ID: e.ID, Actor: e.Actor, Action: e.Action, Target: e.Target, Before: e.Before, After: e.After, At: e.At}
			}
			if len(entries) == int(in.Limit) {
				out.Body.NextCursor = encodeCursor(entries[len(entries)-1].ID)
			}
			return out, nil
		})
}
