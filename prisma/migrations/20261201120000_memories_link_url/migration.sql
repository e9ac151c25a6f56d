-- A link pushed again with the same URL is read afresh, and its content was replaced by the URL up front:
-- when the new fetch failed, the page text read last time was lost and the memory kept only the URL.
-- Such a re-push now keeps the page as content while the page is read again, and the URL to read waits
-- here; the extract step clears it. It counts only while it matches the memory's content_hash (which a
-- link keeps as the hash of its URL), so a later write of other content leaves a stale one unread.
-- Nullable and without a default: adding it rewrites no row.
ALTER TABLE "memories" ADD COLUMN "link_url" TEXT;
