package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// channels are the state channels other than messages, title and todos, stored as one
// JSON object.
type channels struct {
	Sandbox    *state.Sandbox    `json:"sandbox,omitempty"`
	ThreadData *state.ThreadData `json:"thread_data,omitempty"`
	Artifacts  []string          `json:"artifacts,omitempty"`
	Extra      map[string]any    `json:"extra,omitempty"`
}

// LoadThreadState implements store.ThreadStore.
func (s *Store) LoadThreadState(ctx context.Context, threadID string) (state.State, int64, error) {
	var (
		msgs, todos, ch []byte
		title           sql.NullString
		version         int64
	)
	err := s.db.QueryRowContext(ctx, s.q(`SELECT messages, title, todos, channels, version FROM thread_states WHERE thread_id = ?`), threadID).
		Scan(&msgs, &title, &todos, &ch, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return state.State{}, 0, nil
	}
	if err != nil {
		return state.State{}, 0, fmt.Errorf("load state of thread %q: %w", threadID, err)
	}
	st := state.State{Title: title.String}
	var c channels
	if err := json.Unmarshal(msgs, &st.Messages); err != nil {
		return state.State{}, 0, fmt.Errorf("load state of thread %q: decode messages: %w", threadID, err)
	}
	if err := json.Unmarshal(todos, &st.Todos); err != nil {
		return state.State{}, 0, fmt.Errorf("load state of thread %q: decode todos: %w", threadID, err)
	}
	if err := json.Unmarshal(ch, &c); err != nil {
		return state.State{}, 0, fmt.Errorf("load state of thread %q: decode channels: %w", threadID, err)
	}
	st.Sandbox, st.ThreadData, st.Artifacts, st.Extra = c.Sandbox, c.ThreadData, c.Artifacts, c.Extra
	return st, version, nil
}

// SaveThreadState implements store.ThreadStore: an insert when version is 0, else an
// update guarded by the version (no lost update).
func (s *Store) SaveThreadState(ctx context.Context, threadID string, st state.State, version int64) (int64, error) {
	if threadID == "" {
		return 0, errors.New("save thread state: thread_id is required")
	}
	msgs := st.Messages
	if msgs == nil {
		msgs = []message.Message{}
	}
	todos := st.Todos
	if todos == nil {
		todos = []state.Todo{}
	}
	mb, err := json.Marshal(msgs)
	if err != nil {
		return 0, fmt.Errorf("save state of thread %q: encode messages: %w", threadID, err)
	}
	tb, err := json.Marshal(todos)
	if err != nil {
		return 0, fmt.Errorf("save state of thread %q: encode todos: %w", threadID, err)
	}
	cb, err := json.Marshal(channels{Sandbox: st.Sandbox, ThreadData: st.ThreadData, Artifacts: st.Artifacts, Extra: st.Extra})
	if err != nil {
		return 0, fmt.Errorf("save state of thread %q: encode channels: %w", threadID, err)
	}
	var changed bool
	if version == 0 {
		changed, err = s.exec(ctx, "save state of thread "+threadID, `INSERT INTO thread_states (thread_id, messages, title, todos, channels, updated_at, version)
		VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (thread_id) DO NOTHING`,
			threadID, string(mb), nullable(st.Title), string(tb), string(cb), micros(s.now()))
	} else {
		changed, err = s.exec(ctx, "save state of thread "+threadID, `UPDATE thread_states SET messages = ?, title = ?, todos = ?, channels = ?,
		updated_at = ?, version = version + 1 WHERE thread_id = ? AND version = ?`,
			string(mb), nullable(st.Title), string(tb), string(cb), micros(s.now()), threadID, version)
	}
	if err != nil {
		return 0, err
	}
	if !changed {
		return 0, fmt.Errorf("save state of thread %q (version %d): %w", threadID, version, store.ErrStateConflict)
	}
	return version + 1, nil
}

// LoadMemory implements store.ThreadStore.
func (s *Store) LoadMemory(ctx context.Context, userID, agentName string) (string, error) {
	var content string
	err := s.db.QueryRowContext(ctx, s.q(`SELECT content FROM memories WHERE user_id = ? AND agent_name = ?`), userID, agentName).Scan(&content)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load memory of user %q agent %q: %w", userID, agentName, err)
	}
	return content, nil
}

// SaveMemory implements store.ThreadStore (an upsert).
func (s *Store) SaveMemory(ctx context.Context, userID, agentName, memory string) error {
	if userID == "" || agentName == "" {
		return errors.New("save memory: user_id and agent_name are required")
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO memories (user_id, agent_name, content, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (user_id, agent_name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`),
		userID, agentName, memory, micros(s.now()))
	if err != nil {
		return fmt.Errorf("save memory of user %q agent %q: %w", userID, agentName, err)
	}
	return nil
}
