// The two-agent app on LangChain.js 1 / LangGraph (langchain createAgent over
// @langchain/openai's ChatOpenAI), shared by langchain-langsmith.mjs and
// langchain-langfuse.mjs. The lead agent is offered a `task` tool whose function invokes
// a second agent, the researcher. ChatOpenAI runs without streaming: LangChain's
// streaming path fetches tokenizer data from the network to count tokens.
import { ChatOpenAI } from "@langchain/openai";
import { createAgent, tool } from "langchain";
import {
  API_KEY, LEAD_MODEL, LEAD_SYSTEM, MODEL_URL, QUESTION, SUB_MODEL, SUB_SYSTEM, TASK_DESCRIPTION, TASK_PARAMETERS,
} from "./common.mjs";

function chat(model) {
  return new ChatOpenAI({ model, apiKey: API_KEY, configuration: { baseURL: MODEL_URL }, streaming: false, maxRetries: 0 });
}

// runApp runs one lead run; config is passed to the lead's invoke (callbacks, metadata)
// and reaches the subagent through LangChain's run context.
export async function runApp(config = {}) {
  const researcher = createAgent({ model: chat(SUB_MODEL), tools: [], systemPrompt: SUB_SYSTEM, name: "researcher" });
  const task = tool(
    // as LangChain's subagent docs write it: the run context (callbacks, parent run)
    // reaches the inner agent by itself. INTEROP_PASS_CONFIG=1 hands the tool's run
    // config on instead, as apps also do: the inner agent then inherits the lead's
    // metadata, lc_agent_name included.
    async ({ prompt }, runConfig) => {
      const passed = process.env.INTEROP_PASS_CONFIG === "1" ? runConfig : undefined;
      const out = await researcher.invoke({ messages: [{ role: "user", content: prompt }] }, passed);
      return out.messages.at(-1).content;
    },
    { name: "task", description: TASK_DESCRIPTION, schema: TASK_PARAMETERS },
  );
  const lead = createAgent({ model: chat(LEAD_MODEL), tools: [task], systemPrompt: LEAD_SYSTEM, name: "lead_agent" });
  const out = await lead.invoke({ messages: [{ role: "user", content: QUESTION }] }, config);
  return out.messages.at(-1).content;
}
