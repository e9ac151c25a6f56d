// npm run fuzz — Schemathesis (PyPI) against /v1/openapi.json on the built server: every operation,
// with a valid API key, on a fresh embedded database. Fails on any 5xx, any response the document
// does not allow (status, content type, schema) and any body that is not Engram's envelope.
//
// End to end: a Python venv with Schemathesis under .cache/ (created once), the production build
// (built once if missing), a server on FUZZ_PORT (default 3130), a user and key from the admin
// bootstrap, the run, and teardown. Bounded by FUZZ_MAX_EXAMPLES (cases per operation and phase,
// default 25) and FUZZ_MAX_TIME (seconds, optional). FUZZ_SEED makes a run reproducible;
// FUZZ_REPORT=har keeps every request and response (default junit) in .cache/fuzz-report.
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";

import { createBenchUser, engramServer } from "../bench/lib/campaign.mjs";

const root = path.resolve(import.meta.dirname, "..");

const SCHEMATHESIS_VERSION = "4.32.5";
const venv = path.join(root, ".cache", "schemathesis-venv");
const bin = (name) => path.join(venv, "bin", name);
const say = (line) => console.log(`[fuzz] ${line}`);

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: "inherit", cwd: root, ...options });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function ensureSchemathesis() {
  const installed = existsSync(bin("schemathesis"))
    ? spawnSync(bin("schemathesis"), ["--version"], { encoding: "utf8" }).stdout.trim()
    : "";
  if (installed.endsWith(SCHEMATHESIS_VERSION)) return;
  say(`installing schemathesis ${SCHEMATHESIS_VERSION} into ${path.relative(root, venv)} (once)`);
  if (!existsSync(bin("python"))) {
    mkdirSync(path.dirname(venv), { recursive: true });
    if (run("python3", ["-m", "venv", venv]) !== 0) throw new Error("python3 -m venv failed (Debian: apt-get install python3-venv)");
  }
  if (run(bin("pip"), ["install", "-q", "--disable-pip-version-check", `schemathesis==${SCHEMATHESIS_VERSION}`]) !== 0) throw new Error("pip install schemathesis failed");
}

function ensureBuild() {
  if (existsSync(path.join(root, ".next", "BUILD_ID"))) return;
  say("no production build: npm run build (once)");
  if (run("npm", ["run", "build"]) !== 0) throw new Error("npm run build failed");
}

/** The production server exactly as `npm start` runs it (scripts/server.mjs), on a fresh embedded database. */
async function startServer({ port, env }) {
  // The fuzzer is one client sending thousands of requests a minute; the campaign server lifts the rate limits.
  const server = engramServer({ port, extraEnv: env });
  try {
    await server.start();
    return { base: server.base, apiKey: await createBenchUser(server.base, "fuzz@example.test"), log: server.log, stop: () => server.destroy() };
  } catch (error) {
    await server.destroy();
    throw error;
  }
}

/**
 * Runs Schemathesis with its output passed through, except that its pytest-style banners
 * ("===== 3 warnings in 39.6s =====") are reworded: CI verdict readers take such a line for
 * pytest's closing line, and one that counts only warnings reads as "no test ran".
 */
function runSchemathesis(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin("schemathesis"), args, { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] });
    createInterface({ input: child.stdout }).on("line", (line) => {
      const banner = line.match(/^=+ (.*?) =+$/);
      console.log(banner ? `[fuzz] -- ${banner[1]} --` : line);
    });
    child.on("error", reject);
    child.on("close", (code) => resolve(code ?? 1));
  });
}

/**
 * Real resources for path parameters. Random ids only ever reach the 404 branch; the hooks put these
 * ids into most generated cases (bench/fuzz/hooks.py), so each operation's own logic is fuzzed too.
 * Index k of every list belongs together (hub k, its invite k and transfer k).
 */
