// A service traced by the official LangSmith JS SDK calls the agentmeter gateway as
// LangSmith's distributed tracing says to: its run's headers (RunTree.toHeaders:
// langsmith-trace, and baggage with its project and metadata) go with the request. The
// run tree posts to LANGSMITH_ENDPOINT (the LangSmith fake). Prints the caller run's id, trace id and dotted order and the
// gateway's answer as one JSON line.
// Usage: LANGSMITH_ENDPOINT=... GATEWAY_URL=... GATEWAY_KEY=... node langsmith-distributed-caller.mjs
import { Client, RunTree } from "langsmith";

const client = new Client({
  apiUrl: process.env.LANGSMITH_ENDPOINT,
  apiKey: process.env.LANGSMITH_API_KEY ?? "test-key",
  autoBatchTracing: true,
});
const root = new RunTree({
  name: "caller_service", run_type: "chain", client, project_name: process.env.LANGSMITH_PROJECT ?? "caller",
  inputs: { question: "Compare Paris and Tokyo" },
  // sent in baggage (langsmith-metadata); every run under this one gets it
  metadata: { customer: "acme", tier: 2 },
});
await root.postRun();

const headers = { "Content-Type": "application/json", Authorization: `Bearer ${process.env.GATEWAY_KEY}`, ...root.toHeaders() };
const resp = await fetch(`${process.env.GATEWAY_URL}/api/threads/${process.env.THREAD_ID ?? "t-caller"}/runs?wait=true`, {
  method: "POST", headers, body: JSON.stringify({ input: "Compare Paris and Tokyo" }),
});
const run = await resp.json();
await root.end({ status: run.status });
await root.patchRun();
await client.awaitPendingTraceBatches();
console.log(JSON.stringify({ id: root.id, trace_id: root.trace_id, dotted_order: root.dotted_order, status: resp.status, run }));
