import { serve } from "inngest/next";
import { inngest } from "@/inngest/client.ts";
import { functions } from "@/inngest/functions.ts";
import { config } from "@/lib/config.ts";

// GET/POST/PUT /api/inngest — Inngest's sync and step-execution endpoint (used when INNGEST_EVENT_KEY or INNGEST_DEV is set).
// A sync (PUT) registers the URL Inngest will call with every step's data: Inngest's own
// INNGEST_SERVE_ORIGIN when set (Inngest may reach the app by an inside address), else
// ENGRAM_PUBLIC_URL, never an origin made up from a request's Host header.
const serveOrigin = process.env.INNGEST_SERVE_ORIGIN || config().publicUrl;
export const { GET, POST, PUT } = serve({ client: inngest, functions, ...(serveOrigin && { serveOrigin }) });