async function createFixtures(base, apiKey) {
  const call = async (key, method, route, body) => {
    const res = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const json = await res.json();
    if (res.status >= 300) throw new Error(`fixture ${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
    return json.data;
  };
  const memberKey = await createBenchUser(base, "fuzz-member@example.test");
  const member = (await call(memberKey, "GET", "/v1/auth/me")).user;
  const fixtures = { memories: [], hubs: [], members: [], invites: [], tokens: [], transfers: [], topics: [], configs: [], apiKeys: [], notifications: [] };
  for (let k = 0; k < 3; k++) {
    fixtures.memories.push((await call(apiKey, "POST", "/v1/memories", { content: `# Fixture ${k}\n\nThe fuzz run's memory number ${k}.`, tags: ["fuzz"] })).id);
    const hub = await call(apiKey, "POST", "/v1/hubs", { name: `Fuzz hub ${k}` });
    fixtures.hubs.push(hub.id);
    // Adding someone directly needs an invite to their address first (or a hub shared with them).
    if (k === 0) await call(apiKey, "POST", `/v1/hubs/${hub.id}/invites`, { role: "contributor", email: member.email });
    await call(apiKey, "POST", `/v1/hubs/${hub.id}/members`, { user_id: member.id, role: "contributor" });
    fixtures.members.push(member.id);
    const invite = await call(apiKey, "POST", `/v1/hubs/${hub.id}/invites`, { role: "viewer", email: `fuzz-invitee-${k}@example.test` });
    fixtures.invites.push(invite.id);
    fixtures.tokens.push(invite.token);
    fixtures.transfers.push((await call(apiKey, "POST", `/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: member.id })).id);
    fixtures.topics.push((await call(apiKey, "POST", "/v1/topics", { name: `Fuzz topic ${k}` })).id);
    fixtures.configs.push((await call(apiKey, "PUT", "/v1/configs", { agent: "claude-code", file_path: `fuzz-${k}.md`, scope: "global", content: `# Fuzz ${k}\n` })).id);
    fixtures.apiKeys.push((await call(apiKey, "POST", "/v1/auth/api-keys", { name: `fuzz ${k}` })).id);
  }
  // A notification for the run's user: the member invites them to a hub of the member's own.
  const theirs = await call(memberKey, "POST", "/v1/hubs", { name: "Fuzz member's hub" });
  await call(memberKey, "POST", `/v1/hubs/${theirs.id}/invites`, { role: "viewer", email: "fuzz@example.test" });
  fixtures.notifications = (await call(apiKey, "GET", "/v1/notifications?limit=3")).notifications.map((n) => n.id);
  return fixtures;
}

ensureSchemathesis();
ensureBuild();

const port = Number(process.env.FUZZ_PORT ?? 3130);
const maxExamples = process.env.FUZZ_MAX_EXAMPLES ?? "25";
// The pipeline (chunking, embedding) is not what is fuzzed and would take the CPU; FUZZ_PROCESSING=on keeps it.
const server = await startServer({ port, env: process.env.FUZZ_PROCESSING === "on" ? {} : { ENGRAM_PROCESSING: "off" } });
say(`server (scripts/server.mjs, as npm start) on ${server.base}, fresh embedded database, key for fuzz@example.test`);
const reportDir = path.join(root, ".cache", "fuzz-report");
let status = 1;
try {
  const fixtures = await createFixtures(server.base, server.apiKey);
  say(`fixtures for path parameters: ${Object.entries(fixtures).map(([kind, ids]) => `${ids.length} ${kind}`).join(", ")}`);
  const args = [
    "run",
    `${server.base}/v1/openapi.json`,
    "--checks",
    "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,engram_envelope",
    "--phases",
    process.env.FUZZ_PHASES ?? "examples,coverage,fuzzing",
    "--max-examples",
    maxExamples,
    "--workers",
    process.env.FUZZ_WORKERS ?? "1",
    "--header",
    `Authorization: Bearer ${server.apiKey}`,
    // An event stream never ends: documented, not fuzzed (tests/events.test.ts drives it).
    "--exclude-path",
    "/v1/events/stream",
    // Schemathesis reuses ids it saw in responses: it would find the run's own key and revoke it,
    // leaving every later request a 401 (tests/api-key-scopes.test.ts and tests/openapi.test.ts cover revoking).
    "--exclude-operation-id",
    "deleteAuthApiKeysById",
    "--request-timeout",
    "30",
    "--suppress-health-check",
    "all",
    "--continue-on-failure",
    "--report",
    process.env.FUZZ_REPORT ?? "junit",
    "--report-dir",
    reportDir,
    "--output-truncate",
    "true",
    ...(process.env.FUZZ_SEED ? ["--seed", process.env.FUZZ_SEED] : []),
    ...(process.env.FUZZ_MAX_TIME ? ["--max-time", process.env.FUZZ_MAX_TIME] : []),
  ];
  say(`schemathesis ${args.slice(2).join(" ").replace(/Bearer \S+/, "Bearer egk_…")}`);
  status = await runSchemathesis(args, {
    ...process.env,
    SCHEMATHESIS_HOOKS: path.join(root, "bench", "fuzz", "hooks.py"),
    ENGRAM_FUZZ_FIXTURES: JSON.stringify(fixtures),
    NO_COLOR: "1",
  });
  if (status !== 0) {
    const errors = server.log().split("\n").filter((line) => /unhandled error|Error:/.test(line));
    if (errors.length) say(`server errors logged:\n${errors.slice(0, 40).join("\n")}`);
  }
} finally {
  await server.stop();
}
say(status === 0 ? "PASS: no server errors, schema violations or envelope-less bodies" : `FAIL (schemathesis exit ${status}); report in ${path.relative(root, reportDir)}`);
process.exit(status);
