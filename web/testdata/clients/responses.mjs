// The openai SDK's responses.create against the proxy (web/clients_test.go):
// a function tool loop, non-stream then stream, the tool results sent back
// with previous_response_id. Prints one JSON line of what it saw.
// Usage: node responses.mjs BASE_URL
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused" });
const tools = [{
  type: "function", name: "get_weather", description: "Current weather of a city", strict: false,
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}, { type: "web_search" }];

async function loop(stream) {
  const seen = { events: [], calls: [] };
  let input = [{ role: "user", content: "What is the weather in Paris?" }];
  let previous;
  for (let turn = 0; turn < 4; turn++) {
    const params = { model: "chain/reflexive", input, tools, store: true, previous_response_id: previous };
    let resp;
    if (stream) {
      const s = await client.responses.create({ ...params, stream: true });
      for await (const ev of s) {
        seen.events.push(ev.type);
        if (ev.type === "response.completed") resp = ev.response;
      }
    } else {
      resp = await client.responses.create(params);
    }
    const calls = resp.output.filter((o) => o.type === "function_call");
    if (calls.length === 0) {
      // output_text is the SDK's convenience on whole responses only.
      seen.text = resp.output.filter((o) => o.type === "message").flatMap((o) => o.content).map((c) => c.text).join("");
      seen.mode = resp.chain?.mode;
      seen.stages = resp.chain?.stages?.map((s) => `${s.node}:${s.status}`).join(" ");
      return seen;
    }
    seen.calls.push(...calls.map((c) => `${c.name}(${c.arguments})`));
    previous = resp.id;
    input = calls.map((c) => ({ type: "function_call_output", call_id: c.call_id, output: "sunny, 24°C" }));
  }
  throw new Error("no answer after 4 turns");
}

const out = { nonStream: await loop(false), stream: await loop(true) };
console.log(JSON.stringify(out));
