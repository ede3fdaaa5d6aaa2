// Load and fault run against `latte serve`: 208 requests from 16 concurrent
// clients, a mix of chat and completions, streamed and not, some clients
// leaving mid-stream, some bodies malformed. Checks: the server never
// falls over, every well-formed request is answered in full, each reply
// equals the same request served alone afterwards (same seed), malformed
// ones get 4xx error objects, and resident memory after the run is within
// 10% of after the warm-up. Usage: node load_test.js BASE_URL SERVER_PID
"use strict";
const fs = require("node:fs");
const [base, pid] = process.argv.slice(2);
const CLIENTS = 16, REQUESTS = 208, WARMUP = 32;
let failed = 0;
const fail = (m) => { failed++; console.error("FAIL: " + m); };
const ok = (m) => console.log("ok: " + m);

function rssKiB() {
  const m = fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/);
  return Number(m[1]);
}
const prompts = ["Who was David?", "Tell me a story about the king.", "What is water?", "Name the rivers.",
                 "Why do birds sing?", "Count to ten."];
let model;

// The i-th request of the run: {kind, body (object or raw string/buffer)}.
function request(i) {
  const k = i % 8;
  if (k === 7) {
    const bad = [
      '{"model":', '{"model":"M","messages":"hi"}', '{"model":"M","n":2,"messages":[{"role":"user","content":"x"}]}',
      Buffer.from('{"model":"M","messages":[{"role":"user","content":"\xff\xfe"}]}', "latin1"),
      '{"model":"nope","messages":[{"role":"user","content":"x"}]}', '{"model":"M","prompt":"x","top_p":5}',
      '[1,2,3]', '{"model":"M","messages":[{"role":"wizard","content":"x"}]}'];
    let b = bad[(i >> 3) % bad.length];
    if (typeof b === "string") b = b.replace('"M"', JSON.stringify(model));
    else b = Buffer.from(b.toString("latin1").replace('"M"', JSON.stringify(model)), "latin1");
    return { kind: "bad", path: (i >> 3) % 2 ? "/v1/completions" : "/v1/chat/completions", raw: b };
  }
  const chat = i % 2 === 0;
  const prompt = prompts[i % prompts.length];
  const body = { model, seed: i % 5, temperature: 0.9, max_tokens: 10 + (i % 4) * 6 };
  if (chat) body.messages = [{ role: "user", content: prompt }];
  else body.prompt = prompt;
  if (k === 3) {  // leaves after its first chunk: a long reply, EOS (2047) banned
    Object.assign(body, { stream: true, max_tokens: 200, logit_bias: { "2047": -100 } });
    return { kind: "leave", path: chat ? "/v1/chat/completions" : "/v1/completions", body, chat };
  }
  body.stream = (i >> 1) % 2 === 1;
  return { kind: "ok", path: chat ? "/v1/chat/completions" : "/v1/completions", body, chat };
}

async function readSse(res, chat, onFirst) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "", text = "", finish = null, done = false;
  while (!done) {
    const r = await reader.read();
    if (r.done) break;
    buf += dec.decode(r.value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, cut); buf = buf.slice(cut + 2);
      if (ev.startsWith(":")) continue;  // a keep-alive comment
      if (!ev.startsWith("data: ")) throw new Error("not an SSE data line: " + ev);
      const data = ev.slice(6);
      if (data === "[DONE]") { done = true; break; }
      const j = JSON.parse(data);
      if (j.error) throw new Error("error event: " + j.error.message);
      const c = j.choices[0];
      if (!c) continue;
      const piece = chat ? (c.delta.content || "") : c.text;
      if (piece && onFirst) { onFirst(); onFirst = null; }
      text += piece;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  if (!done) throw new Error("stream ended without [DONE]");
  return { text, finish };
}

// Runs one request; returns {status, text, finish} (text null for errors).
async function run(req) {
  const ctl = new AbortController();
  const res = await fetch(base + req.path, { method: "POST", body: req.raw || JSON.stringify(req.body),
                                             headers: { "Content-Type": "application/json" }, signal: ctl.signal });
  if (req.kind === "bad") {
    const j = await res.json();
    return { status: res.status, error: j.error };
  }
  if (res.status !== 200) return { status: res.status, body: await res.text() };
  if (!req.body.stream) {
    const j = await res.json();
    const c = j.choices[0];
    return { status: 200, text: req.chat ? c.message.content : c.text, finish: c.finish_reason };
  }
  try {
    const r = await readSse(res, req.chat, req.kind === "leave" ? () => ctl.abort() : null);
    return { status: 200, ...r };
  } catch (e) {
    if (req.kind === "leave" && e.name === "AbortError") return { status: 200, left: true };
    throw e;
  }
}

