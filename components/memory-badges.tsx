import type { Memory } from "@/lib/web/types.ts";
import { Badge } from "./ui.tsx";

/** Whether background processing (classify, chunk, embed, summarise) is still to finish. */
export function isProcessing(memory: Pick<Memory, "state" | "processing_status">): boolean {
  return memory.state === "processing" || memory.processing_status === "pending" || memory.processing_status === "processing" || memory.processing_status === "running";
}

export function ProcessingBadge({ memory }: { memory: Pick<Memory, "state" | "processing_status" | "processing_error"> }) {
  if (memory.processing_status === "done" && memory.processing_error) {
    // Processed, but part of a file or link could not be read.
    return (
      <Badge tone="amber" title={memory.processing_error}>
        ready, partly read
      </Badge>
    );
  }
  if (memory.processing_error || memory.processing_status === "failed") {
    return (
      <Badge tone="red" title={memory.processing_error ?? "Processing failed"}>
        processing failed
      </Badge>
    );
  }
  if (isProcessing(memory)) {
    return (
      <Badge tone="amber" title="Classification, chunking, embedding and summary run in the background">
        processing…
      </Badge>
    );
  }
  if (memory.state === "archived") return <Badge>archived</Badge>;
  return (
    <Badge tone="emerald" title="Processed: searchable by recall">
      ready
    </Badge>
  );
}
