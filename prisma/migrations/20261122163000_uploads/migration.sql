-- Files and links: extraction bookkeeping on memories, image size on attachments, upload intents.
ALTER TABLE "memories" ADD COLUMN "extracted_at" TIMESTAMPTZ(3), ADD COLUMN "extraction_error" TEXT;
ALTER TABLE "attachments" ADD COLUMN "width" INTEGER, ADD COLUMN "height" INTEGER;

CREATE TABLE "uploads" (
    "id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "object_key" TEXT NOT NULL,
    "filename" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "size_bytes" INTEGER NOT NULL,
    "purpose" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "attached_at" TIMESTAMPTZ(3),
    CONSTRAINT "uploads_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "uploads_owner_id_fkey" FOREIGN KEY ("owner_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "uploads_object_key_key" ON "uploads"("object_key");
CREATE INDEX "uploads_attached_at_created_at_idx" ON "uploads"("attached_at", "created_at");
CREATE INDEX "uploads_owner_id_idx" ON "uploads"("owner_id");
