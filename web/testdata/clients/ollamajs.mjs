// ollama-js against the proxy (web/clients_test.go): list, show, chat
// stream and non-stream. Prints one JSON line of what it saw.
// Usage: node ollamajs.mjs HOST
import { Ollama } from "ollama";

const ollama = new Ollama({ host: process.argv[2] });
const out = {};
out.models = (await ollama.list()).models.map((m) => m.name);
out.capabilities = (await ollama.show({ model: "chain/reflexive" })).capabilities;
const whole = await ollama.chat({ model: "chain/reflexive", messages: [{ role: "user", content: "compare" }] });
out.whole = whole.message.content;
out.hasChain = whole.chain?.mode;
let text = "";
let last;
for await (const part of await ollama.chat({ model: "chain/simple", messages: [{ role: "user", content: "hello" }], stream: true, think: true })) {
  text += part.message.content;
  last = part;
}
out.stream = text;
out.done = last.done;
out.doneReason = last.done_reason;
out.evalCount = last.eval_count;
console.log(JSON.stringify(out));
