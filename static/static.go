// Package static embeds the console's CSS and scripts, so the binary serves them
// offline with no CDN.
//
// htmx.min.js (htmx.org 2.0.11) and htmx-ext-sse.min.js (htmx-ext-sse 2.2.4) are
// the minified files of those npm packages, committed with their licenses. To
// update: `npm pack htmx.org@2 htmx-ext-sse@2` in a temporary directory, copy
// dist/*.min.js and LICENSE from each, and change the versions here.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is the URL path the files are served under.
const Prefix = "/static/"

//go:embed *.css *.js *.svg *.LICENSE
var files embed.FS

// versions maps each file name to a short hash of its content.
var versions = func() map[string]string {
	v := map[string]string{}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(b)
		v[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return v
}()

// Path is the URL of a file, carrying its content hash so a browser may cache it
// for good and still fetches the new file after an upgrade. It panics on a name
// that is not embedded: a typo fails the first render in any test.
func Path(name string) string {
	v, ok := versions[name]
	if !ok {
		panic("static: no file " + name)
	}
	return Prefix + name + "?v=" + v
}

// Handler serves the files under Prefix, and nothing else (no directory
// listing). Versioned URLs are immutable; unversioned ones must be revalidated.
func Handler() http.Handler {
	server := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := versions[strings.TrimPrefix(r.URL.Path, Prefix)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("v") == v {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		server.ServeHTTP(w, r)
	})
}

// Icon serves the console's icon at whatever path it is mounted on (browsers
// ask for /favicon.ico on their own), cacheable for a day.
func Icon() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, _ := files.ReadFile("favicon.svg")
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
}
