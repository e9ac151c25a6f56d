-- Hub appearance and per-hub settings (Memax SDK HubUpdateParams).
ALTER TABLE "hubs" ADD COLUMN "icon" TEXT;
ALTER TABLE "hubs" ADD COLUMN "accent" TEXT;
ALTER TABLE "hubs" ADD COLUMN "header_aurora_mode" TEXT;
ALTER TABLE "hubs" ADD COLUMN "settings" JSONB NOT NULL DEFAULT '{}';

-- Invites addressed to an existing account (invitee: { user_id } | { email }).
ALTER TABLE "invites" ADD COLUMN "invitee_user_id" UUID;
CREATE INDEX "invites_invitee_user_id_idx" ON "invites"("invitee_user_id");

-- Topics become a tree with presentation fields and a soft archive.
ALTER TABLE "topics" ADD COLUMN "parent_id" UUID;
ALTER TABLE "topics" ADD COLUMN "description" TEXT NOT NULL DEFAULT '';
ALTER TABLE "topics" ADD COLUMN "icon" TEXT NOT NULL DEFAULT '';
ALTER TABLE "topics" ADD COLUMN "position" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "topics" ADD COLUMN "pinned" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "topics" ADD COLUMN "user_modified" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "topics" ADD COLUMN "archived_at" TIMESTAMPTZ(3);
ALTER TABLE "topics" ADD CONSTRAINT "topics_parent_id_fkey" FOREIGN KEY ("parent_id") REFERENCES "topics"("id") ON DELETE SET NULL ON UPDATE CASCADE;
CREATE INDEX "topics_parent_id_idx" ON "topics"("parent_id");

-- Names are unique among siblings (case-insensitive), no longer across the whole hub:
-- "Backend / Notes" and "Frontend / Notes" may both exist.
DROP INDEX "topics_hub_id_name_key";
CREATE UNIQUE INDEX "topics_sibling_name_key" ON "topics"("hub_id", COALESCE("parent_id", '00000000-0000-0000-0000-000000000000'::uuid), lower("name"));
CREATE INDEX "topics_hub_id_idx" ON "topics"("hub_id");
