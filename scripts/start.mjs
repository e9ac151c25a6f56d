// npm start — serve the API and dashboard. Builds first when there is no
// production build yet, so `npm install && npm start` works on a fresh clone.
import { spawnSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const nextBin = path.join(root, "node_modules", "next", "dist", "bin", "next");

if (!existsSync(path.join(root, ".next", "BUILD_ID"))) {
  console.log("engram: no production build found — building once (this takes a minute or two)…");
  const build = spawnSync(process.execPath, [path.join(root, "scripts", "generate.mjs")], { cwd: root, stdio: "inherit" });
  if (build.status !== 0) process.exit(build.status ?? 1);
  const next = spawnSync(process.execPath, [nextBin, "build"], { cwd: root, stdio: "inherit" });
  if (next.status !== 0) process.exit(next.status ?? 1);
  const tsx = path.join(root, "node_modules", "tsx", "dist", "cli.mjs");
  const template = spawnSync(process.execPath, [tsx, path.join(root, "scripts", "db-template.ts")], { cwd: root, stdio: "inherit" });
  if (template.status !== 0) process.exit(template.status ?? 1);
}

// The local embedding model, from the verified sources `npm run models` uses (the server itself never
// downloads one). Without it the server still runs, recall on its lexical leg, and health says why.
// ENGRAM_MODELS_AT_START=0 skips it (a host that installs the model its own way, or an offline one without
// it, where each start would first wait for the hub's and PyPI's timeouts).
if ((process.env.ENGRAM_EMBEDDINGS_PROVIDER || "local").toLowerCase() === "local" && process.env.ENGRAM_MODELS_AT_START !== "0") {
  const models = spawnSync(process.execPath, [path.join(root, "scripts", "models.mjs")], { cwd: root, stdio: "inherit" });
  if (models.status !== 0) console.log("engram: the local embedding model could not be installed; recall is lexical-only until `npm run models` succeeds");
}

const port = process.env.PORT ?? "3000";
const host = process.env.HOSTNAME ?? "0.0.0.0";
// scripts/server.mjs (Next's handler in our own HTTP server) tells route handlers the socket address.
const server = spawn(process.execPath, [path.join(root, "scripts", "server.mjs")], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, PORT: port, HOSTNAME: host, NODE_ENV: "production" },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => server.kill(signal));
server.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
