-- superseded_by says why an archived memory is out of use (a dream merged it, or a review kept the
-- other). A restore by PATCH {state: "active"} left it, so memories restored that way before it cleared
-- it (lib/memories/update-memory.ts) still name the memory they were merged into: cleared once here.
-- No trigger fires on this column (none names it), and updated_at stays: no client sees a change.
UPDATE "memories" SET "superseded_by" = NULL WHERE "superseded_by" IS NOT NULL AND "state" <> 'archived';
