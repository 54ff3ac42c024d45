package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEListsEveryVariable keeps the README's configuration table and this
// package in step: every variable Load reads has a row, and every row names a
// variable Load reads or one the proxy reads per request.
func TestREADMEListsEveryVariable(t *testing.T) {
	t.Parallel()
	read := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// The first argument of getenv, p.str, p.duration, ...: the variables Load reads.
	call := regexp.MustCompile(`(?:getenv|p\.\w+)\("([A-Z][A-Z0-9_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			read[m[1]] = true
		}
	}
	if len(read) < 20 {
		t.Fatalf("found only %d variables in app/config: %v", len(read), read)
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n| variable | default | meaning |\n")
	if !ok {
		t.Fatal("README has no configuration table")
	}
	listed := map[string]bool{}
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]+\\*?)`")
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.Split(line, "|")[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			listed[m[1]] = true
		}
	}
	perRequest := []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "TOLLGATE_CREDENTIAL_*", "TOLLGATE_CREDENTIAL_MOCK", "TOLLGATE_SSO_*"}
	for v := range read {
		if !listed[v] {
			t.Errorf("app/config reads %s; the README's configuration table has no row for it", v)
		}
	}
	for v := range listed {
		if !read[v] && !slices.Contains(perRequest, v) {
			t.Errorf("the README lists %s; app/config does not read it", v)
		}
	}
}
