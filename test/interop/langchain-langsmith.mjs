// LangChain.js / LangGraph traced by the LangSmith SDK (langsmith), the way LangChain
// documents it: LANGSMITH_TRACING=true and LANGSMITH_ENDPOINT pointing at the
// agentusage receiver's LangSmith face; LANGCHAIN_CALLBACKS_BACKGROUND=false (the
// documented setting for short-lived processes) makes the root run wait for its upload.
import { awaitAllCallbacks } from "@langchain/core/callbacks/promises";
import { need, report } from "./common.mjs";
import { runApp } from "./langchain-app.mjs";

need("LANGSMITH_ENDPOINT");
process.env.LANGSMITH_TRACING = "true";
process.env.LANGCHAIN_CALLBACKS_BACKGROUND = "false";
process.env.LANGSMITH_API_KEY ??= "test-key";
process.env.LANGSMITH_PROJECT ??= "interop";

const answer = await runApp({ metadata: { thread_id: "thread-interop-ls" } });
await awaitAllCallbacks();
report({ answer });
