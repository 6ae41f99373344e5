package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// asks are the approvals a server asked its client for and not yet had
// answered: each is a random request state bound to the action it shows,
// valid once, for a while.
type asks struct {
	mu sync.Mutex
	m  map[string]issuedAsk
}

type issuedAsk struct {
	key     string // actionKey of the action shown
	expires time.Time
}

const (
	askTTL  = 30 * time.Minute // a person may take a while
	maxAsks = 256              // unanswered at once, per MCP session
)

// issue returns a new request state for the action key.
func (q *asks) issue(key string) (string, error) {
	var b [16]byte
	rand.Read(b[:])
	state := hex.EncodeToString(b[:])
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[string]issuedAsk{}
	}
	for k, a := range q.m {
		if now.After(a.expires) {
			delete(q.m, k)
		}
	}
	if len(q.m) >= maxAsks {
		return "", errors.New("too many approvals wait for an answer: answer or drop some first")
	}
	q.m[state] = issuedAsk{key: key, expires: now.Add(askTTL)}
	return state, nil
}

// take says whether state was issued for the action key and is still
// valid, and makes it invalid.
func (q *asks) take(state, key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := q.m[state]
	if !ok {
		return false
	}
	delete(q.m, state)
	return a.key == key && time.Now().Before(a.expires)
}
