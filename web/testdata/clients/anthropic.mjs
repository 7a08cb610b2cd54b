// The Anthropic SDK (@anthropic-ai/sdk) against the proxy's /v1/messages
// (web/clients_test.go): a client tool loop with messages.create, then with
// messages.stream (the SDK's own accumulation of the typed events), the
// tool results sent back as tool_result blocks. Prints one JSON line of
// what it saw.
// Usage: node anthropic.mjs BASE_URL
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0 });
const tools = [{
  name: "get_weather", description: "Current weather of a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}, { type: "web_search_20250305", name: "web_search" }];

async function loop(stream) {
  const seen = { events: [], calls: [] };
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  for (let turn = 0; turn < 4; turn++) {
    const params = { model: "chain/reflexive", max_tokens: 1024, system: "You are a weather assistant.", messages, tools };
    let msg;
    if (stream) {
      const s = client.messages.stream(params);
      s.on("streamEvent", (ev) => seen.events.push(ev.type));
      msg = await s.finalMessage();
    } else {
      msg = await client.messages.create(params);
    }
    const uses = msg.content.filter((b) => b.type === "tool_use");
    if (msg.stop_reason !== "tool_use") {
      seen.text = msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
      seen.stop = msg.stop_reason;
      seen.mode = msg.chain?.mode; // the proxy's extension field, on the whole message
      seen.stages = msg.chain?.stages?.map((s) => `${s.node}:${s.status}`).join(" ");
      return seen;
    }
    seen.calls.push(...uses.map((u) => `${u.name}(${JSON.stringify(u.input)})`));
    messages.push({ role: "assistant", content: msg.content });
    messages.push({ role: "user", content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id, content: "sunny, 24°C" })) });
  }
  throw new Error("no answer after 4 turns");
}

const out = { nonStream: await loop(false), stream: await loop(true) };
console.log(JSON.stringify(out));