async function pool(reqs) {
  const out = new Array(reqs.length);
  let next = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < reqs.length) {
      const i = next++;
      try { out[i] = await run(reqs[i]); } catch (e) { out[i] = { status: -1, exception: String(e) }; }
    }
  }));
  return out;
}

(async () => {
  model = (await (await fetch(base + "/v1/models")).json()).data[0].id;
  // Warm-up: every kind of request once over, at full concurrency.
  const warm = await pool(Array.from({ length: WARMUP }, (_, i) => request(i + 1000)));
  if (warm.some((r) => r.status === -1)) fail("warm-up: " + JSON.stringify(warm.filter((r) => r.status === -1)[0]));
  const rss0 = rssKiB();

  const reqs = Array.from({ length: REQUESTS }, (_, i) => request(i));
  const t0 = Date.now();
  const res = await pool(reqs);
  const secs = (Date.now() - t0) / 1000;
  const n = { ok: 0, bad: 0, leave: 0 };
  for (let i = 0; i < reqs.length; i++) {
    const q = reqs[i], r = res[i];
    n[q.kind]++;
    if (r.status === -1) { fail(`request ${i} (${q.kind}): ${r.exception}`); continue; }
    if (q.kind === "bad") {
      if (!(r.status >= 400 && r.status < 500 && r.error && r.error.message && r.error.type))
        fail(`request ${i}: malformed body got ${r.status} ${JSON.stringify(r.error)}`);
    } else if (q.kind === "ok") {
      if (r.status !== 200 || typeof r.text !== "string" || !["stop", "length"].includes(r.finish))
        fail(`request ${i}: ${r.status} ${JSON.stringify(r).slice(0, 200)}`);
    } else if (r.status !== 200) {
      fail(`request ${i} (leaves): ${r.status}`);
    }
  }
  console.log(`run: ${REQUESTS} requests (${n.ok} well-formed, ${n.leave} leaving mid-stream, ${n.bad} malformed) ` +
              `from ${CLIENTS} clients in ${secs.toFixed(1)} s`);
  if (!failed) ok("every well-formed request answered, every malformed one a 4xx error object");

  // Settled: no slot busy, nothing queued, the leavers cancelled.
  await new Promise((r) => setTimeout(r, 300));
  const metrics = await (await fetch(base + "/metrics")).text();
  const metric = (name) => Number(metrics.match(new RegExp("^" + name + " (\\S+)", "m"))[1]);
  if (metric("latte_slots_busy") !== 0 || metric("latte_queue_length") !== 0)
    fail(`after the run: ${metric("latte_slots_busy")} slots busy, ${metric("latte_queue_length")} queued`);
  else ok("after the run: no slot busy, nothing queued");
  const cancelled = metric("latte_cancelled_total");
  if (cancelled < n.leave / 2) fail(`only ${cancelled} generations cancelled for ${n.leave} clients that left`);
  else ok(`${cancelled} generations cancelled for ${n.leave} clients that left`);

  const rss1 = rssKiB();
  if (process.env.LATTE_TEST_RSS_UNBOUNDED) ok(`resident memory ${rss0} KiB after the warm-up, ${rss1} KiB after the run (not bounded: sanitizer build)`);
  else if (rss1 > rss0 * 1.10) fail(`resident memory grew from ${rss0} KiB after the warm-up to ${rss1} KiB`);
  else ok(`resident memory ${rss0} KiB after the warm-up, ${rss1} KiB after the run (within 10%)`);

  // Each well-formed reply against the same request served alone.
  let same = 0, differ = 0;
  for (let i = 0; i < reqs.length; i++) {
    if (reqs[i].kind !== "ok" || res[i].status !== 200) continue;
    const alone = await run(reqs[i]);
    if (alone.text === res[i].text && alone.finish === res[i].finish) same++;
    else {
      differ++;
      fail(`request ${i}: under load ${JSON.stringify(res[i].text)}, alone ${JSON.stringify(alone.text)}`);
    }
  }
  if (!differ) ok(`all ${same} replies equal the same requests served alone`);
  const h = await fetch(base + "/health");
  if (h.status !== 200) fail("/health after the run: " + h.status);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error("FAIL: " + e.stack); process.exit(1); });
