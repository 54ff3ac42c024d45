package quickstart_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// exampleFiles are where a newcomer copies a model name from: the README, the
// console's SDK snippets, the make run banner and the mock's model list.
var exampleFiles = []string{"README.md", "views/home.go", "app/cli/dev.go", "cmd/mockprovider/mock/models_list.go"}

// exampleModel finds model names in them: "model":"x", model="x", model: "x",
// exampleModel = "x", and the mock's ids list.
var exampleModel = regexp.MustCompile(`(?:"model"\s*:\s*|model=|model:\s*|exampleModel\s*=\s*)\\?"((?:claude|gpt)-[a-z0-9.-]+)\\?"|"((?:claude|gpt)-[a-z0-9.-]+)",`)

// TestExampleModelsArePricedAndCurrent: every model an example names has a
// seeded price (or the gateway answers the copied call with "no price") and is
// not marked for end-of-life in the provider SDKs this module builds with.
func TestExampleModelsArePricedAndCurrent(t *testing.T) {
	t.Parallel()
	models := map[string][]string{}
	for _, f := range exampleFiles {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range exampleModel.FindAllStringSubmatch(string(b), -1) {
			name := m[1] + m[2]
			models[name] = append(models[name], f)
		}
	}
	if len(models) < 3 {
		t.Fatalf("found only %v in %v; the pattern no longer matches how examples name models", models, exampleFiles)
	}
	deprecated := sdkDeprecatedModels(t)
	st := store.New(dbtest.Pool(t, dbtest.Schema(t)))
	for model, files := range models {
		if _, err := st.Price(context.Background(), model); err != nil {
			t.Errorf("%s (in %v) has no seeded price: %v", model, files, err)
		}
		if why, ok := deprecated[model]; ok {
			t.Errorf("%s (in %v) is deprecated in the SDK: %s", model, files, why)
		}
	}
}

// deprecation is an SDK model constant whose doc comment says Deprecated.
var deprecation = regexp.MustCompile(`(?m)// Deprecated: ([^\n]*)\n(?:\s*//[^\n]*\n)*\s*\w+\s+(?:Model|ChatModel)\s*=\s*"([^"]+)"`)

func sdkDeprecatedModels(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, src := range []struct{ module, file string }{
		{"github.com/anthropics/anthropic-sdk-go", "message.go"},
		{"github.com/openai/openai-go/v3", "shared/shared.go"},
	} {
		dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", src.module).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", src.module, err)
		}
		b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), src.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range deprecation.FindAllStringSubmatch(string(b), -1) {
			out[m[2]] = m[1]
		}
	}
	if len(out) == 0 {
		t.Fatal("found no deprecated models in the SDKs; the pattern no longer matches their doc comments")
	}
	return out
}
