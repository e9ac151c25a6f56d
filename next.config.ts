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
  ],
  poweredByHeader: false,
  typedRoutes: false,
};

export default nextConfig;
