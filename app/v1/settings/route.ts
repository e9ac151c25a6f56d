import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { updateSettingsBodySchema } from "@/lib/settings/settings-fields.ts";
import { getSettings, updateSettings } from "@/lib/settings/user-settings.ts";

// GET /v1/settings — the caller's preferences and the dream settings of the hubs they own
export const GET = withAuth({ personal: true }, async (ctx) => ok(await getSettings(ctx)));

// PATCH /v1/settings — known keys only; an unknown key is a 400 naming it
export const PATCH = withAuth({ personal: true }, async (ctx, req) => ok(await updateSettings(ctx, await parseJson(req, updateSettingsBodySchema))));

export const { POST, PUT, DELETE, OPTIONS } = methodsNotAllowed("GET", "PATCH");
