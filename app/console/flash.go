package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/app/store"
)

// One-time results of a form posted without HTMX. The handler keeps what the
// next page must show and redirects (POST-redirect-GET), so a reload neither
// repeats the action nor meets a 405; the GET that follows takes it out, so it
// is shown exactly once.
//
// What is kept is a secret (a key's plaintext, an admin token, an invite
// link), and sessions live in Postgres, where a row outlives the redirect in
// the WAL and in backups. So the session holds it sealed (AES-256-GCM) under
// a random key of its own that goes only to the browser, in a short-lived
// HttpOnly, SameSite=Strict cookie for /console: Postgres never holds
// anything readable, any replica can open it (the key comes with the
// request), and the GET that shows it clears both. A per-replica secret would
// need sharing between replicas and would open every sealed flash with it.
const (
	flashNewKey = "flash_new_key" // a key just issued, with its plaintext
	flashInvite = "flash_invite"  // an invite link just made
)

// flashCookieMaxAge bounds how long a flash's key stays in the browser if the
// redirect is never followed; the redirect is followed at once.
const flashCookieMaxAge = 300

// putFlash keeps v for the next page under name, sealed.
func (c *Console) putFlash(w http.ResponseWriter, r *http.Request, name string, v any) {
	plain, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the console's own plain structs get here
	}
	key := make([]byte, 32)
	rand.Read(key)
	aead := flashAEAD(key)
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, plain, []byte(name))
	c.sessions.Put(r.Context(), name, base64.RawStdEncoding.EncodeToString(sealed))
	c.flashCookie(w, name, base64.RawURLEncoding.EncodeToString(key), flashCookieMaxAge)
}

// popFlash takes what putFlash kept under name into v, reporting whether there
// was any. Both halves are removed, whether or not they open.
func (c *Console) popFlash(w http.ResponseWriter, r *http.Request, name string, v any) bool {
	sealed, err := base64.RawStdEncoding.DecodeString(c.sessions.PopString(r.Context(), name))
	ck, cookieErr := r.Cookie(flashCookiePrefix + name)
	if cookieErr != nil {
		return false
	}
	c.flashCookie(w, name, "", -1)
	key, keyErr := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || keyErr != nil || len(key) != 32 {
		return false
	}
	aead := flashAEAD(key)
	if len(sealed) < aead.NonceSize() {
		return false
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

const flashCookiePrefix = "tollgate_"

func (c *Console) flashCookie(w http.ResponseWriter, name, value string, maxAge int) {
	_, secure := cookieName(c.publicURL)
	http.SetCookie(w, &http.Cookie{Name: flashCookiePrefix + name, Value: value, Path: Prefix, MaxAge: maxAge,
		Secure: secure, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

func flashAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // the key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// popNewKeyOf takes the key the previous request issued, if it is member
// memberID's: a key issued for one page is never shown on another.
func (c *Console) popNewKeyOf(w http.ResponseWriter, r *http.Request, memberID int64) *store.IssuedKey {
	var k store.IssuedKey
	if !c.popFlash(w, r, flashNewKey, &k) || k.MemberID != memberID {
		return nil
	}
	return &k
}
