// Vercel AI SDK 7 with its OpenTelemetry integration (@ai-sdk/otel OpenTelemetry,
// GenAI semantic conventions: invoke_agent / chat / execute_tool spans), registered
// once with registerTelemetry; agent spans are named after the functionId.
import { registerTelemetry } from "ai";
import { OpenTelemetry } from "@ai-sdk/otel";
import { otelProvider, report } from "./common.mjs";
import { runApp } from "./aisdk-app.mjs";

const provider = otelProvider("interop-aisdk-otel");
// AISDK_OTEL_USAGE=1 turns on the integration's `usage` option: usage details GenAI
// semconv has no name for (reasoning tokens among them) as ai.usage.* attributes
registerTelemetry(new OpenTelemetry({ agentSpanName: "functionId", usage: process.env.AISDK_OTEL_USAGE === "1" }));
const answer = await runApp((functionId) => ({ telemetry: { functionId } }));
await provider.forceFlush();
await provider.shutdown();
report({ answer });
