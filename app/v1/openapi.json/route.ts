import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";

// GET /v1/openapi.json — the OpenAPI 3.1 document of this API (public; a plain document, not the envelope)
export const GET = withPublic({ bucket: "light" }, async () => Response.json(openApiDocument()));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
