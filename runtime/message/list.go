package message

// Upsert applies LangGraph's add_messages reducer: each update whose ID exists in list
// replaces that entry in place, every other update is appended in order. It returns a new
// slice and never mutates list. Updates without an ID get a fresh one.
func Upsert(list []Message, updates ...Message) []Message {
	out := make([]Message, len(list), len(list)+len(updates))
	copy(out, list)
	index := make(map[string]int, len(out))
	for i, m := range out {
		index[m.ID] = i
	}
	for _, u := range updates {
		if u.ID == "" {
			u.ID = NewID()
		}
		if i, ok := index[u.ID]; ok {
			out[i] = u
			continue
		}
		index[u.ID] = len(out)
		out = append(out, u)
	}
	return out
}

// Remove returns list without the messages whose ids are given (LangGraph's
// RemoveMessage). Unknown ids are ignored. list is not mutated.
func Remove(list []Message, ids ...string) []Message {
	if len(ids) == 0 {
		return list
	}
	drop := make(map[string]bool, len(ids))
	for _, id := range ids {
		drop[id] = true
	}
	out := make([]Message, 0, len(list))
	for _, m := range list {
		if !drop[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// LastAI returns the index of the last AI message, or -1.
func LastAI(list []Message) int {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Role == RoleAI {
			return i
		}
	}
	return -1
}

// Find returns the index of the message with id, or -1.
func Find(list []Message, id string) int {
	for i, m := range list {
		if m.ID == id {
			return i
		}
	}
	return -1
}
