// The same run shape sent with the Langfuse JS SDK v3 (package `langfuse`), which posts
// batches of create/update events to /api/public/ingestion. Usage is given in
// Langfuse's exclusive buckets (input without cache, output without reasoning).
// Usage: LANGFUSE_BASE_URL=http://127.0.0.1:PORT node langfuse-v3-ingestion.mjs
import { Langfuse } from "langfuse";

const lf = new Langfuse({
  publicKey: process.env.LANGFUSE_PUBLIC_KEY ?? "pk-lf-test",
  secretKey: process.env.LANGFUSE_SECRET_KEY ?? "sk-lf-test",
  baseUrl: process.env.LANGFUSE_BASE_URL,
  flushAt: 3, // several batches, so creates and updates arrive in different requests
  flushInterval: 200,
});
lf.on("error", (e) => { console.error("langfuse error", e); process.exitCode = 1; });

const traceId = process.env.TRACE_ID ?? "lf3-trace-1";
const trace = lf.trace({ id: traceId, name: "lead_agent", sessionId: "thread-lf3", userId: "user-1", metadata: { run_id: "run-lf3" } });

const dispatch = trace.generation({ name: "chat", model: "gpt-4o", metadata: { caller: "lead_agent", provider: "openai" } });
dispatch.end({ output: { role: "assistant", tool_calls: [{ id: "call_x", type: "function", function: { name: "task" } }] },
  usageDetails: { input: 600, input_cached_tokens: 400, output: 50 } });

const task = trace.span({ name: "task", metadata: { tool_call_id: "call_x", subagent_status: "completed" } });
const sub = task.span({ name: "general-purpose" });
const subGen = sub.generation({ name: "chat", model: "gpt-4o-mini", metadata: { caller: "subagent:general-purpose" },
  usageDetails: { input: 150, input_cached_tokens: 50, output: 30, output_reasoning_tokens: 10 } });
subGen.end();
sub.end();
task.end();

await lf.shutdownAsync();
console.log(JSON.stringify({ trace_id: traceId }));
