import { assertModelEndpoints } from "@/lib/ai/model-endpoints.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { startEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { startEmailSignInCodesPrune } from "@/lib/auth/prune-email-sign-in-codes.ts";
import { startRevokedApiKeysPrune } from "@/lib/auth/prune-revoked-api-keys.ts";
import { assertWholeNumberSettings, config, configWarnings } from "@/lib/config.ts";
import { startConfigDeletionsPrune } from "@/lib/configs/prune-config-deletions.ts";
import { startEventsPrune } from "@/lib/events/prune-events.ts";
import { startDeletedHubsPurge } from "@/lib/hubs/purge-deleted-hubs.ts";
import { startTopicDeletesSweep } from "@/lib/topics/delete-topic.ts";
import { startInvitesPrune } from "@/lib/invites/prune-invites.ts";
import { startMailOutboxPrune } from "@/lib/mail/prune-mail-outbox.ts";
import { startNotificationsPrune } from "@/lib/notifications/prune-notifications.ts";
import { startUnusedOAuthClientsPrune } from "@/lib/oauth/prune-unused-clients.ts";
import { assertQuotaLimits } from "@/lib/quotas/quota-limits.ts";
import { startIndexChangesPrune } from "@/lib/recall/prune-index-changes.ts";
import { assertUploadLimit } from "@/lib/uploads/upload-limits.ts";
import { startAccountDataDeletionsResume } from "@/lib/users/resume-account-data-deletions.ts";
import { kickCookingBoards } from "@/lib/boards/kick-custom-board.ts";

/**
 * Server start-up: open (and migrate) the database so the first request does
 * not pay for it, and tell the operator how to get a first user on a fresh install.
 */
export async function startServer(): Promise<void> {
  const started = Date.now();
  assertWholeNumberSettings();
  assertUploadLimit();
  assertQuotaLimits();
  assertModelEndpoints();
  for (const warning of configWarnings()) console.warn(warning);
  const database = await getDatabase();
  const users = await database.prisma.user.count();
  console.log(`engram: ${database.kind} database ready in ${Date.now() - started} ms`);
  startEmbeddedMaintenance(database);
  startEventsPrune(database);
  startIndexChangesPrune(database);
  startConfigDeletionsPrune(database);
  startMailOutboxPrune(database);
  startUnusedOAuthClientsPrune(database);
  startRevokedApiKeysPrune(database);
  startEmailSignInCodesPrune(database);
  startInvitesPrune(database);
  startDeletedHubsPurge(database);
  startTopicDeletesSweep(database);
  startNotificationsPrune(database);
  startAccountDataDeletionsResume(database);
  kickCookingBoards(database);
  if (users === 0) {
    const port = process.env.PORT ?? "3000";
    console.log(
      config().adminToken
        ? `engram: no users yet — create the first one: curl -X POST http://localhost:${port}/v1/admin/users -H "Authorization: Bearer $ENGRAM_ADMIN_TOKEN" -H "Content-Type: application/json" -d '{"email":"you@example.com","name":"You"}'  (or sign up at http://localhost:${port}/)`
        : `engram: no users yet — sign up at http://localhost:${port}/ or restart with ENGRAM_ADMIN_TOKEN set and POST /v1/admin/users to create the first user and API key`,
    );
  }
}
