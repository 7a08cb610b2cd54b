// The OpenAI Agents SDK against the proxy (web/clients_test.go): an agent
// with a function tool, run on the Responses API, its default. Prints one
// JSON line of what it saw.
// Usage: node agents.mjs BASE_URL
import OpenAI from "openai";
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled, setOpenAIAPI } from "@openai/agents";
import { z } from "zod";

setTracingDisabled(true);
setOpenAIAPI("responses");
setDefaultOpenAIClient(new OpenAI({ baseURL: process.argv[2], apiKey: "unused" }));
const calls = [];
const getWeather = tool({
  name: "get_weather",
  description: "Current weather of a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    calls.push(city);
    return "sunny, 24°C";
  },
});
const agent = new Agent({ name: "weather", instructions: "Answer about the weather.", model: "chain/reflexive", tools: [getWeather] });
const result = await run(agent, "What is the weather in Paris?");
console.log(JSON.stringify({ final: result.finalOutput, calls }));
