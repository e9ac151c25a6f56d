// npm run bench:chat — agent chat turns on the built server (embedded database, local MiniLM, no chat
// model: the extractive answer). Never part of npm test; never builds.
//
//   1. one client, one turn at a time: POST …/messages latency, then time from the send to the first
//      message.text event and to message.completed on the answer's stream
//   2. BENCH_CLIENTS sessions at once for BENCH_SECONDS: turns/s and the same times under load
//
//   BENCH_MEMORIES (default 1000)   BENCH_TURNS (default 100)   BENCH_CLIENTS (default 8)   BENCH_SECONDS (default 20)
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { root, startServer, summarize } from "./lib/server.mjs";
import { noteText } from "./lib/campaign.mjs";

const MEMORIES = Number(process.env.BENCH_MEMORIES ?? 1000);
const TURNS = Number(process.env.BENCH_TURNS ?? 100);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const TOPICS = ["deploy", "billing", "search", "auth", "queue", "cache", "backup", "alerts"];
const QUESTIONS = TOPICS.flatMap((t) => [`How do I restart the ${t} worker?`, `What if the ${t} queue depth is too high?`, `Who owns the ${t} runbook?`]);

const server = await startServer();
const headers = { authorization: `Bearer ${server.apiKey}`, "content-type": "application/json" };
const api = async (method, route, body) => {
  const res = await fetch(`${server.base}${route}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return { status: res.status, data: json.data };
};

/** Reads the turn's stream until its terminal event; the times (ms from `t0`) of the first text and of the end. */
async function follow(url, t0) {
  const res = await fetch(`${server.base}${url}`, { headers: { ...headers, accept: "text/event-stream" } });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let firstText;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error("stream ended without a terminal event");
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = /^event: (.+)$/m.exec(buffer.slice(0, cut))?.[1];
      buffer = buffer.slice(cut + 2);
      if (event === "message.text" && firstText === undefined) firstText = performance.now() - t0;
      if (event && /^message\.(completed|partial_failed|failed|canceled)$/.test(event)) {
        await reader.cancel();
        if (event !== "message.completed") throw new Error(`turn ended ${event}`);
        return { firstText: firstText ?? NaN, complete: performance.now() - t0 };
      }
    }
  }
}

/** One turn: the send, then its stream to the end. */
async function turn(sessionId, question) {
  const t0 = performance.now();
  const sent = await api("POST", `/v1/chat/sessions/${sessionId}/messages`, { content: question, idempotency_key: crypto.randomUUID() });
  const send = performance.now() - t0;
  return { send, ...(await follow(sent.data.resume_url, t0)) };
}

/** A session with room: a session holds at most 1,000 messages, two per turn. */
function sessions() {
  let current;
  let used = 0;
  return async () => {
    if (!current || used >= 400) [current, used] = [(await api("POST", "/v1/chat/sessions", { scope_type: "user_all_hubs" })).data.id, 0];
    used++;
    return current;
  };
}

const fmt = (s) => `p50=${s.p50.toFixed(1)} ms  p95=${s.p95.toFixed(1)} ms  max=${s.max.toFixed(1)} ms  (n=${s.count})`;

try {
  console.log(`cold start ${server.coldStartMs.toFixed(0)} ms; pushing ${MEMORIES} memories…`);
  const ids = [];
  for (let start = 0; start < MEMORIES; start += 8) {
    const batch = Array.from({ length: Math.min(8, MEMORIES - start) }, (_, i) => api("POST", "/v1/memories", { content: noteText(`n${start + i}`) }));
    ids.push(...(await Promise.all(batch)).map((r) => r.data.id));
  }
  const waitStart = performance.now();
  for (const id of ids) {
    for (;;) {
      const { data } = await api("GET", `/v1/memories/${id}`);
      if (["done", "failed"].includes(data.processing_status ?? "done")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  console.log(`all processed (${((performance.now() - waitStart) / 1000).toFixed(1)} s after the last push)`);

  const next = sessions();
  for (let i = 0; i < 5; i++) await turn(await next(), QUESTIONS[i % QUESTIONS.length]); // warm-up
  const single = [];
  for (let i = 0; i < TURNS; i++) single.push(await turn(await next(), QUESTIONS[i % QUESTIONS.length]));
  const one = { send: summarize(single.map((t) => t.send)), first_text: summarize(single.map((t) => t.firstText)), complete: summarize(single.map((t) => t.complete)) };
  console.log(`one client, ${TURNS} turns`);
  for (const [name, s] of Object.entries(one)) console.log(`  ${name.padEnd(10)} ${fmt(s)}`);

  const loaded = [];
  const deadline = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const mine = sessions();
      for (let i = 0; performance.now() < deadline; i++) loaded.push(await turn(await mine(), QUESTIONS[(c * 7 + i) % QUESTIONS.length]));
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const many = { send: summarize(loaded.map((t) => t.send)), first_text: summarize(loaded.map((t) => t.firstText)), complete: summarize(loaded.map((t) => t.complete)) };
  console.log(`${CLIENTS} clients for ${SECONDS} s: ${loaded.length} turns, ${(loaded.length / elapsed).toFixed(1)} turns/s`);
  for (const [name, s] of Object.entries(many)) console.log(`  ${name.padEnd(10)} ${fmt(s)}`);

  const out = path.join(root, "bench", "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, "chat.json"), JSON.stringify({ memories: MEMORIES, one_client: one, loaded: { clients: CLIENTS, seconds: SECONDS, turns: loaded.length, turns_per_s: loaded.length / elapsed, ...many } }, null, 2));
} finally {
  await server.stop();
}
