// The two-agent app on the Vercel AI SDK (ai + @ai-sdk/openai), shared by
// aisdk-otel.mjs (the @ai-sdk/otel OpenTelemetry integration) and aisdk-legacy.mjs (its
// legacy `experimental_telemetry` spans). The lead is a generateText tool loop offered
// the task tool; the tool's execute runs the subagent as a streamText call (the chat
// completions stream ends with a usage chunk). The provider is pointed at the fake
// with .chat(): the chat completions API, which the fake serves.
import { generateText, isStepCount, jsonSchema, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import {
  API_KEY, LEAD_MODEL, LEAD_SYSTEM, MODEL_URL, QUESTION, SUB_MODEL, SUB_SYSTEM, TASK_DESCRIPTION, TASK_PARAMETERS,
} from "./common.mjs";

const openai = createOpenAI({ baseURL: MODEL_URL, apiKey: API_KEY });

// runApp runs one lead run; telemetry(functionId) gives each call's telemetry options.
export async function runApp(telemetry) {
  const task = tool({
    description: TASK_DESCRIPTION,
    inputSchema: jsonSchema(TASK_PARAMETERS),
    execute: async ({ prompt }) => {
      const sub = streamText({
        model: openai.chat(SUB_MODEL),
        system: SUB_SYSTEM,
        prompt,
        ...telemetry("researcher"),
      });
      return await sub.text;
    },
  });
  const result = await generateText({
    model: openai.chat(LEAD_MODEL),
    system: LEAD_SYSTEM,
    prompt: QUESTION,
    tools: { task },
    stopWhen: isStepCount(4),
    ...telemetry("lead_agent"),
  });
  return result.text;
}
