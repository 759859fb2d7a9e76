// OpenLLMetry (@traceloop/node-server-sdk) instrumenting the official openai client.
// Its openai instrumentation declares openai < 7, so the module is handed over with
// instrumentModules (the SDK's documented way for bundled/ESM apps). Agents and the
// tool are the SDK's withAgent/withTool decorators. The subagent's call streams with
// include_usage (usage arrives in the final chunk).
import * as traceloop from "@traceloop/node-server-sdk";
import OpenAI from "openai";
import {
  API_KEY, LEAD_MODEL, LEAD_SYSTEM, MODEL_URL, QUESTION, SUB_MODEL, SUB_SYSTEM, TASK_TOOL, need, report,
} from "./common.mjs";

traceloop.initialize({
  appName: "interop-openllmetry",
  baseUrl: need("OTLP_ENDPOINT"),
  apiKey: "unused",
  disableBatch: true,
  traceloopSyncEnabled: false,
  silenceInitializationMessage: true,
  instrumentModules: { openAI: OpenAI },
});

const client = new OpenAI({ baseURL: MODEL_URL, apiKey: API_KEY });

async function researcher(prompt) {
  return traceloop.withAgent({ name: "researcher" }, async () => {
    const stream = await client.chat.completions.create({
      model: SUB_MODEL,
      messages: [{ role: "system", content: SUB_SYSTEM }, { role: "user", content: prompt }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  });
}

async function runTask(call) {
  return researcher(JSON.parse(call.function.arguments).prompt);
}

const answer = await traceloop.withWorkflow({ name: "agent_run" }, () =>
  traceloop.withAgent({ name: "lead_agent" }, async () => {
    const messages = [{ role: "system", content: LEAD_SYSTEM }, { role: "user", content: QUESTION }];
    const first = await client.chat.completions.create({ model: LEAD_MODEL, messages, tools: [TASK_TOOL] });
    const msg = first.choices[0].message;
    messages.push(msg);
    for (const call of msg.tool_calls ?? []) {
      // the tool function takes the model's tool call: withTool records its arguments
      // (traceloop.entity.input), the only place the call id reaches the trace
      const result = await traceloop.withTool({ name: "task" }, runTask, call);
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
    const final = await client.chat.completions.create({ model: LEAD_MODEL, messages, tools: [TASK_TOOL] });
    return final.choices[0].message.content;
  }),
);
await traceloop.forceFlush();
report({ answer });
