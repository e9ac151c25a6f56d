import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { startCliLogin } from "@/lib/oauth/start-cli-login.ts";

// GET /v1/auth/google — `memax login --provider google` starts here: sign in, consent, code to the CLI's loopback address
export const GET = withPublic({ bucket: "light" }, startCliLogin);

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");
