package apikey_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/proxy/apikey"
)

func TestGenerateParseMatch(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		g := apikey.Generate()
		id, secret, ok := apikey.Parse(g.Plaintext)
		if !ok || id != g.ID || !apikey.Matches(secret, g.SecretHash) {
			t.Fatalf("round trip failed for %q", g.Plaintext)
		}
		if seen[g.ID] {
			t.Fatalf("duplicate id %s", g.ID)
		}
		seen[g.ID] = true
		if strings.Contains(g.Plaintext[len("tg_")+apikey.IDLen+1:], "_") {
			t.Fatalf("secret contains the separator: %q", g.Plaintext)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	good := apikey.Generate().Plaintext
	for _, s := range []string{
		"", "tg_", "tg__", "sk-ant-api03-abc", good + "a", good[:len(good)-1],
		strings.ToUpper(good), strings.Replace(good, "tg_", "TG_", 1),
		good[:5] + "1" + good[6:], // '1' is outside the alphabet
		good + "\n", " " + good,
	} {
		if _, _, ok := apikey.Parse(s); ok {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestMatchesWrongSecret(t *testing.T) {
	t.Parallel()
	a, b := apikey.Generate(), apikey.Generate()
	_, secretB, _ := apikey.Parse(b.Plaintext)
	if apikey.Matches(secretB, a.SecretHash) {
		t.Fatal("another key's secret matched")
	}
}

// TestFormatsDoNotCross: a member key is never read as an admin token, nor
// the other way round, so neither can stand in for the other.
func TestFormatsDoNotCross(t *testing.T) {
	t.Parallel()
	admin, member := apikey.Admin.Generate(), apikey.Member.Generate()
	if !strings.HasPrefix(admin.Plaintext, "tga_") {
		t.Fatalf("admin token %q lacks the tga_ prefix", admin.Plaintext)
	}
	if id, secret, ok := apikey.Admin.Parse(admin.Plaintext); !ok || id != admin.ID || !apikey.Matches(secret, admin.SecretHash) {
		t.Fatalf("admin round trip failed for %q", admin.Plaintext)
	}
	if _, _, ok := apikey.Parse(admin.Plaintext); ok {
		t.Error("an admin token parsed as a member key")
	}
	if _, _, ok := apikey.Admin.Parse(member.Plaintext); ok {
		t.Error("a member key parsed as an admin token")
	}
}
