// Vercel AI SDK 7 with its OpenTelemetry integration (@ai-sdk/otel OpenTelemetry,
// GenAI semantic conventions: invoke_agent / chat / execute_tool spans), registered
// once with registerTelemetry; agent spans are named after the functionId.
import { registerTelemetry } from "ai";
import { OpenTelemetry } from "@ai-sdk/otel";
import { otelProvider, report } from "./common.mjs";
import { runApp } from "./aisdk-app.mjs";

const provider = otelProvider("interop-aisdk-otel");
registerTelemetry(new OpenTelemetry({ agentSpanName: "functionId" }));
const answer = await runApp((functionId) => ({ telemetry: { functionId } }));
await provider.forceFlush();
await provider.shutdown();
report({ answer });
