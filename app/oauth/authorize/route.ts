import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { authorizeErrorPage, showAuthorize, submitAuthorize } from "@/lib/oauth/authorize-flow.ts";

// GET /oauth/authorize — validate the request, sign in if needed, show the consent page
export const GET = withPublic({ bucket: "light", errorResponse: authorizeErrorPage }, showAuthorize);

// POST /oauth/authorize — the consent form: allow (hubs, read or read/write) or deny
export const POST = withPublic({ bucket: "light", errorResponse: authorizeErrorPage }, submitAuthorize);

export const { PUT, PATCH, DELETE } = methodsNotAllowed("GET", "POST");
