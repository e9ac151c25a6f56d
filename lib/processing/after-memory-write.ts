/** What the background runner needs to know about a memory that was written. */
export interface WrittenMemory {
  id: string;
  hubId: string;
  processingStatus: string;
}

type Listener = (memory: WrittenMemory) => void;

const globalForListeners = globalThis as unknown as { __engramWriteListeners?: Set<Listener> };
const listeners = (globalForListeners.__engramWriteListeners ??= new Set());

/** The job runner subscribes here; the database row stays the durable record either way. */
export function onMemoryWrite(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Called after a committed write; memories whose processing is pending are handed to the runner. */
export function afterMemoryWrite(memory: WrittenMemory): void {
  if (memory.processingStatus !== "pending") return;
  for (const listener of listeners) {
    try {
      listener(memory);
    } catch (error) {
      console.error("memory write listener failed", error);
    }
  }
}
