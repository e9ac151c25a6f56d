import type { AuthContext } from "@/lib/api/context.ts";
import { findPersonaOrThrow } from "@/lib/personas/persona-source.ts";
import type { UserSetting } from "@/lib/db/generated/client.ts";
import type { UpdateSettingsBody } from "./settings-fields.ts";

const DEFAULTS = { theme: "system", locale: "", notificationsEnabled: true, chatDefaultPersonaId: "" };

function serializeSettings(row: Pick<UserSetting, "theme" | "locale" | "notificationsEnabled" | "chatDefaultPersonaId"> & { updatedAt?: Date | null }) {
  return {
    theme: row.theme,
    locale: row.locale,
    notifications_enabled: row.notificationsEnabled,
    chat_default_persona_id: row.chatDefaultPersonaId,
    updated_at: row.updatedAt ? row.updatedAt.toISOString() : null,
  };
}

/** GET /v1/settings — defaults until the person changes something. */
export async function getSettings(ctx: AuthContext) {
  const row = await ctx.db.userSetting.findUnique({ where: { userId: ctx.user.id } });
  return serializeSettings(row ?? { ...DEFAULTS, updatedAt: null });
}

/** PATCH /v1/settings — merges the given keys. */
export async function updateSettings(ctx: AuthContext, input: UpdateSettingsBody) {
  const personaId = input.chat_default_persona_id;
  const data = {
    ...(input.chat_default_persona_id !== undefined && { chatDefaultPersonaId: input.chat_default_persona_id }),
    ...(input.theme !== undefined && { theme: input.theme }),
    ...(input.locale !== undefined && { locale: input.locale }),
    ...(input.notifications_enabled !== undefined && { notificationsEnabled: input.notifications_enabled }),
    updatedAt: ctx.now(),
  };
  const row = await ctx.db.$transaction(async (tx) => {
    if (personaId) {
      // The persona's config held (KEY SHARE) until the default naming it commits: an account-data
      // deletion removing the config meanwhile then waits, and clears the default after it; checked
      // without the lock, the default was written after that deletion and named nothing for good.
      await tx.$queryRaw`SELECT 1 FROM agent_configs WHERE id = ${personaId}::uuid AND owner_id = ${ctx.user.id}::uuid FOR KEY SHARE`;
      await findPersonaOrThrow(tx, ctx.user.id, personaId);
    }
    return tx.userSetting.upsert({
      where: { userId: ctx.user.id },
      create: { userId: ctx.user.id, ...DEFAULTS, ...data },
      update: data,
    });
  });
  return serializeSettings(row);
}
