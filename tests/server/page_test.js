// The chat page at / in headless Chromium (Debian's, driven by
// puppeteer-core over the DevTools protocol): type a prompt, see the reply
// stream in, stop it with the Stop button, then a second turn that runs to
// its end; the page asks nothing of any other origin.
// Usage: node page_test.js BASE_URL
"use strict";
const puppeteer = require("puppeteer-core");
const { execFileSync } = require("node:child_process");
const [base] = process.argv.slice(2);
let failed = 0;
const fail = (m) => { failed++; console.error("FAIL: " + m); };
const ok = (m) => console.log("ok: " + m);

(async () => {
  const chromium = execFileSync("sh", ["-c", "command -v chromium"]).toString().trim();
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
                                           args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const timer = setTimeout(() => { console.error("FAIL: timed out"); process.exit(1); }, 90000);
  try {
    const page = await browser.newPage();
    const elsewhere = [];
    page.on("request", (r) => { if (!r.url().startsWith(base)) elsewhere.push(r.url()); });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(base + "/", { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("model").textContent.includes("context"), { timeout: 10000 });
    ok("the page loads and names the model: " + await page.$eval("#model", (e) => e.textContent));

    // Throttle what the page receives so the reply is still streaming when
    // Stop is pressed (the shipped model writes thousands of tokens/s).
    const cdp = await page.target().createCDPSession();
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: 1000, uploadThroughput: -1 });
    // Every length the reply's text takes, seen as it changes.
    await page.evaluate(() => {
      window.lengths = [];
      new MutationObserver(() => {
        const a = document.querySelectorAll(".msg.assistant");
        if (a.length) window.lengths.push(a[a.length - 1].textContent.length);
      }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
    });
    // Greedy: this prompt's reply runs on to max tokens on the shipped model.
    await page.$eval("#maxtokens", (e) => { e.value = "200"; });
    await page.$eval("#temperature", (e) => { e.value = "0"; });
    await page.type("#prompt", "Who was David?");
    await page.click("#send");
    await page.waitForFunction(() => new Set(window.lengths.filter((n) => n > 0)).size >= 3, { timeout: 30000 });
    ok("the reply streams in (" + (await page.evaluate(() => [...new Set(window.lengths)].slice(0, 6).join(", "))) + " characters ...)");
    if (await page.$eval("#stop", (e) => e.disabled)) fail("Stop is disabled while the reply streams");
    await page.click("#stop");
    await page.waitForFunction(() => document.getElementById("status").textContent === "stopped", { timeout: 10000 });
    const stopped = await page.$eval(".msg.assistant", (e) => e.textContent);
    await new Promise((r) => setTimeout(r, 500));
    const later = await page.$eval(".msg.assistant", (e) => e.textContent);
    if (stopped.length === 0 || later !== stopped) fail(`after Stop the text changed: ${JSON.stringify(stopped)} -> ${JSON.stringify(later)}`);
    else ok(`Stop ends the reply where it was (${stopped.length} characters kept)`);
    if (await page.$eval("#send", (e) => e.disabled)) fail("Send is still disabled after Stop");

    // A second turn, unthrottled, runs to its end; the conversation is kept.
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await page.$eval("#maxtokens", (e) => { e.value = "16"; });
    await page.type("#prompt", "Tell me a story about the king.");
    await page.click("#send");
    await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("done"), { timeout: 30000 });
    const n = await page.$$eval(".msg", (e) => e.length);
    if (n !== 4) fail(`${n} messages on the page after two turns, expected 4`);
    else ok("a second turn completes: " + await page.$eval("#status", (e) => e.textContent));
    if (elsewhere.length) fail("the page asked other origins: " + elsewhere.join(" "));
    else ok("no request left the server's origin");
    if (errors.length) fail("page errors: " + errors.join("; "));
  } finally {
    clearTimeout(timer);
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error("FAIL: " + e.stack); process.exit(1); });
