// Vercel AI SDK 7 with its legacy telemetry (@ai-sdk/otel LegacyOpenTelemetry, the
// ai.generateText / ai.generateText.doGenerate / ai.streamText.doStream / ai.toolCall
// spans with ai.* attributes), switched on per call with experimental_telemetry.
import { registerTelemetry } from "ai";
import { LegacyOpenTelemetry } from "@ai-sdk/otel";
import { otelProvider, report } from "./common.mjs";
import { runApp } from "./aisdk-app.mjs";

const provider = otelProvider("interop-aisdk-legacy");
registerTelemetry(new LegacyOpenTelemetry());
const answer = await runApp((functionId) => ({ experimental_telemetry: { isEnabled: true, functionId } }));
await provider.forceFlush();
await provider.shutdown();
report({ answer });
