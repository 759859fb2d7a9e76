// A DeerFlow-shaped run sent with the official LangSmith JS SDK (RunTree), pointed at
// the agentusage receiver through LANGSMITH_ENDPOINT: the lead agent's model call
// dispatches two `task` tool calls, each runs a subagent with its own model call, then
// a final lead model call. Runs are POSTed when they start and PATCHed when they end,
// as a LangChain tracer does. Usage: LANGSMITH_ENDPOINT=http://127.0.0.1:PORT node langsmith-deerflow-run.mjs
// (HOLD_ROOT_FILE=path: the lead run ends only once that file exists)
import { Client, RunTree } from "langsmith";

const client = new Client({
  apiUrl: process.env.LANGSMITH_ENDPOINT,
  apiKey: process.env.LANGSMITH_API_KEY ?? "test-key",
  autoBatchTracing: true,
});
const thread = process.env.THREAD_ID ?? "thread-ls";
const runId = process.env.RUN_ID ?? "run-ls";

// LangChain serialises the AIMessage of an LLM result like this (lc constructor form).
function aiMessage(toolCalls, usage) {
  return {
    lc: 1, type: "constructor", id: ["langchain_core", "messages", "AIMessage"],
    kwargs: { content: toolCalls.length ? "" : "done", tool_calls: toolCalls.map((id) => ({ id, name: "task", args: { description: id } })), usage_metadata: usage },
  };
}
function toolMessage(id) {
  return {
    lc: 1, type: "constructor", id: ["langchain_core", "messages", "ToolMessage"],
    kwargs: { content: "Task Succeeded. Result: ok", tool_call_id: id, name: "task", additional_kwargs: { subagent_status: "completed" } },
  };
}
const llmMeta = (model) => ({ ls_provider: "openai", ls_model_name: model, thread_id: thread, run_id: runId });

const root = new RunTree({
  name: "lead_agent", run_type: "chain", client, project_name: "deer-flow",
  inputs: { messages: [] }, metadata: { thread_id: thread, run_id: runId },
});
await root.postRun();

// 1. the dispatching model call: two task calls, usage inside the AIMessage (nested path)
const dispatch = root.createChild({ name: "ChatOpenAI", run_type: "llm", inputs: { messages: [] }, metadata: llmMeta("gpt-4o") });
await dispatch.postRun();
await dispatch.end({
  generations: [[{ text: "", message: aiMessage(["call_a", "call_b"], { input_tokens: 1000, output_tokens: 50, total_tokens: 1050, input_token_details: { cache_read: 400 } }) }]],
  llm_output: { model_name: "gpt-4o-2024-08-06" },
});
await dispatch.patchRun();
// A real dispatcher ends seconds before its subagents do, so its run reaches the
// receiver first; with auto-batching it could share a request with theirs here, and the
// merge would then send it merged already instead of correcting it by PATCH.
await client.awaitPendingTraceBatches();

// 2. two task tool runs, each with a subagent and its model call
const subagents = [
  { call: "call_a", name: "general-purpose", usage: { input_tokens: 200, output_tokens: 40, total_tokens: 240, input_token_details: { cache_read: 50 } } },
  { call: "call_b", name: "researcher", usage: { input_tokens: 300, output_tokens: 60, total_tokens: 360, output_token_details: { reasoning: 10 } } },
];
for (const sa of subagents) {
  const tool = root.createChild({ name: "task", run_type: "tool", inputs: { input: sa.name }, metadata: { thread_id: thread, run_id: runId } });
  await tool.postRun();
  const agent = tool.createChild({ name: sa.name, run_type: "chain", tags: [`subagent:${sa.name}`], inputs: {}, metadata: { thread_id: thread, run_id: runId } });
  await agent.postRun();
  const llm = agent.createChild({ name: "ChatOpenAI", run_type: "llm", tags: [`subagent:${sa.name}`], inputs: {}, metadata: llmMeta("gpt-4o-mini") });
  await llm.postRun();
  await llm.end({ generations: [[{ text: "ok", message: aiMessage([], sa.usage) }]], usage_metadata: sa.usage });
  await llm.patchRun();
  await agent.end({ output: "ok" });
  await agent.patchRun();
  await tool.end({ output: toolMessage(sa.call) });
  await tool.patchRun();
}

// 3. the final answer
const final = root.createChild({ name: "ChatOpenAI", run_type: "llm", inputs: {}, metadata: llmMeta("gpt-4o") });
await final.postRun();
await final.end({ usage_metadata: { input_tokens: 1500, output_tokens: 80, total_tokens: 1580 } });
await final.patchRun();

// HOLD_ROOT_FILE: the lead run stays open until that file exists, so a test can look at
// what reached LangSmith while the run is still going on
if (process.env.HOLD_ROOT_FILE) {
  await client.awaitPendingTraceBatches();
  const { existsSync } = await import("node:fs");
  const deadline = Date.now() + 30000;
  while (!existsSync(process.env.HOLD_ROOT_FILE) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
await root.end({ output: "done" });
await root.patchRun();
await client.awaitPendingTraceBatches();
console.log(JSON.stringify({ trace_id: root.trace_id, root_id: root.id }));
