package grant_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/grant"
)

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"TOLLGATE_CREDENTIAL_A":                                          "must look like",
		"DATABASE_URL: hosts=evil.example":                               "not a credential variable",
		"HOME: hosts=evil.example":                                       "not a credential variable",
		"TOLLGATE_CREDENTIAL_: hosts=a.example":                          "not a credential variable",
		"TOLLGATE_CREDENTIAL_a: hosts=a.example":                         "not a credential variable",
		"TOLLGATE_CREDENTIAL_A:":                                         "name the hosts",
		"TOLLGATE_CREDENTIAL_A: teams=acme":                              "name the hosts",
		"TOLLGATE_CREDENTIAL_A: hosts=":                                  "must be hosts",
		"TOLLGATE_CREDENTIAL_A: hosts=*.example.com":                     "must be a host name",
		"TOLLGATE_CREDENTIAL_A: hosts=https://a.example":                 "must be a host name",
		"TOLLGATE_CREDENTIAL_A: hosts=a.example/v1":                      "must be a host name",
		"TOLLGATE_CREDENTIAL_A: hosts=a.example:x":                       "must be a host name",
		"TOLLGATE_CREDENTIAL_A: hosts=a.example,":                        "must be a host name",
		"TOLLGATE_CREDENTIAL_A: hosts=a.example teams=Acme":              "not a team name",
		"TOLLGATE_CREDENTIAL_A: hosts=a.example region=eu":               "unknown setting",
		"TOLLGATE_CREDENTIAL_A: hosts=a; TOLLGATE_CREDENTIAL_A: hosts=b": "granted twice",
	} {
		if _, err := grant.Parse(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", spec, err, want)
		}
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := grant.Parse("HOME: hosts=a\nTOLLGATE_CREDENTIAL_B: teams=x")
	if err == nil || !strings.Contains(err.Error(), "HOME") || !strings.Contains(err.Error(), "TOLLGATE_CREDENTIAL_B") {
		t.Fatalf("Parse = %v, want both grants named", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	table, err := grant.Parse(`
		TOLLGATE_CREDENTIAL_VLLM: hosts=vllm.internal:8000,[::1] teams=research
		ANTHROPIC_API_KEY: hosts=api.anthropic.com,egress.corp teams=acme,research`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		team, env, upstream string
		field               string // "" = allowed
	}{
		{"research", "", "https://anywhere.example", ""},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://vllm.internal:8000/v1", ""},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://VLLM.internal:8000", ""},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://[::1]:9/v1", ""},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://vllm.internal:8001", "upstream"},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://vllm.internal", "upstream"},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://vllm.internal.evil.example:8000", "upstream"},
		{"research", "TOLLGATE_CREDENTIAL_VLLM", "http://evil.example:8000", "upstream"},
		{"acme", "TOLLGATE_CREDENTIAL_VLLM", "http://vllm.internal:8000", "credential_env"},
		{"acme", "ANTHROPIC_API_KEY", "https://api.anthropic.com", ""},
		{"acme", "ANTHROPIC_API_KEY", "https://egress.corp:8443", ""},
		{"acme", "ANTHROPIC_API_KEY", "https://api.anthropic.com.evil.example", "upstream"},
		{"acme", "ANTHROPIC_API_KEY", "https://user@evil.example", "upstream"},
		{"other", "ANTHROPIC_API_KEY", "https://api.anthropic.com", "credential_env"},
		// The OpenAI preset stays as it was: every team, its provider only.
		{"other", "OPENAI_API_KEY", "https://api.openai.com/v1", ""},
		{"other", "OPENAI_API_KEY", "https://api.anthropic.com", "upstream"},
		{"research", "TOLLGATE_CREDENTIAL_OTHER", "http://vllm.internal:8000", "credential_env"},
		{"research", "DATABASE_URL", "http://vllm.internal:8000", "credential_env"},
	} {
		e := table.Check(c.team, c.env, c.upstream)
		got := ""
		if e != nil {
			got = e.Field
		}
		if got != c.field {
			t.Errorf("Check(%s, %s, %s) = %v, want field %q", c.team, c.env, c.upstream, e, c.field)
		}
	}
}

// A deployment that declares nothing keeps the presets: each provider key to
// its provider, for every team, and no other credential at all.
func TestDefault(t *testing.T) {
	t.Parallel()
	table := grant.Default()
	if e := table.Check("any", "ANTHROPIC_API_KEY", "https://api.anthropic.com"); e != nil {
		t.Error(e)
	}
	if e := table.Check("any", "ANTHROPIC_API_KEY", "http://127.0.0.1:9999"); e == nil {
		t.Error("the Anthropic key may go to loopback without a grant")
	}
	if e := table.Check("any", "TOLLGATE_CREDENTIAL_X", "https://x.example"); e == nil {
		t.Error("an undeclared custom credential is usable")
	}
	var names []string
	for _, c := range table.ForTeam("any") {
		names = append(names, c.Env)
	}
	if got := strings.Join(names, ","); got != "ANTHROPIC_API_KEY,OPENAI_API_KEY" {
		t.Errorf("ForTeam = %s", got)
	}
}

func TestForTeam(t *testing.T) {
	t.Parallel()
	table, err := grant.Parse("TOLLGATE_CREDENTIAL_A: hosts=a.example teams=acme; ANTHROPIC_API_KEY: hosts=api.anthropic.com teams=beta")
	if err != nil {
		t.Fatal(err)
	}
	for team, want := range map[string]string{"acme": "OPENAI_API_KEY,TOLLGATE_CREDENTIAL_A", "beta": "ANTHROPIC_API_KEY,OPENAI_API_KEY"} {
		var names []string
		for _, c := range table.ForTeam(team) {
			names = append(names, c.Env)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("ForTeam(%s) = %s, want %s", team, got, want)
		}
	}
}
