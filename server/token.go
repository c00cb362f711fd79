package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// tokenPrefix marks rubberband's tokens, so that a secret scanner can find a leaked one.
const tokenPrefix = "rbt_"

// NewToken draws a token from random (crypto/rand's Reader) and returns it with its hash, which
// is all the store keeps: 32 random bytes, so a plain SHA-256 is as good as a slow hash.
func NewToken(random io.Reader) (token string, hash []byte, err error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", nil, fmt.Errorf("draw a token: %w", err)
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is what the store keeps of a token.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// ErrUnauthenticated is a request without a token the store knows.
var ErrUnauthenticated = errors.New("unauthenticated: a bearer token is needed (RUBBERBAND_TOKEN, from `rubberband server users add`)")

// Authenticate is the user a request's token names: the bearer token of its Authorization
// header, or, for a browser on the dashboard, the rb_token cookie that ?token= sets.
func Authenticate(ctx context.Context, st store.Store, r *http.Request) (store.User, error) {
	token := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			return store.User{}, ErrUnauthenticated
		}
		token = strings.TrimSpace(rest)
	} else if c, err := r.Cookie(tokenCookie); err == nil {
		token = c.Value
	}
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return store.User{}, ErrUnauthenticated
	}
	u, err := st.UserByTokenHash(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, ErrUnauthenticated
	}
	return u, err
}

const tokenCookie = "rb_token"

// mayAccess says whether u may see and cancel runs of team: their own team's, or any as admin.
func mayAccess(u store.User, team string) bool { return u.Admin || u.Team == team }
