// A conversation that outgrows the context (the server runs with --ctx
// 256): every turn is answered without an error, the oldest turns leave
// the prompt as it fills; and one reply longer than the room left after
// its prompt goes on through context shifts to its max_tokens.
// Usage: node context_test.js BASE_URL
"use strict";
const [base] = process.argv.slice(2);
let failed = 0;
const fail = (m) => { failed++; console.error("FAIL: " + m); };
const ok = (m) => console.log("ok: " + m);
async function post(path, body) {
  const r = await fetch(base + path, { method: "POST", body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() };
}
(async () => {
  const models = (await (await fetch(base + "/v1/models")).json()).data[0];
  const model = models.id, n_ctx = models.meta.n_ctx;
  if (n_ctx !== 256) fail(`the test expects --ctx 256, the server has ${n_ctx}`);
  const messages = [{ role: "system", content: "You answer about the kings of old." }];
  let peak = 0, turns = 0, trimmed = false;
  for (let turn = 0; turn < 14; turn++) {
    messages.push({ role: "user", content: `Question ${turn}: tell me about the king of Judah and the house of David, and the sons of the prophets.` });
    const r = await post("/v1/chat/completions", { model, messages, max_tokens: 24, temperature: 0.7, seed: turn,
                                                    logit_bias: { "2047": -100 } });
    if (r.status !== 200) { fail(`turn ${turn}: ${r.status} ${JSON.stringify(r.json)}`); break; }
    const reply = r.json.choices[0].message.content;
    messages.push({ role: "assistant", content: reply });
    const all = (await post("/tokenize", { content: messages.map((m) => m.content).join(" ") })).json.tokens.length;
    if (all > n_ctx) trimmed = true;
    peak = Math.max(peak, r.json.usage.prompt_tokens);
    if (r.json.usage.prompt_tokens >= n_ctx) fail(`turn ${turn}: a prompt of ${r.json.usage.prompt_tokens} tokens`);
    turns++;
  }
  if (!trimmed) fail("the conversation never outgrew the context: the test proves nothing");
  if (turns === 14) ok(`14 turns answered, the conversation past ${n_ctx} tokens, prompts up to ${peak}`);

  // A reply past the context: max_tokens 1000, capped at the context (256),
  // after a prompt: the context fills and shifts.
  const long = await post("/v1/completions", { model, prompt: "The king of Judah", max_tokens: 1000, temperature: 0.8,
                                              seed: 7, logit_bias: { "2047": -100 } });
  if (long.status !== 200) fail(`long reply: ${long.status} ${JSON.stringify(long.json)}`);
  else if (long.json.usage.completion_tokens !== n_ctx || long.json.choices[0].finish_reason !== "length")
    fail(`long reply: ${long.json.usage.completion_tokens} tokens, ${long.json.choices[0].finish_reason}`);
  else ok(`a reply of ${n_ctx} tokens after a ${long.json.usage.prompt_tokens}-token prompt, through a context shift`);
  const metrics = await (await fetch(base + "/metrics")).text();
  const shifts = Number(metrics.match(/^latte_context_shifts_total (\S+)/m)[1]);
  if (shifts < 1) fail("no context shift counted");
  else ok(`${shifts} context shift(s) counted`);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error("FAIL: " + e.stack); process.exit(1); });
