package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
)

// Principal is an authenticated caller.
type Principal struct {
	UserID string
	Scopes []string
}

// Has reports whether the principal carries scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

type keyEntry struct {
	digest [32]byte
	p      Principal
}

// authenticator maps presented keys to principals. Keys are held only as SHA-256
// digests and compared in constant time.
type authenticator struct {
	local bool
	keys  []keyEntry
}

// newAuthenticator resolves key_env variables now, so a missing variable is a start
// error naming the variable (never its value).
func newAuthenticator(keys []APIKey) (*authenticator, error) {
	a := &authenticator{local: len(keys) == 0}
	for i, k := range keys {
		var e keyEntry
		e.p = Principal{UserID: k.UserID, Scopes: slices.Clone(k.Scopes)}
		if k.KeyEnv != "" {
			v := os.Getenv(k.KeyEnv)
			if v == "" {
				return nil, fmt.Errorf("gateway.api_keys[%d].key_env: environment variable %s is not set", i, k.KeyEnv)
			}
			e.digest = sha256.Sum256([]byte(v))
		} else {
			b, err := hex.DecodeString(k.KeySHA256)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("gateway.api_keys[%d].key_sha256 must be 64 hex characters", i)
			}
			copy(e.digest[:], b)
		}
		a.keys = append(a.keys, e)
	}
	return a, nil
}

// authenticate returns the caller of r, or false when unauthenticated.
func (a *authenticator) authenticate(r *http.Request) (Principal, bool) {
	if a.local {
		return Principal{UserID: LocalUser, Scopes: []string{ScopeThreadsRead, ScopeThreadsWrite}}, true
	}
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return Principal{}, false
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(key)))
	var found *Principal
	for i := range a.keys {
		// Check every entry so timing does not reveal which one matched.
		if subtle.ConstantTimeCompare(d[:], a.keys[i].digest[:]) == 1 && found == nil {
			found = &a.keys[i].p
		}
	}
	if found == nil {
		return Principal{}, false
	}
	return *found, true
}
