import { serve } from "inngest/next";
import { inngest } from "@/inngest/client.ts";
import { functions } from "@/inngest/functions.ts";

// GET/POST/PUT /api/inngest — Inngest's sync and step-execution endpoint (used when INNGEST_EVENT_KEY or INNGEST_DEV is set)
export const { GET, POST, PUT } = serve({ client: inngest, functions });
