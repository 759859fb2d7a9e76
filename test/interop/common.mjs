// Shared by the interop scripts: where the fake model and the collector are, the two
// agents' prompts, and an OTel SDK set-up exporting OTLP/HTTP to the collector.
//
// Every script is the same two-agent app written the way each library's docs show:
// a lead agent ("lead_agent", model gpt-4o) is offered a `task` tool; the fake model
// answers its first call with a task call; the tool runs a subagent ("researcher",
// model gpt-4o-mini) that makes its own model call; the lead then answers with the
// tool's result in its conversation. Three model calls per run.
import { NodeTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";

export const MODEL_URL = need("FAKE_MODEL_URL"); // http://127.0.0.1:PORT/v1
export const API_KEY = "sk-fake-interop";
export const LEAD_MODEL = "gpt-4o";
export const SUB_MODEL = "gpt-4o-mini";
export const LEAD_SYSTEM = "You are the lead agent. Delegate research to the task tool.";
// internal/e2e/fakemodel.go (SubagentMarker) tells the subagent's calls by this text
export const SUB_SYSTEM = "You are the researcher subagent. Answer with research notes.";
export const QUESTION = "What should we know about token accounting?";
export const TASK_DESCRIPTION = "Dispatch a subagent to do research. Returns its findings.";
// the JSON schema of the task tool's arguments, as the OpenAI tools API takes it
export const TASK_PARAMETERS = {
  type: "object",
  properties: {
    description: { type: "string" },
    prompt: { type: "string" },
    subagent_type: { type: "string" },
  },
  required: ["description", "prompt", "subagent_type"],
  additionalProperties: false,
};
export const TASK_TOOL = {
  type: "function",
  function: { name: "task", description: TASK_DESCRIPTION, parameters: TASK_PARAMETERS },
};

export function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
  return v;
}

// otelProvider registers a NodeTracerProvider exporting OTLP/HTTP (JSON) to
// $OTLP_ENDPOINT/v1/traces, batched, as an app set up by the OTel docs would.
export function otelProvider(serviceName) {
  const exporter = new OTLPTraceExporter({ url: need("OTLP_ENDPOINT") + "/v1/traces" });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  provider.register();
  return provider;
}

// report prints what the run did, for the test's log.
export function report(obj) {
  console.log(JSON.stringify(obj));
}
