// Package gateway is `agentmeter serve`: runs of the lead agent over HTTP, persisted in a
// store.RunStore, with DeerFlow's token-usage endpoint (docs/gateway.md), Server-Sent Events, API-key auth with scopes and Prometheus metrics.
//
// The line of runs per thread lives in the store (store.RunQueue, scheduler.go), so
// replicas sharing one PostgreSQL database behave as one gateway: a run is admitted in
// the store, executed by whichever replica claims it under a renewed lease, and waited
// for or cancelled from any replica.
//
// The gateway never builds agents itself: it gets them from an injected AgentFactory
// (cmd/agentmeter wires the runtime, the middleware chain and the model providers).
//
// Routes (all JSON; errors are {"detail": "..."} like DeerFlow's FastAPI gateway):
//
//	POST /api/threads                                  create a thread          threads:write
//	GET  /api/threads/{thread_id}                      thread and its runs      threads:read
//	POST /api/threads/{thread_id}/runs[?wait=true]     start a run              threads:write
//	GET  /api/threads/{thread_id}/runs/{run_id}        one run                  threads:read
//	GET  /api/threads/{thread_id}/runs/{run_id}/stream SSE: messages, task_*    threads:read
//	POST /api/threads/{thread_id}/runs/{run_id}/cancel cancel a running run     threads:write
//	GET  /api/threads/{thread_id}/token-usage          token usage aggregate    threads:read
//	GET  /metrics, GET /healthz                        no auth (no user data)
//
// Access follows DeerFlow's rules (docs/gateway.md#api): no or unknown key → 401
// "Authentication required"; a key without the scope → 403 "Permission denied:
// threads:read"; a thread owned by another user → 404 "Thread <id> not found" (never 403,
// never its data). Threads without an owner row (legacy) or with no owner (shared) are
// readable by every authenticated caller.
package gateway
