import path from "node:path";
import { ensurePgliteTemplate, migrationsDigest } from "../../lib/db/pglite-template.ts";

/** Every test database starts from one migrated snapshot per migration set (initdb once, not per file). */
export default async function setup({ provide }: { provide: (key: string, value: string) => void }) {
  const file = path.join(process.cwd(), "node_modules", ".cache", "engram-tests", `template-${migrationsDigest()}.tar`);
  provide("dbTemplate", await ensurePgliteTemplate(file));
}

declare module "vitest" {
  export interface ProvidedContext {
    dbTemplate: string;
  }
}
