import { Inngest } from "inngest";

/** Event asking for a memory to be processed; the database row says what is actually due. */
export const MEMORY_PROCESS_EVENT = "engram/memory.process";

/**
 * The Inngest client. Used only when INNGEST_EVENT_KEY (Inngest Cloud) or
 * INNGEST_DEV (a local dev server) is set; otherwise the embedded runner
 * does the same work in process.
 */
export const inngest = new Inngest({ id: "engram" });
