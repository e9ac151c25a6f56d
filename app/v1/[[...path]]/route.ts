import { errorResponse } from "@/lib/api/envelope.ts";
import { ApiError } from "@/lib/api/errors.ts";

// Any other /v1 path — a JSON not_found, never the HTML 404 page
async function notFound(req: Request): Promise<Response> {
  const response = errorResponse(new ApiError("not_found", `No such endpoint: ${req.method} ${new URL(req.url).pathname}`));
  response.headers.set("Cache-Control", "no-store");
  return response;
}

export { notFound as GET, notFound as POST, notFound as PUT, notFound as PATCH, notFound as DELETE };
