import nextVitals from "eslint-config-next/core-web-vitals";
import nextTs from "eslint-config-next/typescript";

const config = [
  ...nextVitals,
  ...nextTs,
  {
    ignores: [".next/**", "node_modules/**", "lib/db/generated/**", ".data/**", ".cache/**", "tmp-scratch/**", "next-env.d.ts"],
  },
  {
    // Tests read JSON response bodies loosely.
    files: ["tests/**", "e2e/**", "bench/**", "eval/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
];

export default config;
