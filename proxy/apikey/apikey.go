// Package apikey is the member key format, tg_<id>_<secret>, and the admin
// token format, tga_<id>_<secret>. The id is public and indexes the key; only a
// SHA-256 of the secret is ever stored. SHA-256 (not a slow password hash) is
// right here because the secret is 256 random bits: there is nothing to
// brute-force.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"strings"
)

const prefix = "tg_"

// Format is a credential format: a prefix, then the id and secret parts.
// Member keys and admin tokens differ only in their prefix, so one can never be
// mistaken for the other.
type Format struct{ prefix string }

// Member is the member key format (tg_), Admin the admin token format (tga_).
var (
	Member = Format{prefix: prefix}
	Admin  = Format{prefix: "tga_"}
)

// IDLen and SecretLen are the encoded lengths of the two parts.
const (
	IDLen     = 13 // 64 random bits
	SecretLen = 52 // 256 random bits
)

// Lower-case base32 without padding: no '_' inside a part, so splitting is unambiguous.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Generated is a new key: the plaintext is shown once and then forgotten.
type Generated struct {
	ID         string
	Plaintext  string
	SecretHash [32]byte
}

// Generate makes a new member key from crypto/rand.
func Generate() Generated { return Member.Generate() }

// Generate makes a new credential of format f from crypto/rand.
func (f Format) Generate() Generated {
	id := make([]byte, 8)
	secret := make([]byte, 32)
	rand.Read(id)
	rand.Read(secret)
	encodedSecret := encoding.EncodeToString(secret)
	g := Generated{ID: encoding.EncodeToString(id), SecretHash: sha256.Sum256([]byte(encodedSecret))}
	g.Plaintext = f.prefix + g.ID + "_" + encodedSecret
	return g
}

// Parse splits a plaintext member key into its id and secret. ok is false for
// anything that is not exactly the key format.
func Parse(plaintext string) (id, secret string, ok bool) { return Member.Parse(plaintext) }

// Parse splits a plaintext credential of format f into its id and secret.
func (f Format) Parse(plaintext string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(plaintext, f.prefix)
	if !found {
		return "", "", false
	}
	id, secret, found = strings.Cut(rest, "_")
	if !found || len(id) != IDLen || len(secret) != SecretLen || !valid(id) || !valid(secret) {
		return "", "", false
	}
	return id, secret, true
}

func valid(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// Matches reports, in constant time, whether secret hashes to want.
func Matches(secret string, want [32]byte) bool {
	got := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// LooksLikeKey reports whether s carries the key prefix in any letter case;
// used to refuse keys smuggled in places they must not travel, such as the
// query string. Case is ignored because an upper-cased key still gives its
// secret away (the alphabet is lower-case only).
func LooksLikeKey(s string) bool {
	// prefix is "tg_": letters fold to lower case with |0x20.
	for i := 2; i < len(s); i++ {
		if s[i] == prefix[2] && s[i-1]|0x20 == prefix[1] && s[i-2]|0x20 == prefix[0] {
			return true
		}
	}
	return false
}
