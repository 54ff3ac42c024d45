package proxy

import (
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/proxy/apikey"
)

// errInvalidKey is the one answer for every malformed, missing, unknown or wrong
// key, so the response never tells a prober which part was wrong or whether a key
// id exists.
var errInvalidKey = &Error{Kind: KindAuthentication, code: "invalid_key", Message: "invalid or missing API key: send your tollgate key (tg_...) as x-api-key or Authorization: Bearer"}

// invalidKey is errInvalidKey noting, for the operator only, what was wrong.
func invalidKey(fault string) *Error {
	e := *errInvalidKey
	e.fault = fault
	return &e
}

// A fixed hash to compare against when the key id is unknown, so unknown ids cost
// the same time as wrong secrets.
var decoyHash [32]byte

var errMemberDisabled = &Error{Kind: KindPermission, code: "cut_off", Message: "your membership of this team is disabled; ask a team owner"}

func (g *Gateway) authenticate(r *http.Request, snap *Snapshot) (Key, Member, *Error) {
	plaintext, ok := presentedKey(r)
	if !ok {
		fault := "missing"
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" || r.Header.Get("Api-Key") != "" || keyInQuery(r.URL.RawQuery) {
			fault = "malformed"
		}
		return Key{}, Member{}, invalidKey(fault)
	}
	id, secret, ok := apikey.Parse(plaintext)
	if !ok {
		return Key{}, Member{}, invalidKey("malformed")
	}
	key, found := snap.Key(id)
	want := decoyHash
	if found {
		want = key.SecretHash
	}
	if !apikey.Matches(secret, want) || !found {
		if !found {
			return Key{}, Member{}, invalidKey("unknown_id")
		}
		return Key{}, Member{}, invalidKey("wrong_secret")
	}
	// Past this point the caller proved they hold the key, so a precise message
	// reveals nothing they don't know, and the key is returned with the error.
	if key.Revoked {
		return key, Member{}, &Error{Kind: KindAuthentication, code: "revoked", Message: "this API key has been revoked"}
	}
	if !key.ExpiresAt.IsZero() && !g.opts.Now().Before(key.ExpiresAt) {
		return key, Member{}, &Error{Kind: KindAuthentication, code: "expired", Message: "this API key was rotated and its grace period has ended; use the new key"}
	}
	member, found := snap.Member(key.MemberID)
	if !found || member.Disabled {
		return key, Member{}, errMemberDisabled
	}
	return key, member, nil
}

// presentedKey finds the one key the caller sent. Two different keys, a repeated
// header, a non-Bearer Authorization or a key in the query string all fail: there
// is no guessing which one was meant and no anonymous fallback.
func presentedKey(r *http.Request) (string, bool) {
	// A key in the query (in any encoding) is refused, not dropped: dropping it
	// and serving on a header key would keep a client working that writes its
	// key into URLs, which front proxies and browsers log; the refusal makes
	// its owner move the key to a header (and rotate it).
	if keyInQuery(r.URL.RawQuery) {
		return "", false
	}
	var found string
	take := func(v string) bool {
		if v == "" || (found != "" && found != v) {
			return false
		}
		found = v
		return true
	}
	for _, name := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		values := r.Header.Values(name)
		if len(values) == 0 {
			continue
		}
		if len(values) > 1 {
			return "", false
		}
		v := strings.TrimSpace(values[0])
		if name == "Authorization" {
			scheme, token, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return "", false
			}
			v = strings.TrimSpace(token)
		}
		if !take(v) {
			return "", false
		}
	}
	return found, found != ""
}
