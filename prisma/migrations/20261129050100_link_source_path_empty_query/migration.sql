-- Link memories stored before the link normaliser dropped an empty query kept its "?" in source_path
-- ("https://x/a?"), so a push of the same URL now (source_path "https://x/a") made a second memory of
-- the page instead of refreshing the first. Their source_path is normalised the same way: only where it
-- is the link itself (a source_path the caller chose is theirs) and has no other "?" or "#". Where the
-- hub already holds the normalised path (the page was pushed again since), the old memory keeps its own:
-- (hub_id, source_path) is unique. The content is left as it is; the next push of the link refreshes it.
UPDATE "memories" AS m
   SET "source_path" = left(m."source_path", -1)
 WHERE m."content_type" = 'link'
   AND m."source_path" = m."content"
   AND m."source_path" ~ '^[Hh][Tt][Tt][Pp][Ss]?://[^?#]*\?$'
   AND NOT EXISTS (SELECT 1 FROM "memories" AS o WHERE o."hub_id" = m."hub_id" AND o."source_path" = left(m."source_path", -1));
