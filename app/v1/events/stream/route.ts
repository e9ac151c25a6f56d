import { queryParams } from "@/lib/api/parse.ts";
import { authenticate, methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { openEventStream } from "@/lib/events/stream-events.ts";

// GET /v1/events/stream — server-sent events of the caller's hubs (?hub_id, ?types=a,b or prefix.*; Last-Event-ID resumes; HEAD: headers only, no stream)
export const GET = withAuth({ bucket: "light" }, async (ctx, req) => {
  const params = queryParams(req, ["hub_id", "types", "last_event_id"]);
  const types = params.getAll("types").flatMap((value) => value.split(",")).map((t) => t.trim()).filter(Boolean);
  return openEventStream(ctx, {
    hubId: params.get("hub_id")?.trim() || undefined,
    types,
    lastEventId: req.headers.get("last-event-id") ?? params.get("last_event_id") ?? undefined,
    reauthenticate: () => authenticate(ctx, req),
    head: req.method === "HEAD",
  });
});

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
