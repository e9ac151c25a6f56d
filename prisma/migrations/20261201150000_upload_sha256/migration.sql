-- The sha256 of an upload's bytes, once a create has hashed them (stores that record none: S3, Vercel
-- Blob). Each create hashed the whole object again, up to 2 GiB read through the server, also when it
-- then failed; the object is written once, so its first hash stands. NULL: not hashed yet.
ALTER TABLE "uploads" ADD COLUMN "sha256" text;
