import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  // Native/WASM packages load from node_modules at run time instead of being bundled.
  serverExternalPackages: [
    "@electric-sql/pglite",
    "@electric-sql/pglite-pgvector",
    "@electric-sql/pglite-socket",
    "pglite-prisma-adapter",
    "@prisma/client",
    "@prisma/adapter-pg",
    "pg",
    "@huggingface/transformers",
    "onnxruntime-node",
    // The extraction worker (lib/extraction/extract-worker.mjs) imports these from node_modules at run
    // time; external, they and their dependencies are in the traces of the routes that read files.
    "unpdf",
    "mammoth",
    "linkedom",
    "turndown",
    "@mozilla/readability",
  ],
  poweredByHeader: false,
  // scripts/server.mjs compresses responses itself, at a cheaper zlib level.
  compress: false,
  // No page of Engram may be framed, on another site or a same-site one (another port on localhost, a
  // sibling subdomain): a framed dashboard could be clicked through (delete, accept, unlink) under a
  // decoy. Routes with their own policy (the consent page, downloads) add to these, never loosen them;
  // pages get the same directives plus a per-response script nonce from proxy.ts.
  async headers() {
    return [
      {
        source: "/:path*",
        headers: [
          { key: "X-Frame-Options", value: "DENY" },
          { key: "Content-Security-Policy", value: "frame-ancestors 'none'; base-uri 'self'; object-src 'none'" },
          { key: "X-Content-Type-Options", value: "nosniff" },
          { key: "Referrer-Policy", value: "same-origin" },
        ],
      },
    ];
  },
  typedRoutes: false,
};

export default nextConfig;
