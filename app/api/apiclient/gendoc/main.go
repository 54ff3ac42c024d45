// Command gendoc prints the admin API's OpenAPI document as the server
// serves it, indented, for oapi-codegen to generate apiclient from. It needs
// no database: the document is built from the handlers' types alone.
//
// It prints the served OpenAPI 3.1 document itself, not huma's 3.0
// downgrade: oapi-codegen reads 3.1, and a client generated from what the
// server serves is the check that a team can do the same.
//
// Usage: go run ./app/api/apiclient/gendoc > app/api/apiclient/openapi.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/app/api"
)

func main() {
	path := api.Prefix + "/openapi.json"
	r := chi.NewRouter()
	api.New(api.Options{}).Mount(r)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		fmt.Fprintf(os.Stderr, "gendoc: GET %s: %d %s\n", path, rec.Code, rec.Body)
		os.Exit(1)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, rec.Body.Bytes(), "", "  "); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
	out.WriteByte('\n')
	os.Stdout.Write(out.Bytes())
}
