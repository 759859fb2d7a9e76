// Package message holds the conversation messages of the agent runtime: human, AI (with
// tool calls, usage_metadata, additional_kwargs and response metadata), tool (with
// tool_call_id and status) and system, in LangChain's shape so DeerFlow's middleware
// behaviour (docs/middleware.md) ports one to one.
//
// # Identity
//
// Every message has a stable ID, assigned once by the constructors (New*) and never
// changed. State updates use it the way LangGraph's add_messages reducer does: a message
// whose ID already exists in a list replaces that entry in place; a new ID is appended
// (see Upsert). A middleware that edits a message therefore copies it (Clone), changes the
// copy and returns the copy with the same ID.
//
// # Ownership and concurrency
//
// A Message is a value, but its ToolCalls slice and its maps are shared by shallow copies.
// Code that received a message from someone else (a hook, the state, a model response)
// must treat it as read-only and Clone it before mutating. Messages are not safe for
// concurrent mutation; reading one from several goroutines is fine.
package message
