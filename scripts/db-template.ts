// Part of `npm run build`: a migrated PGlite snapshot so the first start on an
// empty data directory skips initdb.
import { ensurePgliteTemplate } from "../lib/db/pglite-template.ts";

ensurePgliteTemplate()
  .then((file) => console.log(`engram: embedded database template ready (${file})`))
  .catch((error) => {
    console.error("engram: could not write the database template", error);
    process.exit(1);
  });
