// The official `openai` npm client against `latte serve`: models, chat and
// completions, streamed and not, seeds, stop strings, limits, prefix reuse
// and errors. Usage: node openai_test.js BASE_URL API_KEY
"use strict";
const OpenAI = require("openai");
const assert = require("node:assert/strict");

const [base, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0, timeout: 60000 });
let failed = 0;
async function test(name, fn) {
  try {
    await fn();
    console.log("ok: " + name);
  } catch (e) {
    failed++;
    console.error("FAIL: " + name + ": " + (e && e.stack ? e.stack : e));
  }
}
async function collect(stream) {
  let text = "", finish = null, usage = null, chunks = 0, role = null;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    const ch = c.choices[0];
    if (!ch) continue;
    if (ch.delta) { if (ch.delta.role) role = ch.delta.role; text += ch.delta.content || ""; }
    if (ch.text !== undefined) text += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  return { text, finish, usage, chunks, role };
}

(async () => {
  const models = await client.models.list();
  const model = models.data[0].id;
  await test("models.list: one model with an id", async () => {
    assert.equal(models.data.length, 1);
    assert.ok(model.length > 0);
    assert.equal(models.data[0].object, "model");
  });
  const messages = [{ role: "system", content: "Be kind." }, { role: "user", content: "Who was David?" }];

  let whole;
  await test("chat: not streamed, greedy", async () => {
    whole = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices[0].message.role, "assistant");
    assert.ok(whole.choices[0].message.content.length > 0, "empty reply");
    assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason));
    const u = whole.usage;
    assert.ok(u.prompt_tokens > 5 && u.completion_tokens >= 1 && u.completion_tokens <= 20);
    assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
    if (whole.choices[0].finish_reason === "length") assert.equal(u.completion_tokens, 20);
  });
  await test("chat: streamed with include_usage equals the whole reply", async () => {
    const s = await collect(await client.chat.completions.create({
      model, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.role, "assistant");
    assert.equal(s.text, whole.choices[0].message.content);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.ok(s.chunks >= 3);
    assert.deepEqual([s.usage.prompt_tokens, s.usage.completion_tokens],
                     [whole.usage.prompt_tokens, whole.usage.completion_tokens]);
  });
  await test("chat: the same seed gives the same text at temperature 1", async () => {
    const a = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 1, seed: 1234 });
    const b = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 1, seed: 1234 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const c = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 1, seed: 99 });
    const d = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 1, seed: 98 });
    assert.notEqual(c.choices[0].message.content + "|" + d.choices[0].message.content,
                    a.choices[0].message.content + "|" + a.choices[0].message.content, "seeds change nothing");
  });
  await test("chat: max_tokens 1 ends with length after one token", async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 1, temperature: 0 });
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.usage.completion_tokens, 1);
  });
  await test("chat: a stop string cuts the reply before it", async () => {
    const text = whole.choices[0].message.content;
    const at = Math.max(1, Math.floor(text.length / 2));
    const stop = text.slice(at, at + 2);
    const r = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0, stop: [stop] });
    assert.equal(r.choices[0].message.content, text.slice(0, text.indexOf(stop)));
    assert.equal(r.choices[0].finish_reason, "stop");
    const s = await collect(await client.chat.completions.create({
      model, messages, max_tokens: 20, temperature: 0, stop, stream: true }));
    assert.equal(s.text, text.slice(0, text.indexOf(stop)), "streamed with a stop string");
  });
  await test("chat: logit_bias -100 bans the greedy first token", async () => {
    const first = await client.chat.completions.create({ model, messages, max_tokens: 1, temperature: 0 });
    const tok = await (await fetch(base + "/tokenize", { method: "POST", headers: { Authorization: "Bearer " + key },
      body: JSON.stringify({ content: first.choices[0].message.content }) })).json();
    assert.ok(tok.tokens.length >= 1);
    const r = await client.chat.completions.create({ model, messages, max_tokens: 1, temperature: 0,
      logit_bias: { [String(tok.tokens[0])]: -100 } });
    assert.notEqual(r.choices[0].message.content, first.choices[0].message.content);
  });
  await test("chat: a continued conversation reuses the cached prefix", async () => {
    const turn2 = messages.concat([whole.choices[0].message, { role: "user", content: "And dogs?" }]);
    const r = await client.chat.completions.create({ model, messages: turn2, max_tokens: 8, temperature: 0 });
    const cached = r.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached >= whole.usage.prompt_tokens - 1, `cached ${cached} of ${r.usage.prompt_tokens}`);
  });

  let comp;
  await test("completions: not streamed", async () => {
    comp = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 16, temperature: 0 });
    assert.equal(comp.object, "text_completion");
    assert.ok(comp.choices[0].text.length > 0);
    assert.ok(["stop", "length"].includes(comp.choices[0].finish_reason));
    assert.ok(comp.usage.completion_tokens >= 1 && comp.usage.completion_tokens <= 16);
  });
  await test("completions: streamed equals not streamed", async () => {
    const s = await collect(await client.completions.create({
      model, prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true }));
    assert.equal(s.text, comp.choices[0].text);
    assert.equal(s.finish, comp.choices[0].finish_reason);
  });

  const status = async (p) => { try { await p; return "no error"; } catch (e) { return e.status + " " + (e.code || ""); } };
  // Structured output: the reply parses and follows the schema (checked
  // here field by field), for several seeds, streamed and not.
  const person = {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 12 },
      age: { type: "integer", minimum: 0, maximum: 120 },
      tags: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 3 },
      kind: { enum: ["a", "b", "c"] },
    },
    required: ["name", "age", "tags", "kind"],
    additionalProperties: false,
  };
  const follows = (text) => {
    const o = JSON.parse(text);
    assert.deepEqual(Object.keys(o).sort(), ["age", "kind", "name", "tags"]);
    assert.equal(typeof o.name, "string");
    assert.ok(o.name.length >= 1 && [...o.name].length <= 12, "name length " + o.name.length);
    assert.ok(Number.isInteger(o.age) && o.age >= 0 && o.age <= 120, "age " + o.age);
    assert.ok(Array.isArray(o.tags) && o.tags.length <= 3);
    for (const t of o.tags) assert.ok(typeof t === "string" && [...t].length <= 8);
    assert.ok(["a", "b", "c"].includes(o.kind));
  };
  await test("response_format json_schema: replies follow the schema, 5 seeds", async () => {
    for (let seed = 1; seed <= 5; ++seed) {
      const r = await client.chat.completions.create({ model, messages, max_tokens: 200, seed, temperature: 1,
        response_format: { type: "json_schema", json_schema: { name: "person", schema: person, strict: true } } });
      assert.equal(r.choices[0].finish_reason, "stop", r.choices[0].message.content);
      follows(r.choices[0].message.content);
    }
  });
  await test("response_format json_schema streamed: the same reply as not streamed", async () => {
    const args = { model, messages, max_tokens: 200, seed: 7, temperature: 1,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: person } } };
    const whole = await client.chat.completions.create(args);
    const s = await collect(await client.chat.completions.create({ ...args, stream: true }));
    assert.equal(s.text, whole.choices[0].message.content);
    follows(s.text);
  });
  await test("response_format json_object: a JSON object", async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 200, seed: 3, temperature: 0.7,
      response_format: { type: "json_object" } });
    if (r.choices[0].finish_reason === "stop") {
      const o = JSON.parse(r.choices[0].message.content);
      assert.ok(o !== null && typeof o === "object" && !Array.isArray(o));
    } else {
      assert.ok(r.choices[0].message.content.trimStart().startsWith("{"), r.choices[0].message.content);
    }
  });
  await test("errors: a schema keyword Latte cannot express is 400 naming it", async () => {
    const bad = { type: "object", properties: { id: { type: "string", pattern: "^[a-z]+$" } } };
    const e = await status(client.chat.completions.create({ model, messages,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: bad } } }));
    assert.equal(e, "400 invalid_json_schema");
  });

  await test("errors: unknown model is 404 model_not_found", async () => {
    assert.equal(await status(client.chat.completions.create({ model: "no-such-model", messages })), "404 model_not_found");
  });
  await test("errors: n = 2 is 400", async () => {
    assert.match(await status(client.chat.completions.create({ model, messages, n: 2 })), /^400/);
  });
  await test("errors: temperature 5 is 400", async () => {
    assert.match(await status(client.completions.create({ model, prompt: "x", temperature: 5 })), /^400/);
  });
  await test("errors: a wrong key is 401", async () => {
    const other = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong", maxRetries: 0 });
    assert.match(await status(other.models.list()), /^401/);
  });
  await test("errors: the server still serves after them", async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
    assert.equal(r.choices[0].message.content, whole.choices[0].message.content);
  });
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error("FAIL: " + e.stack); process.exit(1); });
