// Generates the Prisma client. Prisma's CLI insists on a schema-engine binary
// even for `generate`, which never runs it; machines that cannot download the
// engine point it at any existing file instead (here: the node binary).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY || !existsSync(env.PRISMA_SCHEMA_ENGINE_BINARY)) {
  env.PRISMA_SCHEMA_ENGINE_BINARY = process.execPath;
}
env.PRISMA_HIDE_UPDATE_MESSAGE = "1";
const result = spawnSync(process.execPath, ["node_modules/prisma/build/index.js", "generate"], {
  env,
  stdio: "inherit",
});
process.exit(result.status ?? 1);
