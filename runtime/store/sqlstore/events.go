package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store"
)

// eventBatch bounds the rows of one INSERT (PostgreSQL allows 65535 parameters).
const eventBatch = 500

// AppendRunEvents implements store.ThreadStore: the events get the sequence numbers
// after the run's last stored one, all in one transaction.
func (s *Store) AppendRunEvents(ctx context.Context, runID, threadID string, events []journal.Event) error {
	if len(events) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append events of run %q: %w", runID, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var last int64
	if err := tx.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`), runID).Scan(&last); err != nil {
		return fmt.Errorf("append events of run %q: %w", runID, err)
	}
	for start := 0; start < len(events); start += eventBatch {
		chunk := events[start:min(start+eventBatch, len(events))]
		var q strings.Builder
		q.WriteString(`INSERT INTO run_events (run_id, seq, thread_id, event_type, category, content, metadata, created_at) VALUES `)
		args := make([]any, 0, 8*len(chunk))
		for i, e := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			content, err := encodeOptional(e.Content)
			if err != nil {
				return fmt.Errorf("append events of run %q: event %s content: %w", runID, e.Type, err)
			}
			var meta any
			if len(e.Metadata) > 0 {
				if meta, err = encodeOptional(e.Metadata); err != nil {
					return fmt.Errorf("append events of run %q: event %s metadata: %w", runID, e.Type, err)
				}
			}
			last++
			args = append(args, runID, last, threadID, e.Type, e.Category, content, meta, micros(e.Time))
		}
		if _, err := tx.ExecContext(ctx, s.q(q.String()), args...); err != nil {
			return fmt.Errorf("append events of run %q: %w", runID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append events of run %q: commit: %w", runID, err)
	}
	return nil
}

func encodeOptional(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// ListRunEvents implements store.ThreadStore.
func (s *Store) ListRunEvents(ctx context.Context, runID string) ([]store.RunEvent, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT seq, run_id, thread_id, event_type, category, content, metadata, created_at
		FROM run_events WHERE run_id = ? ORDER BY seq LIMIT ?`), runID, store.MaxRunEvents)
	if err != nil {
		return nil, fmt.Errorf("list events of run %q: %w", runID, err)
	}
	defer rows.Close()
	out := []store.RunEvent{}
	for rows.Next() {
		var (
			e             store.RunEvent
			content, meta sql.NullString
			created       int64
		)
		if err := rows.Scan(&e.Seq, &e.RunID, &e.ThreadID, &e.EventType, &e.Category, &content, &meta, &created); err != nil {
			return nil, fmt.Errorf("list events of run %q: %w", runID, err)
		}
		if content.Valid {
			e.Content = json.RawMessage(content.String)
		}
		if meta.Valid {
			e.Metadata = json.RawMessage(meta.String)
		}
		e.CreatedAt = fromMicros(created)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of run %q: %w", runID, err)
	}
	return out, nil
}
