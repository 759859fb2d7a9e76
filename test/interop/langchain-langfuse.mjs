// LangChain.js / LangGraph traced by Langfuse: @langfuse/langchain's CallbackHandler
// turns LangChain runs into OTel spans, @langfuse/otel's LangfuseSpanProcessor exports
// them to LANGFUSE_BASE_URL (the agentusage receiver's Langfuse OTLP face).
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { LangfuseSpanProcessor } from "@langfuse/otel";
import { CallbackHandler } from "@langfuse/langchain";
import { awaitAllCallbacks } from "@langchain/core/callbacks/promises";
import { need, report } from "./common.mjs";
import { runApp } from "./langchain-app.mjs";

const processor = new LangfuseSpanProcessor({
  publicKey: process.env.LANGFUSE_PUBLIC_KEY ?? "pk-lf-test",
  secretKey: process.env.LANGFUSE_SECRET_KEY ?? "sk-lf-test",
  baseUrl: need("LANGFUSE_BASE_URL"),
});
const provider = new NodeTracerProvider({ spanProcessors: [processor] });
provider.register();

const handler = new CallbackHandler({ sessionId: "thread-interop-lf", userId: "user-interop" });
const answer = await runApp({ callbacks: [handler] });
await awaitAllCallbacks();
await processor.forceFlush();
await provider.shutdown();
report({ answer });
