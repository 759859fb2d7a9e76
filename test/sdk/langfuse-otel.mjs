// A run sent with the OTel-based Langfuse JS SDK (@langfuse/tracing + @langfuse/otel),
// which exports OTLP/HTTP to /api/public/otel/v1/traces with langfuse.* attributes.
// Usage: LANGFUSE_BASE_URL=http://127.0.0.1:PORT node langfuse-otel.mjs
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { LangfuseSpanProcessor } from "@langfuse/otel";
import { propagateAttributes, startActiveObservation } from "@langfuse/tracing";

const processor = new LangfuseSpanProcessor({
  publicKey: process.env.LANGFUSE_PUBLIC_KEY ?? "pk-lf-test",
  secretKey: process.env.LANGFUSE_SECRET_KEY ?? "sk-lf-test",
  baseUrl: process.env.LANGFUSE_BASE_URL,
  // batched (the default): forceFlush sends the whole run in one OTLP request
});
const provider = new NodeTracerProvider({ spanProcessors: [processor] });
provider.register();

let traceId = "";
await propagateAttributes({ sessionId: "thread-lfotel", userId: "user-2" }, async () => {
  await startActiveObservation("lead_agent", async (root) => {
    traceId = root.traceId;
    const dispatch = root.startObservation("chat", {
      model: "gpt-4o",
      usageDetails: { input: 700, input_cached_tokens: 300, output: 40 },
      output: { role: "assistant", tool_calls: [{ id: "call_o", type: "function", function: { name: "task", arguments: "{}" } }] },
    }, { asType: "generation" });
    dispatch.end();
    const tool = root.startObservation("task", { metadata: { tool_call_id: "call_o" } }, { asType: "tool" });
    const sub = tool.startObservation("researcher", { metadata: { caller: "subagent:researcher" } }, { asType: "agent" });
    const subGen = sub.startObservation("chat", {
      model: "gpt-4o-mini",
      usageDetails: { input: 250, output: 25, output_reasoning_tokens: 5 },
      metadata: { caller: "subagent:researcher" },
    }, { asType: "generation" });
    subGen.end();
    sub.end();
    tool.end();
  }, { asType: "agent" });
});
await processor.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ trace_id: traceId }));
