import { serve } from "inngest/next";
import { inngest } from "@/inngest/client.ts";
import { functions } from "@/inngest/functions.ts";
import { config } from "@/lib/config.ts";

// GET/POST/PUT /api/inngest — Inngest's sync and step-execution endpoint (used when INNGEST_EVENT_KEY or INNGEST_DEV is set).
// A sync (PUT) registers the URL Inngest will call with every step's data: with ENGRAM_PUBLIC_URL set
// that is this server's public origin, never one made up from a request's Host header.
export const { GET, POST, PUT } = serve({ client: inngest, functions, ...(config().publicUrl && { serveOrigin: config().publicUrl }) });
