// `latte serve` figures (scripts/bench_server.sh runs this against a server
// it started): time to first token and tokens/s per stream at 1, 4 and 8
// concurrent streamed requests, and a second chat turn's time to first
// token with the conversation's prefix reused from its slot and without
// (every slot overwritten by other requests first). EOS is banned so every
// reply runs to max_tokens. Usage: node bench_server.js BASE_URL [STREAMS]
// Env: BENCH_TOKENS (tokens per reply, 64), BENCH_REPS (second-turn pairs, 3).
"use strict";
const [base, streamsArg = "1,4,8"] = process.argv.slice(2);
const now = () => performance.now() / 1000;
const TOKENS = Number(process.env.BENCH_TOKENS || 64), REPS = Number(process.env.BENCH_REPS || 3);
let model, eos;

async function stream(body) {
  const t0 = now();
  const res = await fetch(base + "/v1/chat/completions", { method: "POST",
    body: JSON.stringify({ model, stream: true, stream_options: { include_usage: true },
                           logit_bias: eos >= 0 ? { [eos]: -100 } : {}, ...body }) });
  if (res.status !== 200) throw new Error(res.status + " " + await res.text());
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "", first = null, last = null, usage = null, text = "";
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    buf += dec.decode(r.value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, cut); buf = buf.slice(cut + 2);
      if (!line.startsWith("data: ")) continue;  // keep-alive comments
      const ev = line.slice(6);
      if (ev === "[DONE]") continue;
      const j = JSON.parse(ev);
      if (j.usage) usage = j.usage;
      const c = j.choices[0];
      if (c && c.delta && c.delta.content) { if (first === null) first = now(); last = now(); text += c.delta.content; }
    }
  }
  const n = usage.completion_tokens;
  return { ttft: first - t0, tps: n > 1 ? (n - 1) / (last - first) : 0, usage, text };
}
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const filler = (i) => `Conversation ${i}: ` + "the quick brown fox jumps over the lazy dog and keeps running. ".repeat(8);

(async () => {
  const m = (await (await fetch(base + "/v1/models")).json()).data[0];
  model = m.id; eos = m.meta.eos_token_id;
  console.log(`model ${model}, ${m.meta.slots} slots of ${m.meta.n_ctx} tokens`);
  await stream({ messages: [{ role: "user", content: "warm up" }], max_tokens: 8 });
  console.log(`${TOKENS} tokens per reply, greedy, EOS banned`);
  console.log("| streams | prompt tokens | TTFT median (s) | TTFT max (s) | tok/s per stream (median) | aggregate tok/s |");
  console.log("|---|---|---|---|---|---|");
  for (const n of streamsArg.split(",").map(Number)) {
    const t0 = now();
    const rs = await Promise.all(Array.from({ length: n }, (_, i) =>
      stream({ messages: [{ role: "user", content: filler(i + 100 * n) }], max_tokens: TOKENS, temperature: 0 })));
    const wall = now() - t0;
    const total = rs.reduce((a, r) => a + r.usage.completion_tokens, 0);
    console.log(`| ${n} | ${rs[0].usage.prompt_tokens} | ${median(rs.map((r) => r.ttft)).toFixed(3)} | ` +
                `${Math.max(...rs.map((r) => r.ttft)).toFixed(3)} | ${median(rs.map((r) => r.tps)).toFixed(1)} | ${(total / wall).toFixed(1)} |`);
  }
  // Second turn: a long first turn, then one more user message.
  const system = { role: "system", content: "You are a careful assistant. " + filler("system").repeat(6) };
  const turn = async (evict) => {
    const msgs = [system, { role: "user", content: "First question " + Math.random() }];
    const r1 = await stream({ messages: msgs, max_tokens: 16, temperature: 0 });
    if (evict) await Promise.all(Array.from({ length: m.meta.slots }, (_, i) =>
      stream({ messages: [{ role: "user", content: "other " + i + Math.random() }], max_tokens: 4 })));
    const r2 = await stream({ messages: msgs.concat([{ role: "assistant", content: r1.text },
                                                      { role: "user", content: "And then?" }]), max_tokens: 4, temperature: 0 });
    return r2;
  };
  const reuse = [], fresh = [];
  for (let k = 0; k < REPS; k++) { reuse.push(await turn(false)); fresh.push(await turn(true)); }
  console.log(`second turn (${reuse[0].usage.prompt_tokens} prompt tokens): TTFT ${median(reuse.map((r) => r.ttft)).toFixed(3)} s ` +
              `reusing ${reuse[0].usage.prompt_tokens_details.cached_tokens} cached tokens, ` +
              `${median(fresh.map((r) => r.ttft)).toFixed(3)} s without (cached ${fresh[0].usage.prompt_tokens_details.cached_tokens})`);
})().catch((e) => { console.error(e.stack); process.exit(1); });
