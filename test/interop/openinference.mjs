// OpenInference (@arizeai/openinference-instrumentation-openai) instrumenting the
// official openai client, with the agents and the tool traced by openinference-core's
// traceAgent/traceTool (AGENT and TOOL span kinds). An ES module import is not hooked
// by require, so the openai module is instrumented with manuallyInstrument, as the
// package documents for ESM. The subagent's call streams with include_usage.
import { trace } from "@opentelemetry/api";
import { OpenAIInstrumentation } from "@arizeai/openinference-instrumentation-openai";
import { traceAgent, traceTool } from "@arizeai/openinference-core";
import * as openaiModule from "openai";
import OpenAI from "openai";
import {
  API_KEY, LEAD_MODEL, LEAD_SYSTEM, MODEL_URL, QUESTION, SUB_MODEL, SUB_SYSTEM, TASK_TOOL, otelProvider, report,
} from "./common.mjs";

const provider = otelProvider("interop-openinference");
const instrumentation = new OpenAIInstrumentation();
instrumentation.setTracerProvider(provider);
instrumentation.manuallyInstrument(openaiModule);

const client = new OpenAI({ baseURL: MODEL_URL, apiKey: API_KEY });

const researcher = traceAgent(async (prompt) => {
  const stream = await client.chat.completions.create({
    model: SUB_MODEL,
    messages: [{ role: "system", content: SUB_SYSTEM }, { role: "user", content: prompt }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  return text;
}, { name: "researcher", attributes: { "agent.name": "researcher" } });

const task = traceTool(async (call) => {
  trace.getActiveSpan()?.setAttribute("tool_call.id", call.id);
  const args = JSON.parse(call.function.arguments);
  return researcher(args.prompt);
}, { name: "task", attributes: { "tool.name": "task" } });

const lead = traceAgent(async (question) => {
  const messages = [{ role: "system", content: LEAD_SYSTEM }, { role: "user", content: question }];
  const first = await client.chat.completions.create({ model: LEAD_MODEL, messages, tools: [TASK_TOOL] });
  const msg = first.choices[0].message;
  messages.push(msg);
  for (const call of msg.tool_calls ?? []) {
    messages.push({ role: "tool", tool_call_id: call.id, content: await task(call) });
  }
  const final = await client.chat.completions.create({ model: LEAD_MODEL, messages, tools: [TASK_TOOL] });
  return final.choices[0].message.content;
}, { name: "lead_agent", attributes: { "agent.name": "lead_agent" } });

const answer = await lead(QUESTION);
await provider.forceFlush();
await provider.shutdown();
report({ answer });
