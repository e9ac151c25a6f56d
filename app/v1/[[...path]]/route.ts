import { ApiError } from "@/lib/api/errors.ts";
import { plainErrorResponse } from "@/lib/api/with-auth.ts";

// Any other /v1 path — a JSON not_found, never the HTML 404 page
async function notFound(req: Request): Promise<Response> {
  return plainErrorResponse(req, new ApiError("not_found", `No such endpoint: ${req.method} ${new URL(req.url).pathname}`));
}

export { notFound as GET, notFound as POST, notFound as PUT, notFound as PATCH, notFound as DELETE, notFound as OPTIONS };
