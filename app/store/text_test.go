package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// Every name a person types goes through one check: control characters (C0,
// DEL, C1), bidirectional-text controls and bytes that are not UTF-8 are
// refused with a message naming what is wrong, before anything is written.
func TestNamesRefuseControlAndBidiCharacters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	kinds := []struct {
		field, what string
		write       func(s string) error
	}{
		{"email", "email", func(s string) error {
			_, err := f.st.AddMember(ctx, actor, f.team.ID, "bob"+s+"@example.com", store.RoleMember)
			return err
		}},
		{"email", "email", func(s string) error {
			_, _, err := f.st.CreateInvite(ctx, actor, f.team.ID, "cy"+s+"@example.com", store.RoleMember)
			return err
		}},
		{"name", "key name", func(s string) error {
			_, err := f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "laptop"+s)
			return err
		}},
		{"name", "team name", func(s string) error { _, err := f.st.CreateTeam(ctx, actor, "beta"+s); return err }},
		{"prefix", "prefix", func(s string) error {
			_, err := f.st.AddRoute(ctx, actor, store.RouteSpec{TeamID: f.team.ID, Preset: "anthropic", Prefix: "/a" + s})
			return err
		}},
		{"model", "model", func(s string) error {
			_, err := f.st.SetPrice(ctx, actor, store.Price{Model: "m" + s, Provider: "anthropic", InputPerMTok: 1,
				OutputPerMTok: 1, MaxOutputTokens: 1, TakenOn: time.Now()})
			return err
		}},
	}
	hostile := map[string]string{
		"ESC sequence": "\x1b[31m", "NUL": "\x00", "newline": "\n", "DEL": "\x7f", "C1 CSI": "\u009b", "NEL": "\u0085",
		"LRE": "\u202a", "RLO": "\u202e", "LRI": "\u2066", "PDI": "\u2069", "LRM": "\u200e", "RLM": "\u200f", "ALM": "\u061c",
	}
	before := len(must(f.st.Audit(ctx, nil, 1000))(t))
	for _, k := range kinds {
		for label, s := range hostile {
			err := k.write(s)
			v, ok := errors.AsType[*store.ValidationError](err)
			if !ok || v.Field != k.field || !strings.HasPrefix(v.Message, k.what+" must not contain control or bidirectional-text characters") {
				t.Errorf("%s with %s: err = %v, want a validation error on %s saying it must not contain control characters", k.what, label, err, k.field)
			}
		}
		err := k.write("\xff")
		if v, ok := errors.AsType[*store.ValidationError](err); !ok || v.Message != k.what+" is not valid UTF-8" {
			t.Errorf("%s with a byte that is not UTF-8: err = %v", k.what, err)
		}
	}
	if after := len(must(f.st.Audit(ctx, nil, 1000))(t)); after != before {
		t.Errorf("refused names wrote %d audit rows", after-before)
	}
	// Letters of any script stay welcome.
	if _, err := f.st.IssueKey(ctx, actor, f.team.ID, f.member.ID, "Ноутбук — 東京 ✓"); err != nil {
		t.Errorf("a key name in other scripts: %v", err)
	}
}
